//! Sort, sort of pairs, histogram, select and the one-to-many association
//! against CPU references, on every backend: lengths at the tiles' edges,
//! keys all equal, already sorted, reversed, few distinct, NaN and ±0,
//! every direction, a spread of bit ranges, and every refusal.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use hetero::algorithms::{Algorithms, Bins, Predicate, SortKey, SortOrder};
use hetero::{AnyDevice, Backend, Context, ErrorKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Panics naming the first element where `got` and `want` differ (not
/// printing either whole: they can hold 100 000 elements).
#[track_caller]
fn same<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
        panic!("{what}: element {i} is {:?}, want {:?} ({} elements)", got[i], want[i], want.len());
    }
    assert_eq!(got.len(), want.len(), "{what}: lengths");
}

/// Prints a step to stderr where `HETERO_TEST_TRACE` is set: where a
/// driver crashes the process, the last step printed says where.
fn trace(step: impl FnOnce() -> String) {
    if std::env::var_os("HETERO_TEST_TRACE").is_some() {
        eprintln!("step: {}", step());
    }
}

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

    trace(|| format!("sort, {what}"));
    let mut device = stream.upload(keys).unwrap();
    algorithms.sort(&stream, &mut device, &sort_order).unwrap();
    let got: Vec<u64> = stream.download(&device).unwrap().iter().map(|k| k.bits()).collect();
    same(&got, &want, &format!("sort, {what}"));

    trace(|| format!("sort_pairs u32, {what}"));
    let mut device = stream.upload(keys).unwrap();
    let index: Vec<u32> = (0..keys.len() as u32).collect();
    let mut values = stream.upload(&index).unwrap();
    algorithms.sort_pairs(&stream, &mut device, &mut values, &sort_order).unwrap();
    let got: Vec<u64> = stream.download(&device).unwrap().iter().map(|k| k.bits()).collect();
    same(&got, &want, &format!("sort_pairs keys, {what}"));
    let got: Vec<usize> = stream.download(&values).unwrap().iter().map(|&v| v as usize).collect();
    same(&got, &order, &format!("sort_pairs values (u32), {what}"));

    trace(|| format!("sort_pairs u64, {what}"));
    let mut device = stream.upload(keys).unwrap();
    let wide: Vec<u64> = (0..keys.len() as u64).map(|i| i << 32 | 0xdead).collect();
    let mut values = stream.upload(&wide).unwrap();
    algorithms.sort_pairs(&stream, &mut device, &mut values, &sort_order).unwrap();
    let got: Vec<usize> = stream.download(&values).unwrap().iter().map(|&v| (v >> 32) as usize).collect();
    same(&got, &order, &format!("sort_pairs values (u64), {what}"));
}

fn sorts_of<K: Key>(ctx: &Context<AnyDevice>) {
    let algorithms = Algorithms::new(ctx);
    let mut rng = ChaCha8Rng::seed_from_u64(54 + u64::from(K::WIDTH) + K::KIND as u64);
    for n in lengths(&mut rng) {
        for (shape, keys) in shapes::<K>(n, &mut rng) {
            // Long inputs of every shape add little but time on CPU devices.
            if n > 20_000 && shape != "random" && shape != "few distinct with specials" {
                continue;
            }
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
    if ctx.info().fp64 {
        sorts_of::<f64>(&ctx);
    } else {
        let stream = ctx.stream().unwrap();
        let mut keys = stream.upload(&[1.0f64, 0.0]).unwrap();
        let e = Algorithms::new(&ctx).sort(&stream, &mut keys, &SortOrder::ascending()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
        println!("skipped: f64 sorts ({} has no 64-bit floats)", ctx.info().name);
    }
    sort_refusals(&ctx);
}

/// A value type of the histogram and select tests.
trait Counted: Key + PartialOrd {
    /// A value in about `-range..range`.
    fn around(rng: &mut ChaCha8Rng, range: u32) -> Self;
    /// The even bin of `self`, by the documented rule.
    fn even_bin(self, lower: Self, upper: Self, bins: usize) -> Option<usize>;
    /// The value as a bin number (integers).
    fn direct(self, bins: usize) -> Option<usize>;
    /// Edges of even bins that leave some values out on both sides.
    fn edges(bins: usize) -> (Self, Self);
}

macro_rules! counted_int {
    ($t:ty) => {
        impl Counted for $t {
            fn around(rng: &mut ChaCha8Rng, range: u32) -> Self {
                (rng.random_range(0..2 * range as i64) - if <$t>::MIN == 0 { 0 } else { range as i64 }) as $t
            }
            fn even_bin(self, lower: Self, upper: Self, bins: usize) -> Option<usize> {
                (self >= lower && self < upper)
                    .then(|| ((self as i128 - lower as i128) * bins as i128 / (upper as i128 - lower as i128)) as usize)
            }
            fn direct(self, bins: usize) -> Option<usize> {
                usize::try_from(self).ok().filter(|&b| b < bins)
            }
            fn edges(bins: usize) -> (Self, Self) {
                (3, (bins * 3 / 2 + 4) as $t)
            }
        }
    };
}
counted_int!(u32);
counted_int!(i32);
counted_int!(u64);
counted_int!(i64);

macro_rules! counted_float {
    ($t:ty) => {
        impl Counted for $t {
            fn around(rng: &mut ChaCha8Rng, range: u32) -> Self {
                if rng.random_range(0..50) == 0 { <$t>::NAN } else { rng.random_range(-(range as $t)..range as $t) }
            }
            fn even_bin(self, lower: Self, upper: Self, bins: usize) -> Option<usize> {
                let scale = bins as $t / (upper - lower);
                (self >= lower && self < upper).then(|| (((self - lower) * scale) as usize).min(bins - 1))
            }
            fn direct(self, _: usize) -> Option<usize> {
                None
            }
            fn edges(bins: usize) -> (Self, Self) {
                (-2.5, bins as $t * 0.8 + 0.1)
            }
        }
    };
}
counted_float!(f32);
counted_float!(f64);

fn histograms_of<T: Counted + hetero::algorithms::Element>(ctx: &Context<AnyDevice>) {
    let algorithms = Algorithms::new(ctx);
    let stream = ctx.stream().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(541 + u64::from(T::WIDTH) + T::KIND as u64);
    // 20000 bins do not fit shared memory: global atomics.
    for (n, bins) in [(0, 3), (1, 1), (4097, 7), (100_000, 256), (30_000, 5000), (50_000, 20_000)] {
        trace(|| format!("histogram of {n} {}, {bins} bins", std::any::type_name::<T>()));
        let values: Vec<T> = (0..n).map(|_| T::around(&mut rng, bins as u32 + 10)).collect();
        let input = stream.upload(&values).unwrap();
        let mut counts = stream.upload(&vec![7u32; bins]).unwrap();
        let (lower, upper) = T::edges(bins);
        algorithms.histogram(&stream, &input, Bins::Even { lower, upper }, &mut counts).unwrap();
        let mut want = vec![0u32; bins];
        values.iter().filter_map(|v| v.even_bin(lower, upper, bins)).for_each(|b| want[b] += 1);
        same(&stream.download(&counts).unwrap(), &want, &format!("even bins, {n} values, {bins} bins"));
        if !T::FLOAT {
            algorithms.histogram(&stream, &input, Bins::Direct, &mut counts).unwrap();
            let mut want = vec![0u32; bins];
            values.iter().filter_map(|v| v.direct(bins)).for_each(|b| want[b] += 1);
            same(&stream.download(&counts).unwrap(), &want, &format!("direct bins, {n} values, {bins} bins"));
        }
    }
}

/// A predicate's rule, for the reference.
type Holds<T> = fn(&T, &T) -> bool;

fn selects_of<T: Counted + hetero::algorithms::Element>(ctx: &Context<AnyDevice>) {
    let algorithms = Algorithms::new(ctx);
    let stream = ctx.stream().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(542 + u64::from(T::WIDTH) + T::KIND as u64);
    let bits = |v: &[T]| v.iter().map(|x| x.bits()).collect::<Vec<_>>();
    for n in lengths(&mut rng) {
        trace(|| format!("selects of {n} {}", std::any::type_name::<T>()));
        let values: Vec<T> = (0..n).map(|_| T::around(&mut rng, 100)).collect();
        let input = stream.upload(&values).unwrap();
        let mut output = stream.alloc::<T>(n + 3).unwrap();
        let mut count = stream.alloc::<u32>(1).unwrap();
        let pivot = T::few(4);
        let cases: [(Predicate<T>, Holds<T>); 6] = [
            (Predicate::Less(pivot), |a, b| a < b),
            (Predicate::LessEqual(pivot), |a, b| a <= b),
            (Predicate::Greater(pivot), |a, b| a > b),
            (Predicate::GreaterEqual(pivot), |a, b| a >= b),
            (Predicate::Equal(pivot), |a, b| a == b),
            (Predicate::NotEqual(pivot), |a, b| a != b),
        ];
        for (predicate, holds) in cases {
            algorithms.select_if(&stream, &input, predicate, &mut output, &mut count).unwrap();
            let want: Vec<T> = values.iter().copied().filter(|v| holds(v, &pivot)).collect();
            let got = stream.download(&output).unwrap();
            assert_eq!(stream.download(&count).unwrap(), [want.len() as u32], "{predicate:?}, {n} values");
            same(&bits(&got[..want.len()]), &bits(&want), &format!("{predicate:?}, {n} values"));
        }
        let flags: Vec<u8> =
            (0..n).map(|_| if rng.random_range(0..3) == 0 { rng.random_range(1..=255) } else { 0 }).collect();
        let device_flags = stream.upload(&flags).unwrap();
        algorithms.select_flagged(&stream, &input, &device_flags, &mut output, &mut count).unwrap();
        let want: Vec<T> = values.iter().zip(&flags).filter(|(_, f)| **f != 0).map(|(v, _)| *v).collect();
        assert_eq!(stream.download(&count).unwrap(), [want.len() as u32], "flagged, {n} values");
        same(&bits(&stream.download(&output).unwrap()[..want.len()]), &bits(&want), &format!("flagged, {n} values"));
        // Runs: sorted values with repeats.
        let mut runs: Vec<T> = (0..n).map(|_| T::few(rng.random_range(0..n as u32 / 7 + 1))).collect();
        runs.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        let device_runs = stream.upload(&runs).unwrap();
        algorithms.unique(&stream, &device_runs, &mut output, &mut count).unwrap();
        let mut want = runs.clone();
        want.dedup_by(|a, b| a == b);
        assert_eq!(stream.download(&count).unwrap(), [want.len() as u32], "unique, {n} values");
        same(&bits(&stream.download(&output).unwrap()[..want.len()]), &bits(&want), &format!("unique, {n} values"));
    }
}

fn associations(ctx: &Context<AnyDevice>) {
    let algorithms = Algorithms::new(ctx);
    let stream = ctx.stream().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(543);
    for (n, bins) in [(0, 4), (1, 1), (5000, 1), (4097, 300), (70_000, 2000), (20_000, 70_000)] {
        let keys: Vec<u32> = (0..n).map(|_| rng.random_range(0..bins as u32 + 5)).collect();
        let device_keys = stream.upload(&keys).unwrap();
        let mut offsets = stream.alloc::<u32>(bins + 1).unwrap();
        let mut indices = stream.alloc::<u32>(n).unwrap();
        algorithms.associate(&stream, &device_keys, &mut offsets, &mut indices).unwrap();
        let mut want_offsets = vec![0u32; bins + 1];
        for &k in &keys {
            if (k as usize) < bins {
                want_offsets[k as usize + 1] += 1;
            }
        }
        for b in 0..bins {
            want_offsets[b + 1] += want_offsets[b];
        }
        let mut want: Vec<u32> = (0..n as u32).collect();
        want.sort_by_key(|&i| keys[i as usize].min(bins as u32));
        same(&stream.download(&offsets).unwrap(), &want_offsets, &format!("offsets, {n} keys, {bins} bins"));
        same(&stream.download(&indices).unwrap(), &want, &format!("indices, {n} keys, {bins} bins"));
    }
}

/// Refusals of the histogram, select and association.
fn counting_refusals(ctx: &Context<AnyDevice>) {
    let algorithms = Algorithms::new(ctx);
    let stream = ctx.stream().unwrap();
    let floats = stream.upload(&[1.0f32, 2.0]).unwrap();
    let mut counts = stream.alloc::<u32>(3).unwrap();
    let e = algorithms.histogram(&stream, &floats, Bins::Direct, &mut counts).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Config, "{e}");
    let e = algorithms.histogram(&stream, &floats, Bins::Even { lower: 2.0, upper: 1.0 }, &mut counts).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Config, "{e}");
    let e = algorithms
        .histogram(&stream, &floats, Bins::Even { lower: f32::MIN, upper: f32::MAX }, &mut counts)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Config, "{e}");
    let longs = stream.upload(&[1i64, 2]).unwrap();
    let e = algorithms
        .histogram(&stream, &longs, Bins::Even { lower: i64::MIN, upper: i64::MAX }, &mut counts)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Config, "{e}");
    let mut none = stream.alloc::<u32>(0).unwrap();
    let e = algorithms.histogram(&stream, &floats, Bins::Even { lower: 0.0, upper: 1.0 }, &mut none).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfBounds, "{e}");
    let mut short = stream.alloc::<f32>(1).unwrap();
    let mut count = stream.alloc::<u32>(1).unwrap();
    let e = algorithms.select_if(&stream, &floats, Predicate::Less(1.5), &mut short, &mut count).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfBounds, "{e}");
    let flags = stream.upload(&[1u8]).unwrap();
    let mut out = stream.alloc::<f32>(2).unwrap();
    let e = algorithms.select_flagged(&stream, &floats, &flags, &mut out, &mut count).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfBounds, "{e}");
    let keys = stream.upload(&[1u32, 2]).unwrap();
    let mut offsets = stream.alloc::<u32>(1).unwrap();
    let mut indices = stream.alloc::<u32>(2).unwrap();
    let e = algorithms.associate(&stream, &keys, &mut offsets, &mut indices).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfBounds, "{e}");
}

fn all_counting(backend: Backend) {
    let Some(ctx) = hetero::testing::context_or_skip(backend).unwrap_or_else(|e| panic!("{e}")) else { return };
    histograms_of::<u32>(&ctx);
    histograms_of::<i32>(&ctx);
    histograms_of::<u64>(&ctx);
    histograms_of::<i64>(&ctx);
    histograms_of::<f32>(&ctx);
    selects_of::<u32>(&ctx);
    selects_of::<i32>(&ctx);
    selects_of::<u64>(&ctx);
    selects_of::<i64>(&ctx);
    selects_of::<f32>(&ctx);
    if ctx.info().fp64 {
        histograms_of::<f64>(&ctx);
        selects_of::<f64>(&ctx);
    } else {
        println!("skipped: f64 histogram and select ({} has no 64-bit floats)", ctx.info().name);
    }
    associations(&ctx);
    counting_refusals(&ctx);
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

tests!(sort: all_sorts, counting: all_counting);
