//! reduce: float32 sum of uniform values in [-1, 1).
//!
//! Variants: two passes (per-block partial sums, then one block over the
//! partials) with power-of-two and non-power-of-two blocks, and one pass
//! with an atomic add per block. A variant's name gives the block size it
//! asks for; the kernel's limits may allow fewer threads, and the metric
//! `block` records the size it ran with. Each variant sums prefixes of lengths 0,
//! 1, 1001 (odd) and the full size; the worst check decides.
//!
//! In the deterministic mode (`Tuning::deterministic`) the variants are
//! `fixed-256` and `fixed-64` instead: the library's fixed-order sum
//! (`Algorithms::deterministic`) with blocks of 256 and 64 threads, the
//! same bits on every backend, device and block size. The others are left
//! out: their order follows the launch (block size, blocks per compute
//! unit) or, with atomics, the order blocks finish in.
//!
//! Tolerance: `gamma(k) * sum|x_i|` (see [`crate::check`]) where `k` counts
//! the float32 additions on the longest path from an input to the result:
//! the thread's grid-stride loop (four accumulators, joined by two
//! additions), the block tree, and then either the
//! second pass (loop plus tree) or the chain of atomic adds (one per block,
//! in any order).

use hetero::algorithms::{Algorithms, ReduceOp};
use hetero::{BlockRequest, DeviceBuffer, DeviceSlice, Kernel, LaunchConfig, Stream};
use rand::Rng;

use super::{Env, Failure, Outcome, Workload, blocks_for, median, timed};
use crate::check::{Verdict, gamma, tree_depth};
use crate::inputs;

/// How the block sums are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// `reduce_partial` twice: blocks, then one block over the partials.
    TwoPass,
    /// `reduce_atomic`: each block adds its sum to the result atomically.
    Atomic,
    /// `hetero::algorithms`' sum: two passes of the library's generic
    /// kernel, as `TwoPass` on GPUs; the host backend sums each block's
    /// contiguous share in eight lanes.
    Library,
    /// `hetero::algorithms`' deterministic sum: the pairwise tree of
    /// `algorithms::pairwise`, whatever the launch.
    Fixed,
}

/// Name, strategy and threads per block asked for, of each variant.
pub const VARIANTS: [(&str, Strategy, u32); 4] = [
    ("two-pass-256", Strategy::TwoPass, 256),
    ("two-pass-192", Strategy::TwoPass, 192),
    ("atomic-256", Strategy::Atomic, 256),
    ("library", Strategy::Library, 256),
];

/// The variants of the deterministic mode.
pub const DETERMINISTIC_VARIANTS: [(&str, Strategy, u32); 2] =
    [("fixed-256", Strategy::Fixed, 256), ("fixed-64", Strategy::Fixed, 64)];

/// Most blocks of the first pass; threads loop over the rest (grid-stride).
pub const MAX_BLOCKS: u32 = 1024;
/// Most blocks per compute unit. GPUs reach [`MAX_BLOCKS`] long before
/// (132 SMs of an H100 make 8448). A CPU of few cores gets fewer, longer
/// blocks, whose runs of `threads` elements lie closer together: on 2 cores
/// at medium size the host backend summed at 43–75% of its copy bandwidth
/// with 1024 blocks and at 84–97% with 128.
pub const BLOCKS_PER_UNIT: u32 = 64;

/// Blocks of the first pass on a device: chosen once per device, from its
/// compute units, and used by the tolerance as well as the launch.
pub fn max_blocks(info: &hetero::DeviceInfo) -> u32 {
    info.compute_units.max(1).saturating_mul(BLOCKS_PER_UNIT).min(MAX_BLOCKS)
}
/// Timed repetitions of the full-size sum; the median is reported.
const REPEATS: usize = 5;

struct Kernels {
    partial: Kernel,
    atomic: Kernel,
    /// [`max_blocks`] of the device.
    max_blocks: u32,
    /// The library's algorithms (`Strategy::Library`).
    algorithms: Algorithms,
    /// The deterministic ones, by threads per block asked for (`Strategy::Fixed`).
    fixed: Vec<(u32, Algorithms)>,
    /// The device's backend, for errors.
    backend: hetero::Backend,
}

/// Runs every variant; one outcome each.
pub fn run(env: &Env<'_>) -> Result<Vec<Outcome>, Failure> {
    let n = super::elements(env.size);
    let mut rng = inputs::rng(env.seed, "reduce");
    let input: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    env.dump(Workload::Reduce, "input", &[n as u64], &input)?;

    let ctx = env.ctx;
    let stream = ctx.stream()?;
    let module = env.build(hetero::kernels::REDUCE)?;
    let variants: &[(&str, Strategy, u32)] = if env.tuning.deterministic { &DETERMINISTIC_VARIANTS } else { &VARIANTS };
    let kernels = Kernels {
        partial: module.kernel("reduce_partial")?,
        atomic: module.kernel("reduce_atomic")?,
        max_blocks: max_blocks(ctx.info()),
        algorithms: Algorithms::new(ctx),
        fixed: DETERMINISTIC_VARIANTS
            .iter()
            .map(|&(_, _, threads)| (threads, Algorithms::new(ctx).deterministic().with_threads(threads)))
            .collect(),
        backend: ctx.info().backend,
    };
    let staged = ctx.pinned_from_slice(&input)?;
    let mut device = ctx.alloc::<f32>(n)?;
    stream.copy(&staged, &mut device)?;
    let mut partials = ctx.alloc::<f32>(kernels.max_blocks as usize)?;
    let mut out = ctx.alloc::<f32>(1)?;

    let mut lengths = vec![0, 1, 1001.min(n), n];
    lengths.dedup();
    let (exact, magnitude) = reference(&input);
    env.dump(Workload::Reduce, "sum_ref", &[1], &[exact[n]])?;

    let mut outcomes = Vec::new();
    for &(name, strategy, wanted) in variants {
        let threads = kernels.block(strategy, wanted);
        let mut verdict = Verdict { error: 0.0, tolerance: 0.0 };
        let (mut full, mut full_tolerance) = (0.0f32, 0.0);
        for &len in &lengths {
            let input = device.slice(..len)?;
            enqueue(&stream, &kernels, strategy, threads, &input, &mut partials, &mut out)?;
            let mut got = [0.0f32];
            stream.copy_to_host(&out, &mut got)?;
            let k = additions(strategy, threads, len, kernels.max_blocks);
            let tolerance = gamma(k) * magnitude[len];
            verdict = verdict.worst(Verdict { error: (f64::from(got[0]) - exact[len]).abs(), tolerance });
            (full, full_tolerance) = (got[0], tolerance);
        }
        env.dump(Workload::Reduce, &format!("{name}_sum"), &[1], &[full])?;
        let mut times = Vec::with_capacity(REPEATS);
        for _ in 0..REPEATS {
            let input = device.slice(..)?;
            let ((), ms) = timed(env.clock, ctx, &stream, || {
                enqueue(&stream, &kernels, strategy, threads, &input, &mut partials, &mut out)
            })?;
            times.push(ms);
        }
        let ms = median(times);
        let mut outcome = Outcome::new(name, verdict, Some(ms)).metric("gbps", n as f64 * 4.0 / (ms * 1e6));
        if strategy != Strategy::Fixed {
            // The fixed sum picks its own block (a power of two at most this).
            outcome = outcome.metric("block", f64::from(threads));
        }
        // Atomic adds land in whatever order the blocks finish: two correct
        // full sums are each within the full length's tolerance.
        if strategy == Strategy::Atomic {
            outcome.spread = 2.0 * full_tolerance;
        }
        outcomes.push(outcome.with_output(super::Output::F32(vec![full])));
    }
    Ok(outcomes)
}

impl Kernels {
    /// Threads per block for `strategy`'s kernel: `wanted`, or fewer where
    /// the kernel allows fewer (any size works; one float of shared memory
    /// per thread).
    fn block(&self, strategy: Strategy, wanted: u32) -> u32 {
        let kernel = match strategy {
            Strategy::Fixed => return wanted,
            Strategy::TwoPass | Strategy::Library => &self.partial,
            Strategy::Atomic => &self.atomic,
        };
        kernel.block_size(BlockRequest::new(wanted).shared_per_thread(4))
    }
}

/// Enqueues the sum of `input` into `out[0]`.
fn enqueue(
    stream: &Stream,
    kernels: &Kernels,
    strategy: Strategy,
    threads: u32,
    input: &DeviceSlice<'_, f32>,
    partials: &mut DeviceBuffer<f32>,
    out: &mut DeviceBuffer<f32>,
) -> Result<(), hetero::Error> {
    let len = input.len();
    let blocks = blocks_for(len, threads).min(kernels.max_blocks);
    let shared = threads as usize * 4;
    let n = len as u32;
    match strategy {
        Strategy::TwoPass => {
            {
                let sums = partials.slice_mut(..blocks as usize)?;
                // SAFETY: reduce_partial reads input[0..n) and writes sums[0..blocks).
                unsafe {
                    stream.launch(
                        &kernels.partial,
                        LaunchConfig::linear(blocks, threads, shared),
                        &[input.into(), (&sums).into(), n.into()],
                    )
                }?;
            }
            let sums = partials.slice(..blocks as usize)?;
            let total = out.slice_mut(..)?;
            // SAFETY: reads sums[0..blocks) and writes total[0].
            unsafe {
                stream.launch(
                    &kernels.partial,
                    LaunchConfig::linear(1, threads, shared),
                    &[(&sums).into(), (&total).into(), blocks.into()],
                )
            }
        }
        Strategy::Library => kernels.algorithms.reduce(stream, *input, ReduceOp::Sum, &mut *out),
        Strategy::Fixed => match kernels.fixed.iter().find(|(t, _)| *t == threads) {
            Some((_, algorithms)) => algorithms.reduce(stream, *input, ReduceOp::Sum, &mut *out),
            None => Err(hetero::Error::new(
                kernels.backend,
                "reduce",
                hetero::ErrorKind::InvalidHandle,
                format!("no fixed-order sum of {threads} threads was set up"),
            )),
        },
        Strategy::Atomic => {
            stream.fill(&mut *out, 0.0f32)?;
            let total = out.slice_mut(..)?;
            // SAFETY: reads input[0..n) and atomically adds to total[0].
            unsafe {
                stream.launch(
                    &kernels.atomic,
                    LaunchConfig::linear(blocks, threads, shared),
                    &[input.into(), (&total).into(), n.into()],
                )
            }
        }
    }
}

/// Additions on the longest path from an input to the result (see module docs).
pub fn additions(strategy: Strategy, threads: u32, len: usize, max_blocks: u32) -> f64 {
    let blocks = blocks_for(len, threads).min(max_blocks);
    // A thread's loop over `per` elements: the first accumulator takes a
    // quarter of the main loop and the whole tail (under four), then two
    // additions join the four accumulators.
    let chain = |per: usize| (per / 4 + per % 4 + 2) as f64;
    let first = chain(len.div_ceil(blocks as usize * threads as usize)) + tree_depth(threads);
    let second = chain((blocks as usize).div_ceil(threads as usize)) + tree_depth(threads);
    match strategy {
        // The pairwise tree: ceil(log2 len) roundings at most.
        Strategy::Fixed => (len.max(1) as f64).log2().ceil(),
        Strategy::TwoPass => first + second,
        Strategy::Atomic => first + f64::from(blocks),
        Strategy::Library => {
            // The host's lanes: a share of `len / blocks` in eight lanes,
            // then the lanes folded from the identity; twice.
            let lanes = |share: usize| (share / 8 + share % 8 + 9) as f64;
            let host = lanes(len.div_ceil(blocks as usize)) + lanes(blocks as usize);
            (first + second).max(host)
        }
    }
}

/// Float64 prefix sums and prefix sums of magnitudes: entry `i` covers `x[..i]`.
pub fn reference(x: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let mut sums = Vec::with_capacity(x.len() + 1);
    let mut magnitudes = Vec::with_capacity(x.len() + 1);
    let (mut s, mut m) = (0.0f64, 0.0f64);
    sums.push(s);
    magnitudes.push(m);
    for &v in x {
        s += f64::from(v);
        m += f64::from(v).abs();
        sums.push(s);
        magnitudes.push(m);
    }
    (sums, magnitudes)
}
