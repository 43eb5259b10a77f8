//! wave: the 2D scalar wave equation with snapshots copied to the host
//! while the next steps compute.
//!
//! Scheme (`wave.kern`): 4th order in space, 2nd in time, Courant number
//! 0.5 (`c2 = 0.25`), a Ricker wavelet injected at the centre cell, zero
//! boundary cells. Five device wavefields rotate: step `s` writes field
//! `(s+2) % 5` from fields `s % 5` and `(s+1) % 5`. Every `snapshot_every`
//! steps the new field is copied to its slot of one pinned array.
//!
//! Variants: `sync` (one stream; compute waits for every copy),
//! `stream-sync` (copy stream; the host synchronises the compute stream
//! before each copy and the copy stream before a staging buffer is reused)
//! `event-sync` (copy stream; only device-side event waits) and `graph`
//! (an interval's steps and staging copy recorded once, replayed per
//! interval; the copy stream as in `event-sync`, ordered by the buffers'
//! tracking). All must give bit-identical snapshots on one backend.
//!
//! Copies that never stall compute: the two asynchronous variants do not
//! copy a wavefield to the host, since a field is overwritten three steps
//! later and a snapshot copy (over PCIe or NVLink) takes longer than three
//! steps, so compute would wait for it. The compute stream instead copies
//! the new field into one of [`STAGING`] device buffers (device-to-device,
//! at device bandwidth, a fraction of a step), and the copy stream copies
//! that buffer to pinned memory. Compute waits only when the copy stream is
//! [`STAGING`] whole snapshots behind, that is when copying a snapshot
//! takes longer than `STAGING * snapshot_every` steps: then the copy
//! engine, not the schedule, is the limit.
//!
//! Balanced runs: overlap matters most where copying takes as long as
//! computing. Before them the suite times one step and one snapshot copy
//! on this device and picks the snapshot interval `k` that makes the two
//! totals equal (`copy / step`, rounded, at least 1), then runs the three
//! variants again as `balanced-*` on the same grid for
//! [`BALANCED_SNAPSHOTS`] snapshots (fewer when the size's step count is
//! the limit). The choice is kept as metrics and printed by `conform`.
//! Even with perfect overlap, the first interval's compute and the last
//! snapshot's copy cannot overlap anything, so a run of `n` snapshots takes
//! at least `(n + 1) / n` of the ideal `max(compute, copy)`: with 10 that
//! was already the 1.10 the suite aims at, so balanced runs take 20 (1.05).
//!
//! Tolerance against the float64 reference: the scheme is stable and
//! non-dissipative, so rounding errors of about `8 u max|u|` per step
//! (eleven float32 operations per cell) add up at most linearly:
//! `steps * 8 * u * max|u_ref|`.

use std::f64::consts::PI;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use hetero::{Context, DeviceBuffer, Event, Kernel, Stream};

pub use super::grid::{BALANCED_SNAPSHOTS, BLOCK_WIDTH, C2, FIELDS, Grid, STAGING, block_width};
use super::{Env, Failure, Outcome, Workload, median, timed};
use crate::check::{U32, Verdict, elementwise};
use crate::clock::Clock;
use crate::timeline::{Interval, Kind, Timeline, hidden_copy_fraction};

/// Ricker peak frequency in cycles per step.
pub const PEAK: f64 = 0.04;

/// How copies are ordered against compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// One stream.
    Sync,
    /// Two streams ordered by host synchronisation.
    StreamSync,
    /// Two streams ordered by device events.
    EventSync,
    /// A snapshot interval's steps and its staging copy recorded once as
    /// a graph, replayed per interval on the compute stream; the copy
    /// stream copies each staged snapshot out, ordered by the tracker.
    Graph,
}

impl Variant {
    /// Every variant; `Sync` first, as the baseline of the others.
    pub const ALL: [Variant; 4] = [Variant::Sync, Variant::StreamSync, Variant::EventSync, Variant::Graph];

    /// Its name in `conform --wave-variants`.
    fn selector(self) -> super::WaveVariant {
        match self {
            Variant::Sync => super::WaveVariant::Sync,
            Variant::StreamSync => super::WaveVariant::StreamSync,
            Variant::EventSync => super::WaveVariant::EventSync,
            Variant::Graph => super::WaveVariant::Graph,
        }
    }

    /// Report name.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Sync => "sync",
            Variant::StreamSync => "stream-sync",
            Variant::EventSync => "event-sync",
            Variant::Graph => "graph",
        }
    }
}

/// The wavelet value injected at each step.
pub fn ricker(steps: usize) -> Vec<f32> {
    let delay = 1.5 / PEAK;
    (0..steps)
        .map(|s| {
            let a = (PI * PEAK * (s as f64 - delay)).powi(2);
            ((1.0 - 2.0 * a) * (-a).exp()) as f32
        })
        .collect()
}

/// Float64 snapshots of the same scheme, computed once per process for a
/// grid and source (every device and the split run check against the same
/// reference; at size large one takes seconds even on many cores). The
/// last two (the grid and its balanced one) are kept.
pub fn reference(g: Grid, source: &[f32]) -> Arc<Vec<f64>> {
    type Kept = Vec<(Grid, Vec<u32>, Arc<Vec<f64>>)>;
    static KEPT: Mutex<Kept> = Mutex::new(Vec::new());
    let key: Vec<u32> = source.iter().map(|v| v.to_bits()).collect();
    let found = {
        let kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
        kept.iter().find(|(kg, ks, _)| *kg == g && *ks == key).map(|(_, _, r)| Arc::clone(r))
    };
    if let Some(reference) = found {
        return reference;
    }
    let reference = Arc::new(compute_reference(g, source));
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    if kept.len() >= REFERENCES_KEPT {
        kept.remove(0);
    }
    kept.push((g, key, Arc::clone(&reference)));
    reference
}

/// References [`reference`] keeps.
const REFERENCES_KEPT: usize = 2;

/// [`reference`]'s computation: each step's rows are cut into one block
/// per core, computed on scoped threads (every cell from the previous two
/// fields only, so the result does not depend on the cut).
fn compute_reference(g: Grid, source: &[f32]) -> Vec<f64> {
    let (nx, ny) = (g.nx, g.ny);
    let (sx, sy) = g.source();
    let c2 = f64::from(C2);
    let mut prev = vec![0.0f64; g.cells()];
    let mut cur = vec![0.0f64; g.cells()];
    let mut next = vec![0.0f64; g.cells()];
    let mut snapshots = Vec::with_capacity(g.snapshots() * g.cells());
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    // Rows per block: at least 16, so small grids stay on few threads.
    let rows_per_block = ny.div_ceil(threads).max(16);
    for (s, &src) in source.iter().enumerate() {
        let (p, c) = (&prev, &cur);
        let step_rows = |first_row: usize, out: &mut [f64]| {
            for (k, row) in out.chunks_mut(nx).enumerate() {
                let y = first_row + k;
                if y < 2 || y + 2 >= ny {
                    continue;
                }
                for (x, cell) in row.iter_mut().enumerate().take(nx.saturating_sub(2)).skip(2) {
                    let i = y * nx + x;
                    let near = c[i - 1] + c[i + 1] + c[i - nx] + c[i + nx];
                    let far = c[i - 2] + c[i + 2] + c[i - 2 * nx] + c[i + 2 * nx];
                    let lap = 4.0 / 3.0 * near - far / 12.0 - 5.0 * c[i];
                    *cell = 2.0 * c[i] - p[i] + c2 * lap;
                }
            }
        };
        std::thread::scope(|scope| {
            for (b, block) in next.chunks_mut(rows_per_block * nx).enumerate() {
                let step_rows = &step_rows;
                scope.spawn(move || step_rows(b * rows_per_block, block));
            }
        });
        next[sy * nx + sx] += f64::from(src);
        std::mem::swap(&mut prev, &mut cur);
        std::mem::swap(&mut cur, &mut next);
        if (s + 1) % g.snapshot_every == 0 {
            snapshots.extend_from_slice(&cur);
        }
    }
    snapshots
}

/// One variant's snapshots and device times.
struct Run {
    snapshots: Vec<f32>,
    total_ms: f64,
    /// Every step and copy on the device timeline.
    intervals: Vec<Interval>,
}

impl Run {
    /// Total time of the snapshot copies themselves.
    fn copy_ms(&self) -> f64 {
        crate::timeline::total_ms(&self.intervals, Kind::Copy)
    }
}

/// `wave_step`'s arguments: the fields it reads (two) and writes, then the
/// grid, the wave speed and the source's cell and value; for an eager
/// launch or a graph's (`A` is [`hetero::Arg`] or [`hetero::GraphArg`]).
fn wave_args<A: From<u32> + From<f32>>(fields: [A; 3], g: Grid, source: f32) -> Vec<A> {
    let (sx, sy) = g.source();
    let scalars: [A; 6] =
        [(g.nx as u32).into(), (g.ny as u32).into(), C2.into(), (sx as u32).into(), (sy as u32).into(), source.into()];
    fields.into_iter().chain(scalars).collect()
}

fn launch_step(
    stream: &Stream,
    kernel: &Kernel,
    width: u32,
    g: Grid,
    fields: &mut [DeviceBuffer<f32>],
    step: usize,
    source: f32,
) -> Result<(), Failure> {
    let [prev, cur, next] = fields
        .get_disjoint_mut([step % FIELDS, (step + 1) % FIELDS, (step + 2) % FIELDS])
        .map_err(|e| Failure::Internal(format!("wave field rotation: {e}")))?;
    let (prev, cur, next) = (prev.slice(..)?, cur.slice(..)?, next.slice_mut(..)?);
    let config = super::grid::rows_launch(g.nx, g.ny, width);
    let args = wave_args([(&prev).into(), (&cur).into(), (&next).into()], g, source);
    // SAFETY: wave_step touches cells [0, nx*ny) of the three fields, each that long.
    unsafe { stream.launch(kernel, config, &args) }?;
    Ok(())
}

/// The [`FIELDS`] rotating wavefields of `cells` cells, zeroed on `stream`.
fn zeroed_fields(ctx: &Context, stream: &Stream, cells: usize) -> Result<Vec<DeviceBuffer<f32>>, Failure> {
    (0..FIELDS)
        .map(|_| {
            let mut field = ctx.alloc::<f32>(cells)?;
            stream.fill(&mut field, 0.0f32)?;
            Ok(field)
        })
        .collect()
}

/// The fields step `step` reads (two) and writes, as indices of the
/// [`FIELDS`] rotating ones.
fn rotation(step: usize) -> [usize; 3] {
    [step % FIELDS, (step + 1) % FIELDS, (step + 2) % FIELDS]
}

/// The `graph` variant: one graph of `snapshot_every` steps and the
/// staging copy of the last field written, recorded for the first
/// interval; per interval its fields, source values and staging buffer
/// are set, it is replayed on the compute stream, and the copy stream
/// copies the staged snapshot out (the tracker orders the two: the copy
/// waits for the replay that staged it, a replay for the copy that last
/// read its staging buffer). Steps after the last snapshot run as plain
/// launches once the graph is gone.
fn run_graph(ctx: &Context, clock: &Clock, kernel: &Kernel, g: Grid, source: &[f32]) -> Result<Run, Failure> {
    let (cells, every) = (g.cells(), g.snapshot_every);
    let width = block_width(kernel);
    let (compute, copier) = (ctx.stream()?, ctx.stream()?);
    let mut fields = zeroed_fields(ctx, &compute, cells)?;
    let mut snapshots = ctx.alloc_pinned::<f32>(g.snapshots() * cells)?;
    let mut staging = (0..STAGING).map(|_| ctx.alloc::<f32>(cells)).collect::<Result<Vec<_>, _>>()?;
    let (start, stop) = (ctx.event()?, ctx.event()?);
    if clock.unavailable().is_some() {
        compute.synchronize()?;
    }
    let intervals = {
        let mut rec = ctx.recorder();
        let bound: Vec<_> = fields.iter_mut().map(|f| rec.bind_mut(f)).collect::<Result<_, _>>()?;
        let staged: Vec<_> = staging.iter_mut().map(|b| rec.bind_mut(b)).collect::<Result<_, _>>()?;
        let s = rec.stream();
        let config = super::grid::rows_launch(g.nx, g.ny, width);
        let mut steps = Vec::with_capacity(every);
        for (step, &src) in source.iter().enumerate().take(every) {
            let [prev, cur, next] = rotation(step);
            let args =
                wave_args([bound[prev].read().into(), bound[cur].read().into(), bound[next].write().into()], g, src);
            // SAFETY: wave_step touches cells [0, nx*ny) of the three
            // fields, each that long, for every rotation set below.
            steps.push(unsafe { rec.launch(s, kernel, config, args) }?);
        }
        let stage = rec.copy(s, bound[rotation(every - 1)[2]], staged[0])?;
        let mut graph = rec.finish()?;
        let since = Instant::now();
        compute.record(&start)?;
        copier.wait(&start)?;
        let mut timeline = match clock {
            Clock::Device => Timeline::new(ctx, &compute, &[&copier])?,
            Clock::Host(_) => Timeline::off(ctx)?,
        };
        for slot in 0..g.snapshots() {
            let first = slot * every;
            for (i, &node) in steps.iter().enumerate() {
                let [prev, cur, next] = rotation(first + i);
                // SAFETY: as recorded: whole fields of the same length.
                unsafe {
                    graph.set_arg(node, 0, bound[prev].read())?;
                    graph.set_arg(node, 1, bound[cur].read())?;
                    graph.set_arg(node, 2, bound[next].write())?;
                    graph.set_arg(node, 8, source[first + i])?;
                }
            }
            let target = staged[slot % STAGING];
            graph.set_copy(stage, bound[rotation(first + every - 1)[2]], target)?;
            timeline.span(&compute, "compute", "interval", Kind::Kernel, || graph.replay(&compute))?;
            let dst = snapshots.slice_mut(slot * cells..(slot + 1) * cells)?;
            timeline.span(&copier, "copy", "snapshot D2H", Kind::Copy, || copier.copy(graph.get(target)?, dst))?;
        }
        drop(graph);
        for (step, &src) in source.iter().enumerate().skip(g.snapshots() * every) {
            timeline.span(&compute, "compute", "wave_step", Kind::Kernel, || {
                launch_step(&compute, kernel, width, g, &mut fields, step, src)
            })?;
        }
        let drained = ctx.event()?;
        copier.record(&drained)?;
        compute.wait(&drained)?;
        compute.record(&stop)?;
        stop.synchronize()?;
        (clock.elapsed_ms(&start, &stop, since)?, timeline.finish()?)
    };
    let (total_ms, intervals) = intervals;
    Ok(Run { snapshots: snapshots.host_slice()?.to_vec(), total_ms, intervals })
}

fn run_variant(
    ctx: &Context,
    clock: &Clock,
    kernel: &Kernel,
    g: Grid,
    source: &[f32],
    variant: Variant,
) -> Result<Run, Failure> {
    if variant == Variant::Graph {
        return run_graph(ctx, clock, kernel, g, source);
    }
    let cells = g.cells();
    let width = block_width(kernel);
    let compute = ctx.stream()?;
    let copier = ctx.stream()?;
    let mut fields = zeroed_fields(ctx, &compute, cells)?;
    let mut snapshots = ctx.alloc_pinned::<f32>(g.snapshots() * cells)?;
    let staging_count = if variant == Variant::Sync { 0 } else { STAGING };
    let mut staging = (0..staging_count).map(|_| ctx.alloc::<f32>(cells)).collect::<Result<Vec<_>, _>>()?;
    let events = |n: usize| (0..n).map(|_| ctx.event()).collect::<Result<Vec<Event>, _>>();
    let (staged, copied) = (events(staging_count)?, events(staging_count)?);
    let mut awaiting_copy = [false; STAGING];
    let (start, stop) = (ctx.event()?, ctx.event()?);
    // On the host's clock: from the idle streams (the fields zeroed) to the end.
    if clock.unavailable().is_some() {
        compute.synchronize()?;
    }
    let since = Instant::now();
    compute.record(&start)?;
    copier.wait(&start)?;
    let mut timeline = match clock {
        Clock::Device => Timeline::new(ctx, &compute, &[&copier])?,
        Clock::Host(_) => Timeline::off(ctx)?,
    };

    for (step, &src) in source.iter().enumerate() {
        let target = (step + 2) % FIELDS;
        timeline.span(&compute, "compute", "wave_step", Kind::Kernel, || {
            launch_step(&compute, kernel, width, g, &mut fields, step, src)
        })?;
        if (step + 1) % g.snapshot_every != 0 {
            continue;
        }
        let slot = (step + 1) / g.snapshot_every - 1;
        let dst = snapshots.slice_mut(slot * cells..(slot + 1) * cells)?;
        if variant == Variant::Sync {
            timeline.span(&compute, "compute", "snapshot D2H", Kind::Copy, || compute.copy(&fields[target], dst))?;
            continue;
        }
        // The staging buffer this snapshot goes through, once the copy
        // stream no longer reads it (in stream order, the typed layer's
        // tracking would also make the compute stream wait).
        let k = slot % STAGING;
        if awaiting_copy[k] {
            match variant {
                Variant::StreamSync => {
                    copier.synchronize()?;
                    awaiting_copy = [false; STAGING];
                }
                _ => compute.wait(&copied[k])?,
            }
        }
        let buffer = &mut staging[k];
        timeline
            .span(&compute, "compute", "snapshot D2D", Kind::Kernel, || compute.copy(&fields[target], &mut *buffer))?;
        match variant {
            Variant::StreamSync => compute.synchronize()?,
            _ => {
                compute.record(&staged[k])?;
                copier.wait(&staged[k])?;
            }
        }
        timeline.span(&copier, "copy", "snapshot D2H", Kind::Copy, || copier.copy(&staging[k], dst))?;
        copier.record(&copied[k])?;
        awaiting_copy[k] = true;
    }
    let drained = ctx.event()?;
    copier.record(&drained)?;
    compute.wait(&drained)?;
    compute.record(&stop)?;
    stop.synchronize()?;
    let total_ms = clock.elapsed_ms(&start, &stop, since)?;
    let intervals = timeline.finish()?;
    Ok(Run { snapshots: snapshots.host_slice()?.to_vec(), total_ms, intervals })
}

/// Runs the three variants on the size's grid, then on a balanced one
/// (module doc), each compared with the reference and with its sync run.
pub fn run(env: &Env<'_>) -> Result<Vec<Outcome>, Failure> {
    let g = Grid::tuned(env.size, env.tuning).map_err(Failure::Internal)?;
    let kernel = env.build(hetero::kernels::WAVE)?.kernel("wave_step")?;
    // Untimed warm-up: runtimes may finish compiling a kernel at its first launch.
    let warm = Grid { nx: 32, ny: 32, steps: 2, snapshot_every: 1 };
    run_variant(env.ctx, env.clock, &kernel, warm, &ricker(2), Variant::Sync)?;
    let mut outcomes = run_grid(env, &kernel, g, "", true)?;
    if !env.peers.is_empty() {
        let source = ricker(g.steps);
        let expect = reference(g, &source);
        let peak = expect.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let snapshots = match outcomes.first().and_then(|o| o.output.as_ref()) {
            Some(super::Output::F32(s)) => s.clone(),
            _ => return Err(Failure::Internal("the sync run kept no snapshots".into())),
        };
        let overlapped_ms = outcomes.iter().find(|o| o.variant == Variant::EventSync.name()).and_then(|o| o.device_ms);
        let best = outcomes
            .iter()
            .filter_map(|o| Some((o.device_ms?, Variant::ALL.into_iter().find(|v| v.name() == o.variant)?)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let rerun = |variant| {
            let run = run_variant(env.ctx, env.clock, &kernel, g, &source, variant)?;
            Ok((run.snapshots, run.total_ms, run.intervals))
        };
        let rerun_best = best.map(|(_, variant)| move || rerun(variant));
        let single = super::split::SingleRun {
            snapshots: &snapshots,
            total_ms: outcomes[0].device_ms,
            overlapped_ms,
            best_ms: best.map(|(ms, _)| ms),
            rerun_best: rerun_best.as_ref().map(|f| f as &dyn Fn() -> Result<super::split::OneDevice, Failure>),
        };
        outcomes.extend(super::split::run(env, g, &source, &expect, tolerance(g, peak), &single)?);
    }
    if env.tuning.deterministic || !env.tuning.runs_wave(super::WaveVariant::Balanced) {
        // The balanced variants' snapshot interval is each device's own
        // choice, from its timings: not one output for every device.
        for outcome in &mut outcomes {
            outcome.metrics.insert("block".into(), f64::from(block_width(&kernel)));
        }
        return Ok(outcomes);
    }
    let balance = Balance::measure(env.ctx, env.clock, &kernel, g)?;
    let k = balance.snapshot_every(g.steps);
    let balanced = Grid { steps: k * (g.steps / k).min(BALANCED_SNAPSHOTS), snapshot_every: k, ..g };
    let mut more = run_grid(env, &kernel, balanced, "balanced-", false)?;
    // `conform` prints the choice from these (table.rs).
    for outcome in &mut more {
        outcome.metrics.insert("snapshot_every".into(), k as f64);
        outcome.metrics.insert("step_ms".into(), balance.step_ms);
        outcome.metrics.insert("snapshot_copy_ms".into(), balance.copy_ms);
    }
    outcomes.extend(more);
    for outcome in &mut outcomes {
        outcome.metrics.insert("block".into(), f64::from(block_width(&kernel)));
    }
    Ok(outcomes)
}

/// The bound on a run's difference to the float64 reference (module doc).
fn tolerance(g: Grid, peak: f64) -> f64 {
    g.steps as f64 * 8.0 * U32 * peak
}

/// One step's and one snapshot copy's device time on this device: the
/// medians of a few of each, after one of each untimed.
#[derive(Debug, Clone, Copy)]
struct Balance {
    step_ms: f64,
    copy_ms: f64,
}

impl Balance {
    const REPEATS: usize = 5;

    fn measure(ctx: &Context, clock: &Clock, kernel: &Kernel, g: Grid) -> Result<Self, Failure> {
        let stream = ctx.stream()?;
        let width = block_width(kernel);
        let mut fields = zeroed_fields(ctx, &stream, g.cells())?;
        let mut host = ctx.alloc_pinned::<f32>(g.cells())?;
        let time = |op: &mut dyn FnMut() -> Result<(), Failure>| -> Result<f64, Failure> {
            op()?;
            let times = (0..Self::REPEATS).map(|_| timed(clock, ctx, &stream, &mut *op).map(|((), ms)| ms));
            Ok(median(times.collect::<Result<_, _>>()?))
        };
        let step_ms = time(&mut || launch_step(&stream, kernel, width, g, &mut fields, 0, 0.0))?;
        let copy_ms = time(&mut || Ok(stream.copy(&fields[0], &mut host)?))?;
        Ok(Self { step_ms, copy_ms })
    }

    /// The interval that makes copy time equal compute time, within
    /// `1..=steps` (the cast saturates, and takes NaN to 0).
    fn snapshot_every(self, steps: usize) -> usize {
        ((self.copy_ms / self.step_ms).round() as usize).clamp(1, steps.max(1))
    }
}

/// The three variants on grid `g`, named with `prefix`; `images` adds
/// pictures of the sync run's snapshots for --html.
fn run_grid(env: &Env<'_>, kernel: &Kernel, g: Grid, prefix: &str, images: bool) -> Result<Vec<Outcome>, Failure> {
    let source = ricker(g.steps);
    env.dump(Workload::Wave, &format!("{prefix}source"), &[g.steps as u64], &source)?;
    let expect = reference(g, &source);
    let shape = [g.snapshots() as u64, g.ny as u64, g.nx as u64];
    env.dump(Workload::Wave, &format!("{prefix}snapshots_ref"), &shape, &expect)?;
    let peak = expect.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let tolerance = tolerance(g, peak);

    let mut outcomes = Vec::new();
    let mut baseline: Option<Run> = None;
    // `balanced` selects its four variants together.
    let chosen = |v: Variant| !prefix.is_empty() || env.tuning.runs_wave(v.selector());
    for variant in Variant::ALL.into_iter().filter(|&v| chosen(v)) {
        let mut run = run_variant(env.ctx, env.clock, kernel, g, &source, variant)?;
        let name = format!("{prefix}{}", variant.name());
        env.dump(Workload::Wave, &format!("{name}_snapshots"), &shape, &run.snapshots)?;
        let verdict: Verdict = elementwise(&run.snapshots, &expect, |_| tolerance);
        let mut outcome = Outcome::new(name, verdict, Some(run.total_ms))
            .metric("peak_amplitude", peak)
            .with_output(super::Output::F32(run.snapshots.clone()));
        // Copy and compute times come from device intervals, which a
        // host-clock run does not have.
        let intervals = env.clock.unavailable().is_none();
        let copy_ms = run.copy_ms();
        if intervals {
            outcome = outcome.metric("copy_ms", copy_ms);
        }
        match &baseline {
            None => {
                if images {
                    // Pictures of up to six of the synchronous variant's
                    // snapshots, evenly spaced, for --html.
                    let cells = g.cells();
                    let count = run.snapshots.len() / cells.max(1);
                    let stride = count.div_ceil(6).max(1);
                    outcome.images = run
                        .snapshots
                        .chunks(cells)
                        .enumerate()
                        .filter(|(k, _)| (k + 1) % stride == 0)
                        .map(|(k, field)| {
                            let label = format!("step {}", (k + 1) * g.snapshot_every);
                            crate::image::Image::downsample(label, field, g.nx, g.ny, 48)
                        })
                        .collect();
                }
                // The sync variant runs copies and steps one after the
                // other, so its total minus the copies is compute time.
                // Each step must read two fields and write one.
                let compute_ms = run.total_ms - copy_ms;
                let bytes = g.steps as f64 * 3.0 * g.cells() as f64 * 4.0;
                if intervals {
                    outcome = outcome.metric("compute_ms", compute_ms).metric("gbps", bytes / (compute_ms * 1e6));
                }
            }
            Some(sync) => {
                let differing =
                    run.snapshots.iter().zip(&sync.snapshots).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
                if differing > 0 {
                    outcome.note = Some(format!("{differing} snapshot values differ from the sync variant's"));
                }
                // The best an overlapped run can do: the longer of the sync
                // run's summed step intervals and summed copy intervals
                // (gaps between them, such as host latency, are in neither;
                // the staging copies count against the achieved time).
                let compute_only_ms = crate::timeline::total_ms(&sync.intervals, Kind::Kernel);
                let copy_only_ms = sync.copy_ms();
                let ideal_ms = compute_only_ms.max(copy_only_ms);
                outcome =
                    outcome.metric("speedup_vs_sync", sync.total_ms / run.total_ms).metric("sync_ms", sync.total_ms);
                if intervals {
                    outcome = outcome
                        .metric("compute_only_ms", compute_only_ms)
                        .metric("copy_only_ms", copy_only_ms)
                        .metric("ideal_ms", ideal_ms);
                }
                if intervals && ideal_ms > 0.0 {
                    outcome = outcome.metric("of_ideal", run.total_ms / ideal_ms);
                }
                if let Some(hidden) = hidden_copy_fraction(&run.intervals) {
                    outcome = outcome.metric("hidden_copy_fraction", hidden);
                }
            }
        }
        if variant == Variant::Graph {
            let event_sync = format!("{prefix}{}", Variant::EventSync.name());
            if let Some(ms) = outcomes.iter().find(|o: &&Outcome| o.variant == event_sync).and_then(|o| o.device_ms) {
                outcome = outcome.metric("vs_event_sync", run.total_ms / ms);
            }
        }
        if baseline.is_none() {
            // The sync run's intervals also give the others their ideal.
            outcome.intervals = run.intervals.clone();
            baseline = Some(run);
        } else {
            outcome.intervals = std::mem::take(&mut run.intervals);
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}
