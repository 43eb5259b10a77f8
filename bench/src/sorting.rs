//! The sort, histogram and select rows of `--algorithms-elements`, per key
//! type, on random inputs (the other rows' zeros would make every key
//! equal): device time and the fraction of the device's copy bandwidth as
//! in `algorithms.rs`, and keys per second for the sorts. Bytes are those
//! each must move at least: a sort reads and writes every key (and value)
//! once, a histogram reads its input, a select reads its input and writes
//! what it keeps.

use hetero::algorithms::{Algorithms, Bins, Predicate, SortKey, SortOrder};
use hetero::{Context, Stream};

use crate::algorithms::{AlgorithmCost, operands, time};
use crate::measure::Fail;

/// Bins of the histogram rows.
pub const BINS: usize = 256;

/// A key type of the rows: random values from a counter, the histogram's
/// range and the select's pivot (about half the values below it).
pub trait Random: SortKey {
    fn random(i: u64) -> Self;
    /// Even bins over `[lower, upper)` that hold every value.
    fn range() -> (Self, Self);
    fn pivot() -> Self;
}

/// splitmix64 of `i`.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

macro_rules! random_int {
    ($t:ty) => {
        impl Random for $t {
            fn random(i: u64) -> Self {
                mix(i) as $t
            }
            fn range() -> (Self, Self) {
                (<$t>::MIN, <$t>::MAX)
            }
            fn pivot() -> Self {
                (<$t>::MIN / 2).wrapping_add(<$t>::MAX / 2)
            }
        }
    };
}
random_int!(u32);
random_int!(i32);

/// 64-bit keys of 56 random bits (sign-extended for `i64`): the
/// histogram's 256 even bins over their range fit its 64-bit arithmetic.
macro_rules! random_wide {
    ($t:ty) => {
        impl Random for $t {
            fn random(i: u64) -> Self {
                (mix(i) as $t) >> 8
            }
            fn range() -> (Self, Self) {
                (<$t>::MIN >> 8, (<$t>::MAX >> 8) + 1)
            }
            fn pivot() -> Self {
                ((<$t>::MIN >> 8) / 2).wrapping_add((<$t>::MAX >> 8) / 2)
            }
        }
    };
}
random_wide!(u64);
random_wide!(i64);

macro_rules! random_float {
    ($t:ty) => {
        impl Random for $t {
            fn random(i: u64) -> Self {
                (mix(i) >> 11) as $t / (1u64 << 53) as $t * 2.0 - 1.0
            }
            fn range() -> (Self, Self) {
                (-1.0, 1.0)
            }
            fn pivot() -> Self {
                0.0
            }
        }
    };
}
random_float!(f32);
random_float!(f64);

/// The sort of `u32` and `u64` with each of `sort_items` keys a thread
/// (three quarters as many for `u64`), then every row of every key type
/// the device has, `elements` long.
pub fn run(ctx: &Context, elements: usize, rounds: usize, sort_items: &[u32]) -> Result<Vec<AlgorithmCost>, Fail> {
    let stream = ctx.stream()?;
    let algorithms = Algorithms::new(ctx);
    let mut out = Vec::new();
    for &items in sort_items {
        let wide = (items * 3 / 4).max(1);
        let tuned = Algorithms::new(ctx).with_sort_items(items, wide);
        sweep::<u32>(ctx, &stream, &tuned, elements, rounds, items, &mut out)?;
        sweep::<u64>(ctx, &stream, &tuned, elements, rounds, wide, &mut out)?;
    }
    measure::<u32>(ctx, &stream, &algorithms, elements, rounds, &mut out)?;
    measure::<i32>(ctx, &stream, &algorithms, elements, rounds, &mut out)?;
    measure::<f32>(ctx, &stream, &algorithms, elements, rounds, &mut out)?;
    measure::<u64>(ctx, &stream, &algorithms, elements, rounds, &mut out)?;
    measure::<i64>(ctx, &stream, &algorithms, elements, rounds, &mut out)?;
    if ctx.info().fp64 {
        measure::<f64>(ctx, &stream, &algorithms, elements, rounds, &mut out)?;
    }
    Ok(out)
}

/// The sort of `T` alone with `algorithms`' tuning (`items` keys a
/// thread), against the copy.
fn sweep<T: Random>(
    ctx: &Context,
    stream: &Stream,
    algorithms: &Algorithms,
    n: usize,
    rounds: usize,
    items: u32,
    out: &mut Vec<AlgorithmCost>,
) -> Result<(), Fail> {
    let size = std::mem::size_of::<T>();
    let (_, mut work, copy_gbps) = operands::<T>(ctx, stream, n, rounds)?;
    let values: Vec<T> = (0..n as u64).map(T::random).collect();
    let input = stream.upload(&values)?;
    drop(values);
    let copy_ms = time(ctx, stream, rounds, || stream.copy(&input, &mut work))?;
    let ms = time(ctx, stream, rounds, || {
        stream.copy(&input, &mut work)?;
        algorithms.sort(stream, &mut work, &SortOrder::ascending())
    })?;
    let mut row = AlgorithmCost::new::<T>("sort", n, 2 * n * size, ms - copy_ms, copy_gbps, None);
    row.sort_items = Some(items);
    row.gkeys = Some(n as f64 / ((ms - copy_ms) * 1e6));
    out.push(row);
    stream.synchronize()?;
    Ok(())
}

/// The rows of `T` at `n` elements.
fn measure<T: Random>(
    ctx: &Context,
    stream: &Stream,
    algorithms: &Algorithms,
    n: usize,
    rounds: usize,
    out: &mut Vec<AlgorithmCost>,
) -> Result<(), Fail> {
    let size = std::mem::size_of::<T>();
    let (_, mut work, copy_gbps) = operands::<T>(ctx, stream, n, rounds)?;
    let values: Vec<T> = (0..n as u64).map(T::random).collect();
    let input = stream.upload(&values)?;
    drop(values);
    let index: Vec<u32> = (0..n as u32).collect();
    let indices = stream.upload(&index)?;
    drop(index);
    let mut moved = stream.alloc::<u32>(n)?;
    let mut push = |algorithm, bytes: usize, ms: f64, keys: bool| {
        let mut row = AlgorithmCost::new::<T>(algorithm, n, bytes, ms, copy_gbps, None);
        if keys {
            row.gkeys = Some(n as f64 / (ms * 1e6));
        }
        out.push(row);
    };
    // Each sort starts from the random keys: the copy in is timed with it
    // and taken off (the copy's own time, measured alike).
    let copy_ms = time(ctx, stream, rounds, || stream.copy(&input, &mut work))?;
    let ms = time(ctx, stream, rounds, || {
        stream.copy(&input, &mut work)?;
        algorithms.sort(stream, &mut work, &SortOrder::ascending())
    })?;
    push("sort", 2 * n * size, ms - copy_ms, true);
    let index_ms = time(ctx, stream, rounds, || {
        stream.copy(&input, &mut work)?;
        stream.copy(&indices, &mut moved)
    })?;
    let ms = time(ctx, stream, rounds, || {
        stream.copy(&input, &mut work)?;
        stream.copy(&indices, &mut moved)?;
        algorithms.sort_pairs(stream, &mut work, &mut moved, &SortOrder::ascending())
    })?;
    push("sort-pairs", 2 * n * (size + 4), ms - index_ms, true);
    let mut counts = stream.alloc::<u32>(BINS)?;
    let (lower, upper) = T::range();
    let ms =
        time(ctx, stream, rounds, || algorithms.histogram(stream, &input, Bins::Even { lower, upper }, &mut counts))?;
    push("histogram-256", n * size, ms, false);
    let mut count = stream.alloc::<u32>(1)?;
    let ms = time(ctx, stream, rounds, || {
        algorithms.select_if(stream, &input, Predicate::Less(T::pivot()), &mut work, &mut count)
    })?;
    let kept = stream.download(&count)?[0] as usize;
    push("select", (n + kept) * size, ms, false);
    stream.synchronize()?;
    Ok(())
}
