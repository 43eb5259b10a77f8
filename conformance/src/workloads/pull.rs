//! pull: jet pull vectors over many collision events in flight on several
//! streams.
//!
//! For jet `j` with constituents `c`:
//! `p_j = sum_c (pT_c / pT_j) |r_c - r_j| (r_c - r_j)`, `r = (eta, phi)`,
//! the phi difference wrapped into (-pi, pi]. Each event's inputs are
//! staged in pinned memory (sub-ranges of one allocation per array), copied
//! to the lane's device buffers, its per-jet constituent counts are turned
//! into offsets by the device scan, one block per jet sums its
//! constituents, and the pull vectors are copied back. Consecutive events
//! are handled in batches of [`BATCH`] (their jets and constituents are
//! contiguous, so a batch costs the same few commands as one event), and
//! batches go round-robin to the lanes (one stream and buffer set each).
//!
//! Tolerance per component of jet `j`: `gamma(k) * sum_c w_c (|d_c| + 2 pi)`
//! with `w_c = pT_c / pT_j * |r_c - r_j|` and `d_c` the component's
//! difference. `k` covers the thread's loop, the block tree and the ten or so
//! roundings of each term; the `2 pi` term covers the absolute error of the
//! wrap, which subtracts float32's 2 pi.

use std::f64::consts::PI;
use std::time::Instant;

use hetero::{BlockRequest, Context, DeviceBuffer, Event, Kernel, LaunchConfig, PinnedBuffer, Stream};
use rand::Rng;

use super::scan::ScanPlan;
use super::{Env, Failure, Outcome, Size, Workload};
use crate::check::{elementwise, gamma, tree_depth};
use crate::inputs;
use crate::timeline::{Kind, Timeline, hidden_copy_fraction, total_ms};

/// Threads per block of `pull_jets` (one block per jet) asked for; see
/// [`block`].
pub const THREADS: u32 = 64;

/// Threads per block `pull_jets` runs with: [`THREADS`], or fewer where
/// the kernel allows fewer (any size works; one float of shared memory per
/// thread).
pub fn block(kernel: &Kernel) -> u32 {
    kernel.block_size(BlockRequest::new(THREADS).shared_per_thread(4))
}
/// Jets per event are uniform in `1..=MAX_JETS`.
pub const MAX_JETS: usize = 48;
/// Constituents per jet are uniform in `0..=MAX_CONSTITUENTS`.
pub const MAX_CONSTITUENTS: usize = 96;
/// Collision events per batch.
pub const BATCH: usize = 64;
/// Constituents lie within this distance of their jet's axis in (eta, phi).
pub const RADIUS: f64 = 0.4;

/// Events at each size.
pub fn events(size: Size) -> usize {
    match size {
        Size::Small => 200,
        Size::Medium => 10_000,
        Size::Large => 100_000,
    }
}

/// One event's slice of the flat arrays.
#[derive(Debug, Clone, Copy)]
pub struct EventRange {
    /// First jet of the event.
    pub first_jet: usize,
    /// Jets in the event.
    pub jets: usize,
    /// First constituent of the event.
    pub first_constituent: usize,
    /// Constituents in the event.
    pub constituents: usize,
}

/// Generated collision events, flattened: jets' constituents are consecutive.
#[derive(Debug, Default)]
pub struct Collisions {
    /// Constituents of each jet.
    pub counts: Vec<u32>,
    /// Jet axis and transverse momentum.
    pub jet: [Vec<f32>; 3],
    /// Constituent transverse momentum, eta, phi.
    pub constituent: [Vec<f32>; 3],
    /// Each event's ranges.
    pub events: Vec<EventRange>,
}

/// Wraps a phi difference into (-pi, pi].
fn wrap(d: f64) -> f64 {
    if d > PI {
        d - 2.0 * PI
    } else if d <= -PI {
        d + 2.0 * PI
    } else {
        d
    }
}

/// Draws `n` events. Jet axes cover the whole phi range, so constituents
/// of jets near phi = +-pi cross the boundary and exercise the wrap.
pub fn generate(rng: &mut impl Rng, n: usize) -> Collisions {
    let mut c = Collisions::default();
    for _ in 0..n {
        let first_jet = c.counts.len();
        let first_constituent = c.constituent[0].len();
        let jets = rng.random_range(1..=MAX_JETS);
        for _ in 0..jets {
            let eta = rng.random_range(-2.5..2.5f64);
            let phi = rng.random_range(-PI..PI);
            let count = rng.random_range(0..=MAX_CONSTITUENTS);
            let mut pt_sum = 0.0f64;
            for _ in 0..count {
                let pt = 0.5 + 30.0 * rng.random::<f64>().powi(3);
                let (radius, angle) = (RADIUS * rng.random::<f64>().sqrt(), rng.random_range(0.0..2.0 * PI));
                let pt32 = pt as f32;
                c.constituent[0].push(pt32);
                c.constituent[1].push((eta + radius * angle.cos()) as f32);
                c.constituent[2].push(wrap(phi + radius * angle.sin()) as f32);
                pt_sum += f64::from(pt32);
            }
            c.counts.push(count as u32);
            c.jet[0].push(if count == 0 { 1.0 } else { pt_sum as f32 });
            c.jet[1].push(eta as f32);
            c.jet[2].push(phi as f32);
        }
        c.events.push(EventRange {
            first_jet,
            jets,
            first_constituent,
            constituents: c.constituent[0].len() - first_constituent,
        });
    }
    c
}

/// Consecutive events merged into batches of up to [`BATCH`].
pub fn batches(events: &[EventRange]) -> Vec<EventRange> {
    events
        .chunks(BATCH)
        .map(|chunk| EventRange {
            first_jet: chunk[0].first_jet,
            jets: chunk.iter().map(|e| e.jets).sum(),
            first_constituent: chunk[0].first_constituent,
            constituents: chunk.iter().map(|e| e.constituents).sum(),
        })
        .collect()
}

/// Float64 pull vectors (eta, phi per jet) and their tolerances.
pub fn reference(c: &Collisions, threads: u32) -> (Vec<f64>, Vec<f64>) {
    let mut pull = Vec::with_capacity(2 * c.counts.len());
    let mut tolerance = Vec::with_capacity(2 * c.counts.len());
    let mut next = 0usize;
    for (j, &count) in c.counts.iter().enumerate() {
        let (pt, eta, phi) = (f64::from(c.jet[0][j]), f64::from(c.jet[1][j]), f64::from(c.jet[2][j]));
        let (mut px, mut py, mut mx, mut my) = (0.0, 0.0, 0.0, 0.0);
        for i in next..next + count as usize {
            let de = f64::from(c.constituent[1][i]) - eta;
            let dp = wrap(f64::from(c.constituent[2][i]) - phi);
            let w = f64::from(c.constituent[0][i]) / pt * de.hypot(dp);
            px += w * de;
            py += w * dp;
            mx += w * (de.abs() + 2.0 * PI);
            my += w * (dp.abs() + 2.0 * PI);
        }
        next += count as usize;
        let k = (count as usize).div_ceil(threads as usize) as f64 + tree_depth(threads) + 10.0;
        pull.extend([px, py]);
        tolerance.extend([gamma(k) * mx, gamma(k) * my]);
    }
    (pull, tolerance)
}

/// Where a batch's inputs are copied from.
enum Staging<'a> {
    /// Sub-ranges of pinned buffers: asynchronous copies.
    Pinned(&'a Staged),
    /// The generated vectors themselves: pageable memory, blocking copies.
    Pageable(&'a Collisions),
}

/// Pinned staging of every event's inputs.
struct Staged {
    counts: PinnedBuffer<u32>,
    jet: [PinnedBuffer<f32>; 3],
    constituent: [PinnedBuffer<f32>; 3],
}

/// One stream with device buffers for the largest event and pinned output.
struct Lane {
    stream: Stream,
    counts: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u32>,
    jet: [DeviceBuffer<f32>; 3],
    constituent: [DeviceBuffer<f32>; 3],
    pull: DeviceBuffer<f32>,
    scan: ScanPlan,
    out: PinnedBuffer<f32>,
}

impl Lane {
    fn new(
        ctx: &Context,
        stream: Stream,
        max_jets: usize,
        max_constituents: usize,
        total_jets: usize,
    ) -> Result<Self, hetero::Error> {
        let floats = |n| ctx.alloc::<f32>(n);
        Ok(Self {
            stream,
            counts: ctx.alloc(max_jets)?,
            offsets: ctx.alloc(max_jets)?,
            jet: [floats(max_jets)?, floats(max_jets)?, floats(max_jets)?],
            constituent: [floats(max_constituents)?, floats(max_constituents)?, floats(max_constituents)?],
            pull: floats(2 * max_jets)?,
            scan: ScanPlan::new(ctx, THREADS, max_jets)?,
            out: ctx.alloc_pinned(2 * total_jets)?,
        })
    }

    /// Enqueues one batch of events: stage in, scan counts, pull kernel,
    /// copy out, each as a span of `timeline` on track `track`.
    fn enqueue(
        &mut self,
        staged: &Staging<'_>,
        kernel: &Kernel,
        e: EventRange,
        timeline: &mut Timeline<'_>,
        track: &str,
    ) -> Result<(), hetero::Error> {
        let s = &self.stream;
        let jets = e.first_jet..e.first_jet + e.jets;
        let consts = e.first_constituent..e.first_constituent + e.constituents;
        let (counts, jet, constituent) = (&mut self.counts, &mut self.jet, &mut self.constituent);
        timeline.span(s, track, "stage in", Kind::Copy, || match staged {
            Staging::Pinned(staged) => stage_in(s, staged, counts, jet, constituent, e),
            // Ordinary memory: each copy returns only when it is done.
            Staging::Pageable(c) => {
                s.copy_from_host(&c.counts[jets.clone()], counts.slice_mut(..e.jets)?)?;
                for (src, dst) in c.jet.iter().zip(jet.iter_mut()) {
                    s.copy_from_host(&src[jets.clone()], dst.slice_mut(..e.jets)?)?;
                }
                for (src, dst) in c.constituent.iter().zip(constituent.iter_mut()) {
                    s.copy_from_host(&src[consts.clone()], dst.slice_mut(..e.constituents)?)?;
                }
                Ok(())
            }
        })?;
        let (scan, offsets, pull) = (&mut self.scan, &mut self.offsets, &mut self.pull);
        let (counts, jet, constituent) = (&self.counts, &self.jet, &self.constituent);
        timeline.span(s, track, "scan + pull_jets", Kind::Kernel, || {
            scan.enqueue(s, &counts.slice(..e.jets)?, &mut offsets.slice_mut(..e.jets)?)?;
            launch_pull_jets(s, kernel, constituent, jet, offsets, pull, e)
        })?;
        let (pull, out) = (&self.pull, &mut self.out);
        timeline.span(s, track, "copy out", Kind::Copy, || {
            s.copy(pull.slice(..2 * e.jets)?, out.slice_mut(2 * e.first_jet..2 * (e.first_jet + e.jets))?)
        })
    }
}

/// Enqueues the copies of batch `e`'s inputs from pinned staging to the
/// start of the device buffers.
fn stage_in(
    s: &Stream,
    staged: &Staged,
    counts: &mut DeviceBuffer<u32>,
    jet: &mut [DeviceBuffer<f32>; 3],
    constituent: &mut [DeviceBuffer<f32>; 3],
    e: EventRange,
) -> Result<(), hetero::Error> {
    let jets = e.first_jet..e.first_jet + e.jets;
    let consts = e.first_constituent..e.first_constituent + e.constituents;
    s.copy(staged.counts.slice(jets.clone())?, counts.slice_mut(..e.jets)?)?;
    for (src, dst) in staged.jet.iter().zip(jet.iter_mut()) {
        s.copy(src.slice(jets.clone())?, dst.slice_mut(..e.jets)?)?;
    }
    for (src, dst) in staged.constituent.iter().zip(constituent.iter_mut()) {
        s.copy(src.slice(consts.clone())?, dst.slice_mut(..e.constituents)?)?;
    }
    Ok(())
}

/// Enqueues `pull_jets` for batch `e`, whose constituents and jets are at
/// the start of the buffers and whose jet offsets were scanned.
fn launch_pull_jets(
    s: &Stream,
    kernel: &Kernel,
    constituent: &[DeviceBuffer<f32>; 3],
    jet: &[DeviceBuffer<f32>; 3],
    offsets: &DeviceBuffer<u32>,
    pull: &mut DeviceBuffer<f32>,
    e: EventRange,
) -> Result<(), hetero::Error> {
    let [cp, ce, cf] = constituent;
    let [jp, je, jf] = jet;
    let (cp, ce, cf) = (cp.slice(..)?, ce.slice(..)?, cf.slice(..)?);
    let (jp, je, jf) = (jp.slice(..)?, je.slice(..)?, jf.slice(..)?);
    let offsets = offsets.slice(..e.jets)?;
    let out = pull.slice_mut(..2 * e.jets)?;
    let threads = block(kernel);
    let config = LaunchConfig::linear(e.jets as u32, threads, threads as usize * 4);
    let args = [
        (&cp).into(),
        (&ce).into(),
        (&cf).into(),
        (&offsets).into(),
        (&jp).into(),
        (&je).into(),
        (&jf).into(),
        (&out).into(),
        (e.jets as u32).into(),
        (e.constituents as u32).into(),
    ];
    // SAFETY: pull_jets reads constituents [0, n_constituents) of each
    // array, offsets and jets [0, n_jets), and writes pull [0, 2 n_jets);
    // the callers' buffers are at least that long.
    unsafe { s.launch(kernel, config, &args) }
}

/// Runs every variant on the same events.
pub fn run(env: &Env<'_>) -> Result<Vec<Outcome>, Failure> {
    let mut rng = inputs::rng(env.seed, "pull");
    let collisions = generate(&mut rng, events(env.size));
    let total_jets = collisions.counts.len();
    let ctx = env.ctx;
    let kernel = ctx.build_module(hetero::kernels::PULL)?.kernel("pull_jets")?;
    let (expect, tolerance) = reference(&collisions, block(&kernel));
    dump_inputs(env, &collisions)?;
    env.dump(Workload::Pull, "pull_ref", &[total_jets as u64, 2], &expect)?;

    let staged = Staged {
        counts: ctx.pinned_from_slice(&collisions.counts)?,
        jet: [
            ctx.pinned_from_slice(&collisions.jet[0])?,
            ctx.pinned_from_slice(&collisions.jet[1])?,
            ctx.pinned_from_slice(&collisions.jet[2])?,
        ],
        constituent: [
            ctx.pinned_from_slice(&collisions.constituent[0])?,
            ctx.pinned_from_slice(&collisions.constituent[1])?,
            ctx.pinned_from_slice(&collisions.constituent[2])?,
        ],
    };
    let batches = batches(&collisions.events);
    let max_jets = batches.iter().map(|e| e.jets).max().unwrap_or(1);
    let max_constituents = batches.iter().map(|e| e.constituents).max().unwrap_or(0);

    let shape = Shape { max_jets, max_constituents, total_jets };

    // Untimed warm-up: runtimes may finish compiling a kernel at its first launch.
    if let Some(&first) = batches.first() {
        let mut lane = Lane::new(ctx, ctx.untimed_stream()?, max_jets, max_constituents, total_jets)?;
        lane.enqueue(&Staging::Pinned(&staged), &kernel, first, &mut Timeline::off(ctx)?, "warm-up")?;
        lane.stream.synchronize()?;
    }
    let mut outcomes = Vec::new();
    let single = |n: usize, pageable| Variant { lanes: n.max(1), threaded: false, pageable };
    let mut variants: Vec<(String, Variant)> =
        env.tuning.pull_streams.iter().map(|&n| (format!("streams-{n}"), single(n, false))).collect();
    variants.extend(
        env.tuning
            .pull_threads
            .iter()
            .map(|&n| (format!("threads-{n}"), Variant { lanes: n.max(1), threaded: true, pageable: false })),
    );
    if env.tuning.pull_pageable {
        variants.extend(env.tuning.pull_streams.iter().map(|&n| (format!("pageable-streams-{n}"), single(n, true))));
    }
    for (name, variant) in variants {
        let staging = if variant.pageable { Staging::Pageable(&collisions) } else { Staging::Pinned(&staged) };
        // Measured: lanes without timing and no per-operation events, so
        // the time is what the work costs on every backend.
        let (ms, got, _) = pass(env, variant, &staging, &kernel, &batches, shape, false)?;
        env.dump(Workload::Pull, &format!("{name}_pull"), &[total_jets as u64, 2], &got)?;
        let mut verdict = elementwise(&got, &expect, |i| tolerance[i]);
        // Instrumented: the same batches with events around every operation,
        // for the copy/compute intervals and the overlap.
        let (instrumented_ms, again, intervals) = pass(env, variant, &staging, &kernel, &batches, shape, true)?;
        let again_verdict = elementwise(&again, &expect, |i| tolerance[i]);
        if verdict.passed() && !again_verdict.passed() {
            verdict = again_verdict;
        }
        let mut outcome = Outcome::new(name, verdict, Some(ms)).metric("instrumented_ms", instrumented_ms);
        if !intervals.is_empty() {
            outcome = outcome
                .metric("copy_ms", total_ms(&intervals, Kind::Copy))
                .metric("compute_ms", total_ms(&intervals, Kind::Kernel));
        }
        if let Some(hidden) = hidden_copy_fraction(&intervals) {
            outcome = outcome.metric("hidden_copy_fraction", hidden);
        }
        outcome.intervals = intervals;
        outcomes.push(
            outcome
                .with_output(super::Output::F32(got))
                .metric("events", collisions.events.len() as f64)
                .metric("batches", batches.len() as f64)
                .metric("ms_per_batch", ms / batches.len().max(1) as f64)
                .metric("jets_per_s", total_jets as f64 / (ms * 1e-3)),
        );
    }
    for &threads in &env.tuning.pull_framework {
        outcomes.push(framework(ctx, &staged, &kernel, &batches, shape, threads, &expect, &tolerance)?);
    }
    for outcome in &mut outcomes {
        outcome.metrics.insert("block".into(), f64::from(block(&kernel)));
    }
    Ok(outcomes)
}

/// Concurrent tasks per host thread in the framework-style variant.
const TASKS_PER_THREAD: usize = 2;

/// The framework-style variant `framework-N`: as a framework's thread pool
/// runs it, `threads` host threads each drive [`TASKS_PER_THREAD`] tasks.
/// A task takes its share of the batches one at a time: it allocates that
/// batch's buffers (device memory on its stream with `Stream::alloc`,
/// pinned output with `Context::alloc_pinned`, both through the caching
/// allocator where the context caches), enqueues the batch, awaits
/// `Stream::synchronize_async` (its thread runs the other task meanwhile)
/// and copies the result out; the buffers go back to the cache. Each task
/// keeps an untimed stream and scan scratch, as a framework keeps a stream
/// per concurrent event. Its time is host wall-clock time from the first
/// enqueue to the last result (device events cannot bracket work spread
/// over threads that allocate as they go), so it includes what the other
/// variants' device times leave out: allocation, waking and the host copies.
#[allow(clippy::too_many_arguments)]
fn framework(
    ctx: &Context,
    staged: &Staged,
    kernel: &Kernel,
    batches: &[EventRange],
    shape: Shape,
    threads: usize,
    expect: &[f64],
    tolerance: &[f64],
) -> Result<Outcome, Failure> {
    let workers = threads * TASKS_PER_THREAD;
    let mut slots: Vec<(Stream, ScanPlan)> = (0..workers)
        .map(|_| Ok::<_, hetero::Error>((ctx.untimed_stream()?, ScanPlan::new(ctx, THREADS, shape.max_jets)?)))
        .collect::<Result<_, _>>()?;
    let got = std::sync::Mutex::new(vec![0.0f32; 2 * shape.total_jets]);
    let before = ctx.allocator_stats();
    let start = std::time::Instant::now();
    std::thread::scope(|scope| {
        let pool: Vec<_> = slots
            .chunks_mut(TASKS_PER_THREAD)
            .enumerate()
            .map(|(t, chunk)| {
                let got = &got;
                scope.spawn(move || {
                    let tasks = chunk.iter_mut().enumerate().map(|(j, slot)| async move {
                        let task = t * TASKS_PER_THREAD + j;
                        for &batch in batches.iter().skip(task).step_by(workers) {
                            framework_batch(ctx, slot, staged, kernel, batch, got).await?;
                        }
                        Ok::<(), hetero::Error>(())
                    });
                    futures::executor::block_on(futures::future::try_join_all(tasks)).map(drop)
                })
            })
            .collect();
        pool.into_iter().try_for_each(|w| match w.join() {
            Ok(result) => result.map_err(Failure::from),
            Err(_) => Err(Failure::Internal("a pull thread panicked".into())),
        })
    })?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let got = got.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    let after = ctx.allocator_stats();
    let (requests, hits) = (
        after.device.requests + after.pinned.requests - before.device.requests - before.pinned.requests,
        after.device.hits + after.pinned.hits - before.device.hits - before.pinned.hits,
    );
    let verdict = elementwise(&got, expect, |i| tolerance[i]);
    Ok(Outcome::new(format!("framework-{threads}"), verdict, Some(ms))
        .metric("host_wall_clock", 1.0)
        .metric("allocations", requests as f64)
        .metric("cache_hit_fraction", if requests == 0 { 0.0 } else { hits as f64 / requests as f64 })
        .with_output(super::Output::F32(got))
        .metric("batches", batches.len() as f64)
        .metric("ms_per_batch", ms / batches.len().max(1) as f64)
        .metric("jets_per_s", shape.total_jets as f64 / (ms * 1e-3)))
}

/// One batch of the framework-style variant on a task's stream.
async fn framework_batch(
    ctx: &Context,
    (s, scan): &mut (Stream, ScanPlan),
    staged: &Staged,
    kernel: &Kernel,
    e: EventRange,
    got: &std::sync::Mutex<Vec<f32>>,
) -> Result<(), hetero::Error> {
    // At least one element: a batch without constituents still passes buffers.
    let (nj, nc) = (e.jets.max(1), e.constituents.max(1));
    let mut counts = s.alloc::<u32>(nj)?;
    let mut offsets = s.alloc::<u32>(nj)?;
    let mut jet = [s.alloc::<f32>(nj)?, s.alloc::<f32>(nj)?, s.alloc::<f32>(nj)?];
    let mut constituent = [s.alloc::<f32>(nc)?, s.alloc::<f32>(nc)?, s.alloc::<f32>(nc)?];
    let mut pull = s.alloc::<f32>(2 * nj)?;
    let mut out = ctx.alloc_pinned::<f32>(2 * e.jets)?;
    stage_in(s, staged, &mut counts, &mut jet, &mut constituent, e)?;
    scan.enqueue(s, &counts.slice(..e.jets)?, &mut offsets.slice_mut(..e.jets)?)?;
    launch_pull_jets(s, kernel, &constituent, &jet, &offsets, &mut pull, e)?;
    s.copy(pull.slice(..2 * e.jets)?, &mut out)?;
    s.synchronize_async().await?;
    let range = 2 * e.first_jet..2 * (e.first_jet + e.jets);
    got.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[range].copy_from_slice(out.host_slice()?);
    Ok(())
}

/// How a pass spreads the batches: over `lanes` streams (round-robin),
/// enqueued from this thread or, `threaded`, from one host thread per lane.
#[derive(Debug, Clone, Copy)]
struct Variant {
    lanes: usize,
    threaded: bool,
    pageable: bool,
}

/// Buffer sizes of a lane.
#[derive(Debug, Clone, Copy)]
struct Shape {
    max_jets: usize,
    max_constituents: usize,
    total_jets: usize,
}

/// One run of every batch round-robin over `variant.lanes` fresh lanes:
/// device ms from a start event that every lane waits on to a stop event
/// after all of them (on a timed stream of their own, so the lanes
/// themselves need no timing), the pull vectors, and with `instrumented`
/// the per-operation intervals (the lanes are then timed streams). A
/// threaded variant enqueues each lane's batches from a host thread of its
/// own, with a timeline of its own; their origins are recorded one after
/// another on the joining stream before any lane work, so the intervals of
/// all threads share a time base to within those records.
fn pass(
    env: &Env<'_>,
    variant: Variant,
    staging: &Staging<'_>,
    kernel: &Kernel,
    batches: &[EventRange],
    shape: Shape,
    instrumented: bool,
) -> Result<(f64, Vec<f32>, Vec<crate::timeline::Interval>), Failure> {
    let Shape { max_jets, max_constituents, total_jets } = shape;
    let (ctx, clock) = (env.ctx, env.clock);
    // Intervals need the device's timer.
    let instrumented = instrumented && clock.unavailable().is_none();
    let mut lanes: Vec<Lane> = (0..variant.lanes)
        .map(|_| {
            let stream = if instrumented { ctx.stream()? } else { ctx.untimed_stream()? };
            Lane::new(ctx, stream, max_jets, max_constituents, total_jets)
        })
        .collect::<Result<_, _>>()?;
    let joined = ctx.stream()?;
    let start = ctx.event()?;
    // On the host's clock: from idle streams (nothing is enqueued yet).
    let since = Instant::now();
    joined.record(&start)?;
    for lane in &lanes {
        lane.stream.wait(&start)?;
    }
    let count = lanes.len();
    let timeline = |streams: &[&Stream]| {
        if instrumented { Timeline::new(ctx, &joined, streams) } else { Timeline::off(ctx) }
    };
    let timelines: Vec<Timeline<'_>> = if variant.threaded {
        let tracks: Vec<String> = (0..count).map(|i| format!("thread {i}")).collect();
        let mut timelines: Vec<Timeline<'_>> =
            lanes.iter().map(|l| timeline(&[&l.stream])).collect::<Result<_, _>>()?;
        std::thread::scope(|scope| {
            let workers: Vec<_> = lanes
                .iter_mut()
                .zip(timelines.iter_mut())
                .zip(&tracks)
                .enumerate()
                .map(|(t, ((lane, timeline), track))| {
                    scope.spawn(move || -> Result<(), hetero::Error> {
                        for &batch in batches.iter().skip(t).step_by(count) {
                            lane.enqueue(staging, kernel, batch, timeline, track)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            workers.into_iter().try_for_each(|w| match w.join() {
                Ok(result) => result.map_err(Failure::from),
                Err(_) => Err(Failure::Internal("a pull thread panicked".into())),
            })
        })?;
        timelines
    } else {
        let streams: Vec<&Stream> = lanes.iter().map(|l| &l.stream).collect();
        let mut timeline = timeline(&streams)?;
        let tracks: Vec<String> = (0..count).map(|i| format!("stream {i}")).collect();
        for (i, &batch) in batches.iter().enumerate() {
            lanes[i % count].enqueue(staging, kernel, batch, &mut timeline, &tracks[i % count])?;
        }
        vec![timeline]
    };
    let ends: Vec<Event> = (0..count).map(|_| ctx.event()).collect::<Result<_, _>>()?;
    for (lane, end) in lanes.iter().zip(&ends) {
        lane.stream.record(end)?;
        joined.wait(end)?;
    }
    let stop = ctx.event()?;
    joined.record(&stop)?;
    stop.synchronize()?;
    let ms = clock.elapsed_ms(&start, &stop, since)?;

    let mut got = vec![0.0f32; 2 * total_jets];
    for (i, e) in batches.iter().enumerate() {
        let range = 2 * e.first_jet..2 * (e.first_jet + e.jets);
        got[range.clone()].copy_from_slice(&lanes[i % count].out.host_slice()?[range]);
    }
    let mut intervals = Vec::new();
    for timeline in timelines {
        intervals.extend(timeline.finish()?);
    }
    Ok((ms, got, intervals))
}

fn dump_inputs(env: &Env<'_>, c: &Collisions) -> Result<(), Failure> {
    let interleave = |arrays: &[Vec<f32>; 3]| -> Vec<f32> {
        (0..arrays[0].len()).flat_map(|i| [arrays[0][i], arrays[1][i], arrays[2][i]]).collect()
    };
    let jets = c.counts.len() as u64;
    env.dump(Workload::Pull, "constituents", &[c.constituent[0].len() as u64, 3], &interleave(&c.constituent))?;
    env.dump(Workload::Pull, "jets", &[jets, 3], &interleave(&c.jet))?;
    env.dump(Workload::Pull, "counts", &[jets], &c.counts)?;
    let events: Vec<u32> = c.events.iter().flat_map(|e| [e.first_jet as u32, e.jets as u32]).collect();
    env.dump(Workload::Pull, "events", &[c.events.len() as u64, 2], &events)
}
