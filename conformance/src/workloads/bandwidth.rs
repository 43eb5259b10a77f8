//! bandwidth: how fast the device moves memory, in the figures a node's
//! health is judged by.
//!
//! - BabelStream's five kernels (`bandwidth.kern`: copy, mul, add, triad,
//!   dot) on float arrays far larger than a last-level cache, bytes read
//!   plus written counted as BabelStream counts them;
//! - pinned host-to-device and device-to-host copies (bytes moved);
//! - with two or more devices selected, a peer copy from this device to
//!   each other one (variant `peer-<ordinal>`, metric `staged` 1 where the
//!   copy went through host memory).
//!
//! Every `gbps` figure is also given as a fraction of the device's own
//! copy bandwidth (`of_d2d`, added by the run) and, where [`peak_gbps`]
//! knows the device, of its specified peak (`of_peak`). Each figure is the
//! median of [`REPEATS`] runs after one untimed run. A device on a degraded
//! link or with slow memory shows up against its peers (node health).
//!
//! Checks: the arrays start at BabelStream's values (a = 0.1, b = 0.2,
//! c = 0) and every kernel runs on what the previous one left, so each
//! output is a constant the host computes in float; a fused multiply-add
//! may differ from it by one rounding (tolerance two units in the last
//! place). Dot's tolerance is the float error bound of its per-thread and
//! per-block sums. Copies must be exact.

use hetero::{BlockRequest, Context, DeviceBuffer, Kernel, LaunchConfig, Stream};

use super::{Env, Failure, Outcome, Size, median, timed};
use crate::check::{U32, Verdict};

/// Timed runs per figure (after one untimed).
pub const REPEATS: usize = 5;
/// BabelStream's start values and scalar.
pub const START: (f32, f32, f32) = (0.1, 0.2, 0.0);
/// The scalar of mul and triad.
pub const SCALAR: f32 = 0.4;
/// Threads per block asked for (BabelStream's default), where the kernel allows.
pub const BLOCK: u32 = 1024;

/// Elements of each array: 32, 128 and 512 MiB of floats.
pub fn elements(size: Size) -> usize {
    match size {
        Size::Small => 1 << 23,
        Size::Medium => 1 << 25,
        Size::Large => 1 << 27,
    }
}

/// The specified peak memory bandwidth of devices whose vendor states one,
/// in GB/s, by the name the driver reports. From NVIDIA's data sheets:
/// H100 SXM5 80 GB 3.35 TB/s, H200 4.8 TB/s, A100 SXM4 80 GB 2.039 TB/s.
pub fn peak_gbps(name: &str) -> Option<f64> {
    match name {
        "NVIDIA H100 80GB HBM3" => Some(3350.0),
        "NVIDIA H200" => Some(4800.0),
        "NVIDIA A100-SXM4-80GB" => Some(2039.0),
        _ => None,
    }
}

/// The worst difference of `got` to the constant `want`.
fn constant(got: &[f32], want: f32, tolerance: f64) -> Verdict {
    let error = got.iter().fold(0.0f64, |worst, &g| {
        let d = (f64::from(g) - f64::from(want)).abs();
        worst.max(if d.is_nan() { f64::INFINITY } else { d })
    });
    Verdict { error, tolerance }
}

/// Two units in the last place of `x` (one rounding of a fused multiply-add, and margin).
fn ulps(x: f32) -> f64 {
    2.0 * 2.0 * U32 * f64::from(x.abs())
}

/// The three arrays and what they hold now.
struct Arrays {
    a: DeviceBuffer<f32>,
    b: DeviceBuffer<f32>,
    c: DeviceBuffer<f32>,
    values: (f32, f32, f32),
}

/// Median device time of `op`, run once untimed and [`REPEATS`] times timed.
fn time(env: &Env<'_>, stream: &Stream, op: &mut dyn FnMut() -> Result<(), Failure>) -> Result<f64, Failure> {
    op()?;
    let times = (0..REPEATS).map(|_| timed(env.clock, env.ctx, stream, &mut *op).map(|((), ms)| ms));
    Ok(median(times.collect::<Result<_, _>>()?))
}

fn outcome(name: &str, verdict: Verdict, ms: f64, bytes: f64, peak: Option<f64>) -> Outcome {
    let gbps = bytes / (ms * 1e6);
    let mut o = Outcome::new(name, verdict, Some(ms)).metric("gbps", gbps);
    if let Some(peak) = peak {
        o = o.metric("of_peak", gbps / peak);
    }
    o
}

/// Runs the kernels, the pinned copies and the peer copies.
pub fn run(env: &Env<'_>) -> Result<Vec<Outcome>, Failure> {
    let ctx = env.ctx;
    let n = elements(env.size);
    let n32 = u32::try_from(n).map_err(|_| Failure::Internal("array too long for 32-bit indices".into()))?;
    let module = ctx.build_module(hetero::kernels::BANDWIDTH)?;
    let kernel = |name: &str| module.kernel(name);
    let (copy, mul, add, triad, dot) = (
        kernel("stream_copy")?,
        kernel("stream_mul")?,
        kernel("stream_add")?,
        kernel("stream_triad")?,
        kernel("stream_dot")?,
    );
    let stream = ctx.stream()?;
    let mut arrays = Arrays { a: ctx.alloc(n)?, b: ctx.alloc(n)?, c: ctx.alloc(n)?, values: START };
    stream.fill(&mut arrays.a, START.0)?;
    stream.fill(&mut arrays.b, START.1)?;
    stream.fill(&mut arrays.c, START.2)?;
    let peak = peak_gbps(&ctx.info().name);
    let word = 4.0f64;
    let mut outcomes = Vec::new();
    let linear = |k: &Kernel| {
        let threads = k.block_size(BlockRequest::new(BLOCK));
        LaunchConfig::linear(n32.div_ceil(threads * hetero::kernels::STREAM_PER_THREAD), threads, 0)
    };

    // copy: c = a.
    let config = linear(&copy);
    let ms = time(env, &stream, &mut || {
        let (a, c) = (arrays.a.slice(..)?, arrays.c.slice_mut(..)?);
        // SAFETY: stream_copy touches elements [0, n) of a and c, each n long.
        unsafe { stream.launch(&copy, config, &[(&a).into(), (&c).into(), n32.into()]) }?;
        Ok(())
    })?;
    arrays.values.2 = arrays.values.0;
    let got = stream.download(&arrays.c)?;
    outcomes.push(outcome("copy", constant(&got, arrays.values.2, 0.0), ms, 2.0 * word * n as f64, peak));

    // mul: b = s c.
    let config = linear(&mul);
    let ms = time(env, &stream, &mut || {
        let (b, c) = (arrays.b.slice_mut(..)?, arrays.c.slice(..)?);
        // SAFETY: stream_mul touches elements [0, n) of b and c, each n long.
        unsafe { stream.launch(&mul, config, &[(&b).into(), (&c).into(), SCALAR.into(), n32.into()]) }?;
        Ok(())
    })?;
    arrays.values.1 = SCALAR * arrays.values.2;
    let got = stream.download(&arrays.b)?;
    let want = arrays.values.1;
    outcomes.push(outcome("mul", constant(&got, want, ulps(want)), ms, 2.0 * word * n as f64, peak));

    // add: c = a + b.
    let config = linear(&add);
    let ms = time(env, &stream, &mut || {
        let (a, b, c) = (arrays.a.slice(..)?, arrays.b.slice(..)?, arrays.c.slice_mut(..)?);
        // SAFETY: stream_add touches elements [0, n) of a, b and c, each n long.
        unsafe { stream.launch(&add, config, &[(&a).into(), (&b).into(), (&c).into(), n32.into()]) }?;
        Ok(())
    })?;
    arrays.values.2 = arrays.values.0 + arrays.values.1;
    let got = stream.download(&arrays.c)?;
    let want = arrays.values.2;
    outcomes.push(outcome("add", constant(&got, want, ulps(want)), ms, 3.0 * word * n as f64, peak));

    // triad: a = b + s c.
    let config = linear(&triad);
    let ms = time(env, &stream, &mut || {
        let (a, b, c) = (arrays.a.slice_mut(..)?, arrays.b.slice(..)?, arrays.c.slice(..)?);
        let args = [(&a).into(), (&b).into(), (&c).into(), SCALAR.into(), n32.into()];
        // SAFETY: stream_triad touches elements [0, n) of a, b and c, each n long.
        unsafe { stream.launch(&triad, config, &args) }?;
        Ok(())
    })?;
    arrays.values.0 = arrays.values.1 + SCALAR * arrays.values.2;
    let got = stream.download(&arrays.a)?;
    let want = arrays.values.0;
    outcomes.push(outcome("triad", constant(&got, want, ulps(want)), ms, 3.0 * word * n as f64, peak));

    outcomes.push(run_dot(env, &stream, &dot, &arrays, n32, peak)?);
    outcomes.extend(run_pinned(env, &stream, &arrays)?);
    for peer in env.peers {
        outcomes.push(run_peer(env, peer, &arrays)?);
    }
    for o in &mut outcomes {
        o.metrics.insert("elements".into(), n as f64);
    }
    Ok(outcomes)
}

/// dot: one sum per block of a grid sized to fill the device, added on
/// the host in double precision.
fn run_dot(
    env: &Env<'_>,
    stream: &Stream,
    dot: &Kernel,
    arrays: &Arrays,
    n: u32,
    peak: Option<f64>,
) -> Result<Outcome, Failure> {
    let threads = dot.block_size(BlockRequest::new(BLOCK).shared_per_thread(4));
    let blocks = (env.ctx.info().compute_units.max(1) * 4).clamp(1, 1024);
    let mut partials = env.ctx.alloc::<f32>(blocks as usize)?;
    let config = LaunchConfig::linear(blocks, threads, threads as usize * 4);
    let ms = time(env, stream, &mut || {
        let (a, b, p) = (arrays.a.slice(..)?, arrays.b.slice(..)?, partials.slice_mut(..)?);
        // SAFETY: stream_dot reads elements [0, n) of a and b, each n long,
        // and writes partials[0, blocks); its shared memory is one float per thread.
        unsafe { stream.launch(dot, config, &[(&a).into(), (&b).into(), (&p).into(), n.into()]) }?;
        Ok(())
    })?;
    let sum: f64 = stream.download(&partials)?.iter().map(|&p| f64::from(p)).sum();
    let want = f64::from(n) * f64::from(arrays.values.0 * arrays.values.1);
    // Each thread adds n / (blocks * threads) products (rounded each), then
    // a tree of depth log2(threads) per block.
    let terms = f64::from(n) / f64::from(blocks * threads) + f64::from(threads).log2() + 2.0;
    let verdict = Verdict { error: (sum - want).abs(), tolerance: 2.0 * terms * U32 * want.abs() };
    Ok(outcome("dot", verdict, ms, 2.0 * 4.0 * f64::from(n), peak).metric("block", f64::from(threads)))
}

/// Pinned copies each way of array a, checked to come back unchanged.
fn run_pinned(env: &Env<'_>, stream: &Stream, arrays: &Arrays) -> Result<Vec<Outcome>, Failure> {
    let ctx = env.ctx;
    let n = arrays.a.len();
    let bytes = 4.0 * n as f64;
    let mut host = ctx.alloc_pinned::<f32>(n)?;
    let mut device = ctx.alloc::<f32>(n)?;
    for (i, v) in host.host_slice_mut()?.iter_mut().enumerate() {
        *v = (i % 1024) as f32;
    }
    let h2d_ms = time(env, stream, &mut || Ok(stream.copy(&host, &mut device)?))?;
    let mut back = ctx.alloc_pinned::<f32>(n)?;
    let d2h_ms = time(env, stream, &mut || Ok(stream.copy(&device, &mut back)?))?;
    let same = host.host_slice()?.iter().zip(back.host_slice()?).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
    let verdict = Verdict { error: same as f64, tolerance: 0.0 };
    // A copy's bytes go one way, over the host link: no memory peak applies.
    Ok(vec![outcome("h2d", verdict, h2d_ms, bytes, None), outcome("d2h", verdict, d2h_ms, bytes, None)])
}

/// A peer copy of array a to `peer`, on the peer's stream, checked there.
fn run_peer(env: &Env<'_>, peer: &Context, arrays: &Arrays) -> Result<Outcome, Failure> {
    let n = arrays.a.len();
    let stream = peer.stream()?;
    let mut dst = peer.alloc::<f32>(n)?;
    let mut route = hetero::PeerRoute::Direct;
    let clock = env.clock;
    let mut op = || -> Result<(), Failure> {
        route = stream.copy_peer(&arrays.a, &mut dst)?;
        Ok(())
    };
    op()?;
    let times = (0..REPEATS).map(|_| timed(clock, peer, &stream, &mut op).map(|((), ms)| ms));
    let ms = median(times.collect::<Result<_, _>>()?);
    let got = stream.download(&dst)?;
    let verdict = constant(&got, arrays.values.0, 0.0);
    let name = format!("peer-{}", peer.info().ordinal);
    Ok(outcome(&name, verdict, ms, 4.0 * n as f64, None)
        .metric("staged", if route == hetero::PeerRoute::Staged { 1.0 } else { 0.0 }))
}
