//! `hetero::algorithms` at one length, per element type: device time
//! (events around each call; the median of the rounds after one untimed)
//! and the fraction of the device's own copy bandwidth, that copy timed the
//! same way in the same process over the same bytes. As in the suite,
//! bytes are those the algorithm must move at least, and the copy's count
//! its reads and writes.

use hetero::algorithms::{Algorithms, Element, ReduceOp, ScanKind};
use hetero::{Context, DeviceBuffer, Stream};

use crate::measure::{Fail, median};

/// Elements per segment of the segmented reduces, with their rows' names:
/// 64 about a jet's constituents, and the extremes of one and 4096.
pub const SEGMENTS: [(usize, &str); 3] = [(1, "segmented-sum-1"), (64, "segmented-sum"), (4096, "segmented-sum-4096")];

/// One algorithm on one element type.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AlgorithmCost {
    /// Element type, in the kernel dialect (`uint`, `double`, ...).
    pub element: &'static str,
    /// `reduce-sum`, `reduce-max`, `scan-exclusive`, or a segmented sum
    /// (`segmented-sum` over segments of 64, `segmented-sum-1`, `-4096`).
    pub algorithm: &'static str,
    pub elements: usize,
    /// Median device milliseconds.
    pub device_ms: f64,
    /// Bytes it must move at least, per second.
    pub gbps: f64,
    /// `gbps` over the copy's (reads and writes) of the same bytes.
    pub of_copy: f64,
    /// The scan's elements per thread, where a sweep set them
    /// (`Algorithms::with_scan_items`); the defaults otherwise.
    pub scan_items: Option<u32>,
    /// Keys a thread of a sort pass holds, where a sweep set them
    /// (`Algorithms::with_sort_items`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort_items: Option<u32>,
    /// Billions of keys per second, for the sorts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gkeys: Option<f64>,
}

/// Every algorithm on every element type the device has, `elements` long;
/// then the scan of `u32` and `u64` with each of `scan_items` elements
/// per thread (half as many for `u64`).
pub fn run(ctx: &Context, elements: usize, rounds: usize, scan_items: &[u32]) -> Result<Vec<AlgorithmCost>, Fail> {
    let stream = ctx.stream()?;
    let algorithms = Algorithms::new(ctx);
    let mut out = Vec::new();
    for &items in scan_items {
        let tuned = Algorithms::new(ctx).with_scan_items(items, (items / 2).max(1));
        sweep::<u32>(ctx, &stream, &tuned, elements, rounds, items, &mut out)?;
        sweep::<u64>(ctx, &stream, &tuned, elements, rounds, (items / 2).max(1), &mut out)?;
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

/// Median device milliseconds of `f`, after one untimed call.
pub(crate) fn time(
    ctx: &Context,
    stream: &Stream,
    rounds: usize,
    mut f: impl FnMut() -> hetero::Result<()>,
) -> Result<f64, Fail> {
    let (start, end) = (ctx.event()?, ctx.event()?);
    f()?;
    let mut ms = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        stream.record(&start)?;
        f()?;
        stream.record(&end)?;
        end.synchronize()?;
        ms.push(start.elapsed_ms(&end)?);
    }
    Ok(median(&ms))
}

/// Zeroed input and output of `n` elements, and the device's copy of the
/// one into the other (reads plus writes, GB/s), timed as the rows are.
pub(crate) fn operands<T: Element>(
    ctx: &Context,
    stream: &Stream,
    n: usize,
    rounds: usize,
) -> Result<(DeviceBuffer<T>, DeviceBuffer<T>, f64), Fail> {
    let input = stream.alloc_zeros::<T>(n)?;
    let mut output = stream.alloc_zeros::<T>(n)?;
    let copy_ms = time(ctx, stream, rounds, || stream.copy(&input, &mut output))?;
    Ok((input, output, (2 * n * std::mem::size_of::<T>()) as f64 / (copy_ms * 1e6)))
}

/// The scan alone with `algorithms`' tuning, against the copy.
fn sweep<T: Element>(
    ctx: &Context,
    stream: &Stream,
    algorithms: &Algorithms,
    n: usize,
    rounds: usize,
    items: u32,
    out: &mut Vec<AlgorithmCost>,
) -> Result<(), Fail> {
    let (input, mut output, copy_gbps) = operands::<T>(ctx, stream, n, rounds)?;
    let ms = time(ctx, stream, rounds, || algorithms.scan(stream, &input, &mut output, ScanKind::Exclusive))?;
    let size = std::mem::size_of::<T>();
    out.push(AlgorithmCost::new::<T>("scan-exclusive", n, 2 * n * size, ms, copy_gbps, Some(items)));
    stream.synchronize()?;
    Ok(())
}

impl AlgorithmCost {
    /// `algorithm` on `n` elements of `T`, which must move `bytes`, in `ms`,
    /// against a copy at `copy_gbps`.
    pub(crate) fn new<T: Element>(
        algorithm: &'static str,
        n: usize,
        bytes: usize,
        ms: f64,
        copy_gbps: f64,
        scan_items: Option<u32>,
    ) -> Self {
        let gbps = bytes as f64 / (ms * 1e6);
        Self {
            element: T::NAME,
            algorithm,
            elements: n,
            device_ms: ms,
            gbps,
            of_copy: gbps / copy_gbps,
            scan_items,
            sort_items: None,
            gkeys: None,
        }
    }
}

fn measure<T: Element>(
    ctx: &Context,
    stream: &Stream,
    algorithms: &Algorithms,
    n: usize,
    rounds: usize,
    out: &mut Vec<AlgorithmCost>,
) -> Result<(), Fail> {
    let size = std::mem::size_of::<T>();
    let (input, mut output, copy_gbps) = operands::<T>(ctx, stream, n, rounds)?;
    let mut total = stream.alloc::<T>(1)?;
    let mut push = |algorithm, bytes: usize, ms: f64| {
        out.push(AlgorithmCost::new::<T>(algorithm, n, bytes, ms, copy_gbps, None));
    };
    let ms = time(ctx, stream, rounds, || algorithms.reduce(stream, &input, ReduceOp::Sum, &mut total))?;
    push("reduce-sum", n * size, ms);
    let ms = time(ctx, stream, rounds, || algorithms.reduce(stream, &input, ReduceOp::Max, &mut total))?;
    push("reduce-max", n * size, ms);
    let ms = time(ctx, stream, rounds, || algorithms.scan(stream, &input, &mut output, ScanKind::Exclusive))?;
    push("scan-exclusive", 2 * n * size, ms);
    for (length, name) in SEGMENTS {
        let segments = n / length;
        let offsets: Vec<u32> = (0..=segments).map(|s| (s * length) as u32).collect();
        let device_offsets = stream.upload(&offsets)?;
        let mut sums = stream.alloc::<T>(segments)?;
        // SAFETY: the offsets are non-decreasing and end at segments * length <= n.
        let ms = time(ctx, stream, rounds, || unsafe {
            algorithms.segmented_reduce_on_device(stream, &input, &device_offsets, ReduceOp::Sum, &mut sums)
        })?;
        push(name, n * size + (segments + 1) * 4 + segments * size, ms);
    }
    stream.synchronize()?;
    Ok(())
}
