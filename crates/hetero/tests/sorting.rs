//! Sort, sort of pairs, histogram, select and the one-to-many association
//! against CPU references, on every backend: lengths at the tiles' edges,
//! keys all equal, already sorted, reversed, few distinct, NaN and ±0,
//! every direction, a spread of bit ranges, and every refusal.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use hetero::algorithms::{Algorithms, SortKey, SortOrder};
use hetero::{AnyDevice, Backend, Context, ErrorKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Lengths at and around the sort's tiles (4096 and 3072 keys, and halves
/// of them where shared memory is short) and some random ones.
fn lengths(rng: &mut ChaCha8Rng) -> Vec<usize> {
    let mut v = vec![0, 1, 2, 255, 256, 257];
    for tile in [4096, 3072, 2048] {
        v.extend([tile - 1, tile, tile + 1, 3 * tile + 17]);
    }
    v.extend((0..2).map(|_| rng.random_range(1..150_000)));
    v
}

/// A key type with the test's own order-preserving bits.
trait Key: SortKey + std::fmt::Debug {
    const WIDTH: u32;
    fn random(rng: &mut ChaCha8Rng) -> Self;
    /// One of a few values (`choice` small).
    fn few(choice: u32) -> Self;
    /// The bits whose unsigned order is the key's order.
    fn ordered(self) -> u64;
    /// Keys that sort at the edges: zeros of both signs, NaNs, extremes.
    fn specials() -> Vec<Self>;
    fn bits(self) -> u64;
}

macro_rules! int_key {
    ($t:ty, $u:ty) => {
        impl Key for $t {
            const WIDTH: u32 = <$t>::BITS;
            fn random(rng: &mut ChaCha8Rng) -> Self {
                rng.random()
            }
            fn few(choice: u32) -> Self {
                (choice as $t).wrapping_mul(7).wrapping_sub(10)
            }
            fn ordered(self) -> u64 {
                ((self as $u) ^ ((<$t>::MIN as $u) & (1 << (<$t>::BITS - 1)))) as u64
            }
            fn specials() -> Vec<Self> {
                vec![<$t>::MIN, <$t>::MAX, 0, 1, <$t>::MIN.wrapping_add(1), <$t>::MAX - 1]
            }
            fn bits(self) -> u64 {
                self as $u as u64
            }
        }
    };
}
int_key!(u32, u32);
int_key!(i32, u32);
int_key!(u64, u64);
int_key!(i64, u64);

macro_rules! float_key {
    ($t:ty, $u:ty) => {
        impl Key for $t {
            const WIDTH: u32 = <$u>::BITS;
            fn random(rng: &mut ChaCha8Rng) -> Self {
                rng.random_range(-1.0e3..1.0e3)
            }
            fn few(choice: u32) -> Self {
                choice as $t * 0.5 - 2.0
            }
            fn ordered(self) -> u64 {
                let b = self.to_bits();
                let sign: $u = 1 << (<$u>::BITS - 1);
                (if b & sign != 0 { !b } else { b | sign }) as u64
            }
            fn specials() -> Vec<Self> {
                vec![
                    0.0,
                    -0.0,
                    <$t>::NAN,
                    -<$t>::NAN,
                    <$t>::INFINITY,
                    <$t>::NEG_INFINITY,
                    <$t>::MIN_POSITIVE,
                    -<$t>::MIN_POSITIVE,
                    <$t>::from_bits(1),
                ]
            }
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
        }
    };
}
float_key!(f32, u32);
float_key!(f64, u64);

/// The keys of each shape the tests sort.
fn shapes<K: Key>(n: usize, rng: &mut ChaCha8Rng) -> Vec<(&'static str, Vec<K>)> {
    let random: Vec<K> = (0..n).map(|_| K::random(rng)).collect();
    let mut sorted = random.clone();
    sorted.sort_by_key(|k| k.ordered());
    let reversed: Vec<K> = sorted.iter().rev().copied().collect();
    let specials = K::specials();
    let mixed: Vec<K> = (0..n)
        .map(|i| if i % 3 == 0 { specials[i % specials.len()] } else { K::few(rng.random_range(0..5)) })
        .collect();
    vec![
        ("random", random),
        ("all equal", vec![K::few(3); n]),
        ("sorted", sorted),
        ("reversed", reversed),
        ("few distinct with specials", mixed),
    ]
}

/// The stable order of `keys` by `bits` of their ordered bits: the
/// indices of the keys in sorted order.
fn reference<K: Key>(keys: &[K], descending: bool, bits: std::ops::Range<u32>) -> Vec<usize> {
    let mask =
        if bits.end - bits.start == 64 { u64::MAX } else { ((1u64 << (bits.end - bits.start)) - 1) << bits.start };
    let mut order: Vec<usize> = (0..keys.len()).collect();
    let rank = |i: usize| {
        let o = keys[i].ordered() & mask;
        if descending { !o & mask } else { o }
    };
    order.sort_by_key(|&i| rank(i));
    order
}

fn order_of(descending: bool, bits: Option<std::ops::Range<u32>>) -> SortOrder {
    let order = if descending { SortOrder::descending() } else { SortOrder::ascending() };
    match bits {
        Some(b) => order.bits(b),
        None => order,
    }
}

/// Sorts keys, and keys with their indices as values (4 and 8 bytes),
/// and compares bits and orders with the reference.
fn check_sort<K: Key>(
    ctx: &Context<AnyDevice>,
    algorithms: &Algorithms,
    keys: &[K],
    descending: bool,
    bits: Option<std::ops::Range<u32>>,
    what: &str,
) {
    let stream = ctx.stream().unwrap();
    let order = reference(keys, descending, bits.clone().unwrap_or(0..K::WIDTH));
    let want: Vec<u64> = order.iter().map(|&i| keys[i].bits()).collect();
    let sort_order = order_of(descending, bits.clone());
    let what = format!(
        "{what}: {} keys of {}, descending {descending}, bits {bits:?}",
        keys.len(),
        std::any::type_name::<K>()
    );

    let mut device = stream.upload(keys).unwrap();
    algorithms.sort(&stream, &mut device, &sort_order).unwrap();
    let got: Vec<u64> = stream.download(&device).unwrap().iter().map(|k| k.bits()).collect();
    assert_eq!(got, want, "sort, {what}");

    let mut device = stream.upload(keys).unwrap();
    let index: Vec<u32> = (0..keys.len() as u32).collect();
    let mut values = stream.upload(&index).unwrap();
    algorithms.sort_pairs(&stream, &mut device, &mut values, &sort_order).unwrap();
    let got: Vec<u64> = stream.download(&device).unwrap().iter().map(|k| k.bits()).collect();
    assert_eq!(got, want, "sort_pairs keys, {what}");
    let got: Vec<usize> = stream.download(&values).unwrap().iter().map(|&v| v as usize).collect();
    assert_eq!(got, order, "sort_pairs values (u32), {what}");

    let mut device = stream.upload(keys).unwrap();
    let wide: Vec<u64> = (0..keys.len() as u64).map(|i| i << 32 | 0xdead).collect();
    let mut values = stream.upload(&wide).unwrap();
    algorithms.sort_pairs(&stream, &mut device, &mut values, &sort_order).unwrap();
    let got: Vec<usize> = stream.download(&values).unwrap().iter().map(|&v| (v >> 32) as usize).collect();
    assert_eq!(got, order, "sort_pairs values (u64), {what}");
}

fn sorts_of<K: Key>(ctx: &Context<AnyDevice>) {
    let algorithms = Algorithms::new(ctx);
    let mut rng = ChaCha8Rng::seed_from_u64(54 + u64::from(K::WIDTH) + K::KIND as u64);
    for n in lengths(&mut rng) {
        for (shape, keys) in shapes::<K>(n, &mut rng) {
            check_sort(ctx, &algorithms, &keys, false, None, shape);
            if n % 2 == 1 || n < 300 {
                check_sort(ctx, &algorithms, &keys, true, None, shape);
            }
        }
    }
    // Bit ranges: empty, one bit, within a digit, across digits, the top.
    let keys: Vec<K> = (0..3000).map(|_| K::random(&mut rng)).collect();
    let w = K::WIDTH;
    let mut ranges = vec![0..0, 0..1, w - 1..w, 3..11, 8..16, 5..w - 3, 0..w, w / 2..w / 2];
    for begin in (0..w).step_by(7) {
        ranges.push(begin..(begin + 9).min(w));
    }
    for range in ranges {
        check_sort(ctx, &algorithms, &keys, false, Some(range.clone()), "bit range");
        check_sort(ctx, &algorithms, &keys, true, Some(range), "bit range");
    }
}

/// Refusals: a bad bit range, values of a size it does not move, lengths
/// that differ.
fn sort_refusals(ctx: &Context<AnyDevice>) {
    let algorithms = Algorithms::new(ctx);
    let stream = ctx.stream().unwrap();
    let mut keys = stream.upload(&[3u32, 1, 2]).unwrap();
    let e = algorithms.sort(&stream, &mut keys, &SortOrder::ascending().bits(0..33)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfBounds, "{e}");
    assert!(e.to_string().contains("0..32"), "{e}");
    let mut bytes = stream.upload(&[1u16, 2, 3]).unwrap();
    let e = algorithms.sort_pairs(&stream, &mut keys, &mut bytes, &SortOrder::ascending()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Config, "{e}");
    let mut short = stream.upload(&[1u32, 2]).unwrap();
    let e = algorithms.sort_pairs(&stream, &mut keys, &mut short, &SortOrder::ascending()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfBounds, "{e}");
    // Nothing was moved by the refusals.
    assert_eq!(stream.download(&keys).unwrap(), [3, 1, 2]);
}

fn all_sorts(backend: Backend) {
    let Some(ctx) = hetero::testing::context_or_skip(backend).unwrap_or_else(|e| panic!("{e}")) else { return };
    sorts_of::<u32>(&ctx);
    sorts_of::<i32>(&ctx);
    sorts_of::<u64>(&ctx);
    sorts_of::<i64>(&ctx);
    sorts_of::<f32>(&ctx);
    sorts_of::<f64>(&ctx);
    sort_refusals(&ctx);
}

/// One test per backend, so that they run in parallel.
macro_rules! tests {
    ($($name:ident: $body:ident),*) => {$(
        mod $name {
            use super::*;
            #[test]
            fn host() {
                $body(Backend::Host);
            }
            #[test]
            fn opencl() {
                $body(Backend::OpenCl);
            }
            #[test]
            fn cuda() {
                $body(Backend::Cuda);
            }
            #[test]
            fn hip() {
                $body(Backend::Hip);
            }
        }
    )*};
}

tests!(sort: all_sorts);
