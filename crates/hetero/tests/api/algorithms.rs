//! The device-wide algorithms against a CPU reference: every algorithm,
//! element type and operator, at lengths around the kernels' tiles and at
//! random ones, and every refusal.

use hetero::algorithms::{Algorithms, Element, MAX_LEN, ReduceOp, ScanKind};
use hetero::{Context, ErrorKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The GPU scan's tiles: 256 threads of 32 (4-byte types) or 16 elements,
/// and half of those (where shared memory is short).
const TILES: [usize; 3] = [8192, 4096, 2048];

/// Lengths at and around every tile edge, and some random ones.
fn lengths(rng: &mut ChaCha8Rng) -> Vec<usize> {
    let mut v = vec![0, 1, 2, 31, 255, 256, 257, 1000];
    for tile in TILES {
        v.extend([tile - 1, tile, tile + 1, 3 * tile + 17]);
    }
    v.extend((0..3).map(|_| rng.random_range(1..200_000)));
    v
}

/// Values of a type, with a float way to say how far two may differ.
trait Value: Element + Copy {
    fn random(rng: &mut ChaCha8Rng) -> Self;
    fn to_f64(self) -> f64;
    /// `a` and `b` agree: exactly for integers, within `bound` for floats.
    fn agrees(a: Self, b: Self, bound: f64) -> bool;
    const EPS: f64;
}

macro_rules! int_value {
    ($t:ty) => {
        impl Value for $t {
            fn random(rng: &mut ChaCha8Rng) -> Self {
                // Full range: sums wrap.
                rng.random()
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn agrees(a: Self, b: Self, _bound: f64) -> bool {
                a == b
            }
            const EPS: f64 = 0.0;
        }
    };
}
int_value!(u32);
int_value!(i32);
int_value!(u64);
int_value!(i64);

macro_rules! float_value {
    ($t:ty) => {
        impl Value for $t {
            fn random(rng: &mut ChaCha8Rng) -> Self {
                rng.random_range(-1.0..1.0)
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn agrees(a: Self, b: Self, bound: f64) -> bool {
                (a == b) || ((a as f64) - (b as f64)).abs() <= bound
            }
            const EPS: f64 = <$t>::EPSILON as f64;
        }
    };
}
float_value!(f32);
float_value!(f64);

/// The documented float bound for a combination of `n` elements whose
/// magnitudes add to `abs`: `n * eps * abs` (and the smallest normal).
fn bound<T: Value>(n: usize, abs: f64) -> f64 {
    n as f64 * T::EPS * abs + 1e-30
}

fn check_type<T: Value>(ctx: &Context, algorithms: &Algorithms, rng: &mut ChaCha8Rng) {
    let stream = ctx.stream().unwrap();
    for n in lengths(rng) {
        let host: Vec<T> = (0..n).map(|_| T::random(rng)).collect();
        let input = stream.upload(&host).unwrap();
        let abs: f64 = host.iter().map(|v| v.to_f64().abs()).sum();
        for op in [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max] {
            let want = host.iter().fold(op.identity::<T>(), |a, b| op.apply(a, *b));
            let got = algorithms.reduce_to_host(&stream, &input, op).unwrap();
            assert!(T::agrees(got, want, bound::<T>(n, abs)), "{} {op:?} of {n}: {got:?}, want {want:?}", T::NAME);
        }
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            let mut out = stream.alloc::<T>(n).unwrap();
            algorithms.scan(&stream, &input, &mut out, kind).unwrap();
            let got = stream.download(&out).unwrap();
            let (mut running, mut running_abs) = (T::zeroed(), 0.0f64);
            for (i, (g, x)) in got.iter().zip(&host).enumerate() {
                let next = running.add(*x);
                let want = if kind == ScanKind::Exclusive { running } else { next };
                running_abs += x.to_f64().abs();
                assert!(
                    T::agrees(*g, want, bound::<T>(i + 1, running_abs)),
                    "{} {kind:?} scan of {n}, element {i}: {g:?}, want {want:?}",
                    T::NAME
                );
                running = next;
            }
        }
        // Segments of random lengths, empty ones included, covering a prefix.
        let mut offsets = vec![0u32];
        while (*offsets.last().unwrap() as usize) < n * 3 / 4 {
            let step = rng.random_range(0..=600).min(n - *offsets.last().unwrap() as usize);
            offsets.push(offsets.last().unwrap() + step as u32);
        }
        let segments = offsets.len() - 1;
        let device_offsets = stream.upload(&offsets).unwrap();
        for (op, on_device) in [(ReduceOp::Sum, false), (ReduceOp::Max, false), (ReduceOp::Sum, true)] {
            let mut out = stream.alloc::<T>(segments).unwrap();
            if on_device {
                // SAFETY: the offsets are non-decreasing and end within the input.
                unsafe { algorithms.segmented_reduce_on_device(&stream, &input, &device_offsets, op, &mut out) }
                    .unwrap();
            } else {
                algorithms.segmented_reduce(&stream, &input, &offsets, op, &mut out).unwrap();
            }
            let got = if segments == 0 { Vec::new() } else { stream.download(&out).unwrap() };
            for (s, w) in offsets.windows(2).enumerate() {
                let part = &host[w[0] as usize..w[1] as usize];
                let want = part.iter().fold(op.identity::<T>(), |a, b| op.apply(a, *b));
                let abs: f64 = part.iter().map(|v| v.to_f64().abs()).sum();
                assert!(
                    T::agrees(got[s], want, bound::<T>(part.len(), abs)),
                    "{} segmented {op:?}, segment {s} of {n}: {:?}, want {want:?}",
                    T::NAME,
                    got[s]
                );
            }
        }
    }
    stream.synchronize().unwrap();
}

/// Every algorithm, type and operator against the CPU, at tile edges and
/// random lengths.
pub fn algorithms_match_a_cpu_reference(ctx: &Context) {
    let algorithms = Algorithms::new(ctx);
    let mut rng = ChaCha8Rng::seed_from_u64(39);
    check_type::<u32>(ctx, &algorithms, &mut rng);
    check_type::<i32>(ctx, &algorithms, &mut rng);
    check_type::<u64>(ctx, &algorithms, &mut rng);
    check_type::<i64>(ctx, &algorithms, &mut rng);
    check_type::<f32>(ctx, &algorithms, &mut rng);
    if ctx.info().fp64 {
        check_type::<f64>(ctx, &algorithms, &mut rng);
    } else {
        let stream = ctx.stream().unwrap();
        let x = stream.upload(&[1.0f64]).unwrap();
        let e = algorithms.reduce_to_host(&stream, &x, ReduceOp::Sum).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
        println!("{}: no fp64, refused: {e}", ctx.info().name);
    }
}

/// Min and max ignore NaN; a sum of integers wraps.
pub fn algorithms_follow_the_numeric_rules(ctx: &Context) {
    let algorithms = Algorithms::new(ctx);
    let stream = ctx.stream().unwrap();
    let mut values = vec![2.0f32; 5000];
    values[17] = f32::NAN;
    values[4000] = -3.0;
    values[4001] = 9.0;
    let x = stream.upload(&values).unwrap();
    assert_eq!(algorithms.reduce_to_host(&stream, &x, ReduceOp::Min).unwrap(), -3.0);
    assert_eq!(algorithms.reduce_to_host(&stream, &x, ReduceOp::Max).unwrap(), 9.0);
    assert!(algorithms.reduce_to_host(&stream, &x, ReduceOp::Sum).unwrap().is_nan());
    let all_nan = stream.upload(&[f32::NAN; 3]).unwrap();
    assert_eq!(algorithms.reduce_to_host(&stream, &all_nan, ReduceOp::Max).unwrap(), f32::NEG_INFINITY);
    let big = stream.upload(&vec![u32::MAX; 10_000]).unwrap();
    assert_eq!(algorithms.reduce_to_host(&stream, &big, ReduceOp::Sum).unwrap(), u32::MAX.wrapping_mul(10_000));
    let signed = stream.upload(&[i32::MAX; 3]).unwrap();
    assert_eq!(algorithms.reduce_to_host(&stream, &signed, ReduceOp::Sum).unwrap(), i32::MAX.wrapping_mul(3));
    let empty = stream.alloc::<i64>(0).unwrap();
    assert_eq!(algorithms.reduce_to_host(&stream, &empty, ReduceOp::Min).unwrap(), i64::MAX);
}

/// A scan on one stream is read on another after it: the algorithms'
/// launches are tracked like any other.
pub fn algorithm_results_are_ordered_across_streams(ctx: &Context) {
    let algorithms = Algorithms::new(ctx);
    let (a, b) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let n = 300_000;
    let input = a.upload(&vec![1u32; n]).unwrap();
    let mut out = a.alloc::<u32>(n).unwrap();
    for round in 0..3u32 {
        a.fill(&mut out, 7).unwrap();
        algorithms.scan(&a, &input, &mut out, ScanKind::Inclusive).unwrap();
        let got = b.download(&out).unwrap();
        assert!(got.iter().enumerate().all(|(i, v)| *v == i as u32 + 1), "round {round}");
    }
}

/// Every refusal is a typed error naming what is wrong, and nothing runs.
pub fn algorithms_refuse_bad_input(ctx: &Context) {
    let algorithms = Algorithms::new(ctx);
    let stream = ctx.stream().unwrap();
    let input = stream.upload(&[1u32, 2, 3, 4]).unwrap();
    let mut two = stream.alloc::<u32>(2).unwrap();
    let mut three = stream.alloc::<u32>(3).unwrap();
    let refuse = |r: hetero::Result<()>, words: &str| {
        let e = r.unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfBounds, "{e}");
        assert!(e.message.contains(words), "{e}");
    };
    refuse(algorithms.reduce(&stream, &input, ReduceOp::Sum, &mut two), "writes one");
    refuse(algorithms.scan(&stream, &input, &mut three, ScanKind::Inclusive), "the output 3");
    refuse(algorithms.segmented_reduce(&stream, &input, &[], ReduceOp::Sum, &mut two), "n + 1 offsets");
    refuse(algorithms.segmented_reduce(&stream, &input, &[0, 3, 2], ReduceOp::Sum, &mut two), "decrease at segment 1");
    refuse(algorithms.segmented_reduce(&stream, &input, &[0, 2, 5], ReduceOp::Sum, &mut two), "past the input's 4");
    refuse(algorithms.segmented_reduce(&stream, &input, &[0, 2], ReduceOp::Sum, &mut two), "holds 2");
    let offsets = stream.upload(&[0u32, 1]).unwrap();
    // SAFETY: refused before any launch (two offsets make one segment).
    refuse(
        unsafe { algorithms.segmented_reduce_on_device(&stream, &input, &offsets, ReduceOp::Sum, &mut two) },
        "2 offsets for 2 segments",
    );
    // Nothing above ran: the buffers are still usable and ordered.
    algorithms.segmented_reduce(&stream, &input, &[0, 1, 4], ReduceOp::Sum, &mut two).unwrap();
    assert_eq!(stream.download(&two).unwrap(), [1, 9]);
    assert_eq!(MAX_LEN, (1 << 31) - 1);
}

/// `deterministic()` sums, scans and segmented sums give the bits of the
/// fixed order (`hetero::algorithms::pairwise`, computed here on the CPU) at
/// every block size, at tile edges of every block size and across
/// segments of many lengths. Guards against results that depend on the
/// launch shape, the backend or its compiler's reordering.
pub fn deterministic_sums_have_the_fixed_orders_bits(ctx: &Context) {
    fn check<T: Element + Value + std::fmt::Debug>(ctx: &Context, rng: &mut ChaCha8Rng) {
        use hetero::algorithms::pairwise;
        let stream = ctx.stream().unwrap();
        let bits = |v: &[T]| bytemuck::cast_slice::<T, u8>(v).to_vec();
        let mut lengths = vec![0usize, 1, 2, 3, 16, 17, 4095, 4096, 4097, 4096 * 16 + 1];
        lengths.extend((0..2).map(|_| rng.random_range(1..150_000)));
        for threads in [256u32, 64, 1] {
            let algorithms = Algorithms::new(ctx).deterministic().with_threads(threads);
            for &n in &lengths {
                if threads == 1 && n > 20_000 {
                    continue;
                }
                let x: Vec<T> = (0..n).map(|_| T::random(rng)).collect();
                let input = stream.upload(&x).unwrap();
                let sum = algorithms.reduce_to_host(&stream, &input, ReduceOp::Sum).unwrap();
                assert_eq!(bits(&[sum]), bits(&[pairwise::sum(&x)]), "{} sum of {n} at {threads} threads", T::NAME);
                let mut e = vec![T::zeroed(); n + 1];
                pairwise::exclusive(&x, T::zeroed(), &mut e);
                for (kind, want) in [(ScanKind::Exclusive, &e[..n]), (ScanKind::Inclusive, &e[1..])] {
                    let mut out = stream.alloc::<T>(n).unwrap();
                    algorithms.scan(&stream, &input, &mut out, kind).unwrap();
                    let got = stream.download(&out).unwrap();
                    if let Some(i) = (0..n).find(|&i| bits(&got[i..=i]) != bits(&want[i..=i])) {
                        panic!(
                            "{} {kind:?} scan of {n} at {threads} threads: element {i} is {:?}, not {:?}",
                            T::NAME,
                            got[i],
                            want[i]
                        );
                    }
                }
                // Segments of 0 to a few hundred elements, and one long one.
                let mut offsets = vec![0u32];
                while (*offsets.last().unwrap() as usize) < n {
                    let len = if offsets.len() == 3 { 9000 } else { rng.random_range(0..300) };
                    offsets.push((*offsets.last().unwrap() as usize + len).min(n) as u32);
                }
                let segments = offsets.len() - 1;
                let mut out = stream.alloc::<T>(segments).unwrap();
                algorithms.segmented_reduce(&stream, &input, &offsets, ReduceOp::Sum, &mut out).unwrap();
                let got = stream.download(&out).unwrap();
                let want: Vec<T> =
                    offsets.windows(2).map(|w| pairwise::sum(&x[w[0] as usize..w[1] as usize])).collect();
                assert_eq!(bits(&got), bits(&want), "{} segments of {n} at {threads} threads", T::NAME);
            }
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(53);
    check::<f32>(ctx, &mut rng);
    if ctx.info().fp64 {
        check::<f64>(ctx, &mut rng);
    }
}
