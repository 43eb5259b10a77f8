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

use hetero::safe::OnDevice;
use hetero::{
    BlockRequest, Context, Device, DeviceBuffer, Event, Graph, GraphArg, GraphBuffer, Kernel, LaunchConfig, Node,
    PinnedBuffer, Stream,
};
use rand::Rng;

use super::scan::{ScanNodes, ScanPlan};
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
    /// Packed in pinned memory: two asynchronous copies per batch.
    Pinned(&'a Staged),
    /// The generated vectors themselves: pageable memory, blocking copies.
    Pageable(&'a Collisions),
}

/// Floats each packed array starts on a multiple of: 1 KiB, so a kernel
/// argument at the array's start meets every device's sub-buffer alignment
/// (OpenCL's `CL_DEVICE_MEM_BASE_ADDR_ALIGN`, 4096 bits on NVIDIA).
pub const PACK_ALIGN: usize = 256;

/// Where a batch's six float arrays lie in its packed region (in floats
/// from the region's start): jet pT, eta, phi, then constituent pT, eta,
/// phi, each starting on [`PACK_ALIGN`]; and the region's length.
pub fn layout(e: &EventRange) -> ([usize; 6], usize) {
    let (j, c) = (e.jets.next_multiple_of(PACK_ALIGN), e.constituents.next_multiple_of(PACK_ALIGN));
    ([0, j, 2 * j, 3 * j, 3 * j + c, 3 * j + 2 * c], 3 * j + 3 * c)
}

/// Every batch's packed region one after another, and where each starts.
pub fn pack(c: &Collisions, batches: &[EventRange]) -> (Vec<f32>, Vec<usize>) {
    let total = batches.iter().map(|e| layout(e).1).sum();
    let (mut packed, mut starts) = (vec![0.0f32; total], Vec::with_capacity(batches.len()));
    let mut base = 0;
    for e in batches {
        let (at, len) = layout(e);
        let jets = e.first_jet..e.first_jet + e.jets;
        let consts = e.first_constituent..e.first_constituent + e.constituents;
        for k in 0..3 {
            packed[base + at[k]..][..e.jets].copy_from_slice(&c.jet[k][jets.clone()]);
            packed[base + at[3 + k]..][..e.constituents].copy_from_slice(&c.constituent[k][consts.clone()]);
        }
        starts.push(base);
        base += len;
    }
    (packed, starts)
}

/// Pinned staging of every batch's inputs: the per-jet counts as they are
/// (a batch's are consecutive) and the batch's floats packed
/// ([`pack`]), so that a batch arrives in two copies.
struct Staged {
    counts: PinnedBuffer<u32>,
    packed: PinnedBuffer<f32>,
    /// Where each batch's packed region starts.
    starts: Vec<usize>,
}

/// Device buffers of one lane, for the largest batch, and its pinned output.
struct Buffers {
    counts: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u32>,
    packed: DeviceBuffer<f32>,
    pull: DeviceBuffer<f32>,
    scan: ScanPlan,
    out: PinnedBuffer<f32>,
}

/// One stream with its buffers.
struct Lane {
    stream: Stream,
    bufs: Buffers,
}

impl Lane {
    fn new(ctx: &Context, stream: Stream, shape: Shape) -> Result<Self, hetero::Error> {
        Ok(Self {
            stream,
            bufs: Buffers {
                counts: ctx.alloc(shape.max_jets)?,
                offsets: ctx.alloc(shape.max_jets)?,
                packed: ctx.alloc(shape.max_packed.max(1))?,
                pull: ctx.alloc(2 * shape.max_jets)?,
                scan: ScanPlan::new(ctx, THREADS, shape.max_jets)?,
                out: ctx.alloc_pinned(2 * shape.total_jets)?,
            },
        })
    }

    /// Enqueues batch `index` (`e`): stage in, scan counts, pull kernel,
    /// copy out, each as a span of `timeline` on track `track`.
    fn enqueue(
        &mut self,
        staged: &Staging<'_>,
        kernel: &Kernel,
        (index, e): (usize, EventRange),
        timeline: &mut Timeline<'_>,
        track: &str,
    ) -> Result<(), hetero::Error> {
        let s = &self.stream;
        let b = &mut self.bufs;
        let (at, len) = layout(&e);
        let (counts, packed) = (&mut b.counts, &mut b.packed);
        timeline.span(s, track, "stage in", Kind::Copy, || match staged {
            Staging::Pinned(staged) => {
                let jets = e.first_jet..e.first_jet + e.jets;
                let from = staged.starts[index];
                s.copy(staged.counts.slice(jets)?, counts.slice_mut(..e.jets)?)?;
                s.copy(staged.packed.slice(from..from + len)?, packed.slice_mut(..len)?)
            }
            // Ordinary memory: each copy returns only when it is done.
            Staging::Pageable(c) => {
                let jets = e.first_jet..e.first_jet + e.jets;
                let consts = e.first_constituent..e.first_constituent + e.constituents;
                s.copy_from_host(&c.counts[jets.clone()], counts.slice_mut(..e.jets)?)?;
                for k in 0..3 {
                    s.copy_from_host(&c.jet[k][jets.clone()], packed.slice_mut(at[k]..at[k] + e.jets)?)?;
                    let to = at[3 + k]..at[3 + k] + e.constituents;
                    s.copy_from_host(&c.constituent[k][consts.clone()], packed.slice_mut(to)?)?;
                }
                Ok(())
            }
        })?;
        let (scan, offsets, pull) = (&mut b.scan, &mut b.offsets, &mut b.pull);
        let (counts, packed) = (&b.counts, &b.packed);
        timeline.span(s, track, "scan + pull_jets", Kind::Kernel, || {
            scan.enqueue(s, &counts.slice(..e.jets)?, &mut offsets.slice_mut(..e.jets)?)?;
            launch_pull_jets(s, kernel, packed, offsets, pull, e)
        })?;
        let (pull, out) = (&b.pull, &mut b.out);
        timeline.span(s, track, "copy out", Kind::Copy, || {
            s.copy(pull.slice(..2 * e.jets)?, out.slice_mut(2 * e.first_jet..2 * (e.first_jet + e.jets))?)
        })
    }
}

/// `pull_jets`'s launch shape for batch `e`: one block per jet.
fn pull_config(kernel: &Kernel, e: &EventRange) -> LaunchConfig {
    let threads = block(kernel);
    LaunchConfig::linear(e.jets as u32, threads, threads as usize * 4)
}

/// Enqueues `pull_jets` for batch `e`, whose packed floats are at the
/// start of `packed` and whose jet offsets were scanned.
fn launch_pull_jets(
    s: &Stream,
    kernel: &Kernel,
    packed: &DeviceBuffer<f32>,
    offsets: &DeviceBuffer<u32>,
    pull: &mut DeviceBuffer<f32>,
    e: EventRange,
) -> Result<(), hetero::Error> {
    let (at, _) = layout(&e);
    let (packed, offsets, out) = (packed.slice(..)?, offsets.slice(..e.jets)?, pull.slice_mut(..2 * e.jets)?);
    let mut args = vec![
        (&packed).into(),
        (&offsets).into(),
        (&out).into(),
        (e.jets as u32).into(),
        (e.constituents as u32).into(),
    ];
    args.extend(at.map(|a| (a as u32).into()));
    // SAFETY: pull_jets_packed reads constituents [0, n_constituents) and
    // jets [0, n_jets) of each array at its offset into `packed` (the
    // layout puts them within it), offsets [0, n_jets), and writes pull
    // [0, 2 n_jets).
    unsafe { s.launch(kernel, pull_config(kernel, &e), &args) }
}

/// A lane's graph: copies in, scan, `pull_jets` and copy out recorded
/// once (or only the copies, for the copy floor), set for each batch.
struct LaneGraph<'b> {
    graph: Graph<'b>,
    counts_in: Node,
    packed_in: Node,
    out: Node,
    /// The scan and the pull launch; `None` when only copies were recorded.
    compute: Option<(ScanNodes, Node)>,
    staged_counts: GraphBuffer<u32, hetero::safe::Pinned>,
    staged_packed: GraphBuffer<f32, hetero::safe::Pinned>,
    counts: GraphBuffer<u32, OnDevice>,
    packed: GraphBuffer<f32, OnDevice>,
    pull: GraphBuffer<f32, OnDevice>,
    out_buf: GraphBuffer<f32, hetero::safe::Pinned>,
    /// `pull_jets`'s threads per block.
    threads: u32,
}

impl<'b> LaneGraph<'b> {
    /// Records the lane's work for the first batch, `first`.
    fn record(
        ctx: &Context,
        bufs: &'b mut Buffers,
        staged: &'b Staged,
        kernel: &'b Kernel,
        first: EventRange,
        copies_only: bool,
    ) -> Result<Self, hetero::Error> {
        let mut rec = ctx.recorder();
        let Buffers { counts, offsets, packed, pull, scan, out } = bufs;
        let (staged_counts, staged_packed) = (rec.bind(&staged.counts)?, rec.bind(&staged.packed)?);
        let (gcounts, goffsets, gpacked) = (rec.bind_mut(counts)?, rec.bind_mut(offsets)?, rec.bind_mut(packed)?);
        let (gpull, gout) = (rec.bind_mut(pull)?, rec.bind_mut(out)?);
        let s = rec.stream();
        let (at, len) = layout(&first);
        let counts_in = rec.copy(s, staged_counts.slice(..first.jets)?, gcounts.slice_mut(..first.jets)?)?;
        let packed_in = rec.copy(s, staged_packed.slice(..len)?, gpacked.slice_mut(..len)?)?;
        let compute = if copies_only {
            None
        } else {
            let scan = scan.record(&mut rec, s, gcounts, goffsets)?;
            let mut args = vec![
                gpacked.read().into(),
                goffsets.read().into(),
                gpull.write().into(),
                (first.jets as u32).into(),
                (first.constituents as u32).into(),
            ];
            args.extend(at.map(|a| GraphArg::from(a as u32)));
            // SAFETY: as in `launch_pull_jets`, for every batch `set`
            // makes current.
            let node = unsafe { rec.launch(s, kernel, pull_config(kernel, &first), args) }?;
            Some((scan, node))
        };
        let out = rec.copy(s, gpull.slice(..2 * first.jets)?, gout.slice_mut(..2 * first.jets)?)?;
        Ok(Self {
            graph: rec.finish()?,
            counts_in,
            packed_in,
            out,
            compute,
            staged_counts,
            staged_packed,
            counts: gcounts,
            packed: gpacked,
            pull: gpull,
            out_buf: gout,
            threads: block(kernel),
        })
    }

    /// Sets the copies, lengths and shapes of batch `e`, whose packed
    /// region starts at `from`, and replays the graph on `stream`.
    fn replay(&mut self, stream: &Stream, e: EventRange, from: usize) -> Result<(), hetero::Error> {
        let g = &mut self.graph;
        let (at, len) = layout(&e);
        let jets = e.first_jet..e.first_jet + e.jets;
        g.set_copy(self.counts_in, self.staged_counts.slice(jets)?, self.counts.slice_mut(..e.jets)?)?;
        g.set_copy(self.packed_in, self.staged_packed.slice(from..from + len)?, self.packed.slice_mut(..len)?)?;
        if let Some((scan, node)) = &self.compute {
            scan.set_len(g, e.jets)?;
            // SAFETY: as in `launch_pull_jets`: each array starts where
            // the batch's layout puts it, and the lengths are the batch's.
            unsafe {
                g.set_arg(*node, 3, e.jets as u32)?;
                g.set_arg(*node, 4, e.constituents as u32)?;
                for (k, a) in at.iter().enumerate() {
                    g.set_arg(*node, 5 + k, *a as u32)?;
                }
            }
            let threads = self.threads;
            g.set_config(*node, LaunchConfig::linear(e.jets as u32, threads, threads as usize * 4))?;
        }
        let out = 2 * e.first_jet..2 * (e.first_jet + e.jets);
        g.set_copy(self.out, self.pull.slice(..2 * e.jets)?, self.out_buf.slice_mut(out)?)?;
        g.replay(stream)
    }
}

/// Runs every variant on the same events.
pub fn run(env: &Env<'_>) -> Result<Vec<Outcome>, Failure> {
    let mut rng = inputs::rng(env.seed, "pull");
    let collisions = generate(&mut rng, events(env.size));
    let total_jets = collisions.counts.len();
    let ctx = env.ctx;
    let kernel = env.build(hetero::kernels::PULL)?.kernel("pull_jets_packed")?;
    // A deterministic build sums a jet pairwise (pull.kern): the
    // sequential sum's tolerance (one thread) is the widest any order needs.
    let threads = if env.tuning.deterministic { 1 } else { block(&kernel) };
    let (expect, tolerance) = reference(&collisions, threads);
    dump_inputs(env, &collisions)?;
    env.dump(Workload::Pull, "pull_ref", &[total_jets as u64, 2], &expect)?;

    let batches = batches(&collisions.events);
    let (packed, starts) = pack(&collisions, &batches);
    let staged =
        Staged { counts: ctx.pinned_from_slice(&collisions.counts)?, packed: ctx.pinned_from_slice(&packed)?, starts };
    let max_jets = batches.iter().map(|e| e.jets).max().unwrap_or(1);
    let max_packed = batches.iter().map(|e| layout(e).1).max().unwrap_or(0);
    // Bytes one pass stages in: counts and packed floats.
    let staged_bytes = 4 * (total_jets + packed.len());
    drop(packed);

    let shape = Shape { max_jets, max_packed, total_jets };

    // Untimed warm-up: runtimes may finish compiling a kernel at its first launch.
    if let Some(&first) = batches.first() {
        let mut lane = Lane::new(ctx, ctx.untimed_stream()?, shape)?;
        lane.enqueue(&Staging::Pinned(&staged), &kernel, (0, first), &mut Timeline::off(ctx)?, "warm-up")?;
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
        let stage_in_ms: f64 =
            intervals.iter().filter(|i| i.name == "stage in").map(|i| (i.end_ms - i.start_ms).max(0.0)).sum();
        if !variant.pageable && stage_in_ms > 0.0 {
            outcome = outcome.metric("stage_in_gbps", staged_bytes as f64 / (stage_in_ms * 1e6));
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
    for &lanes in &env.tuning.pull_graphs {
        // The copy floor: the same graphs with their copies only.
        let (floor_ms, _) = graph_pass(env, lanes, &staged, &kernel, &batches, shape, true)?;
        let (ms, got) = graph_pass(env, lanes, &staged, &kernel, &batches, shape, false)?;
        let name = format!("graph-{lanes}");
        env.dump(Workload::Pull, &format!("{name}_pull"), &[total_jets as u64, 2], &got)?;
        let verdict = elementwise(&got, &expect, |i| tolerance[i]);
        outcomes.push(
            Outcome::new(name, verdict, Some(ms))
                .with_output(super::Output::F32(got))
                .metric("copy_floor_ms", floor_ms)
                .metric("vs_copy_floor", ms / floor_ms.max(f64::MIN_POSITIVE))
                .metric("native_graphs", f64::from(u8::from(ctx.device().native_graphs())))
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
    outcomes.push(library(env, &collisions)?);
    Ok(outcomes)
}

/// The variant `library`: every jet at once, its sums through
/// `hetero::algorithms` as a downstream crate would write them without a
/// kernel of its own for them: an exclusive scan of the counts (with a
/// zero after them) gives the jets' `n + 1` offsets, `pull_terms` writes
/// each constituent's two summands, and two segmented sums by those
/// offsets give the pull vectors. Device time from after the uploads to
/// the end of the sums. The library sums a jet in an order of its own, so
/// the tolerance is the sequential sum's, the widest any order needs.
fn library(env: &Env<'_>, c: &Collisions) -> Result<Outcome, Failure> {
    use hetero::algorithms::{ReduceOp, ScanKind};

    let (ctx, clock) = (env.ctx, env.clock);
    let stream = ctx.stream()?;
    let algorithms = super::algorithms(ctx, env.tuning);
    let kernel = env.build(hetero::kernels::PULL)?.kernel("pull_terms")?;
    let (jets, n) = (c.counts.len(), c.constituent[0].len());
    let mut counts = c.counts.clone();
    counts.push(0);
    let counts = stream.upload(&counts)?;
    let jet: Vec<DeviceBuffer<f32>> = c.jet.iter().map(|v| stream.upload(v)).collect::<Result<_, _>>()?;
    let constituent: Vec<DeviceBuffer<f32>> =
        c.constituent.iter().map(|v| stream.upload(v)).collect::<Result<_, _>>()?;
    let mut offsets = ctx.alloc::<u32>(jets + 1)?;
    let (mut tx, mut ty) = (ctx.alloc::<f32>(n)?, ctx.alloc::<f32>(n)?);
    let (mut px, mut py) = (ctx.alloc::<f32>(jets)?, ctx.alloc::<f32>(jets)?);
    let threads = kernel.block_size(BlockRequest::new(THREADS));
    let blocks = (jets as u32).clamp(1, 1 << 14);
    let mut sums = || -> Result<(), hetero::Error> {
        algorithms.scan(&stream, &counts, &mut offsets, ScanKind::Exclusive)?;
        {
            let (tx, ty) = (tx.slice_mut(..)?, ty.slice_mut(..)?);
            // SAFETY: pull_terms reads jets[0..n_jets) of the jet arrays and
            // offsets[0..=n_jets), and constituents (and writes tx, ty) in
            // offsets[j]..offsets[j + 1], all within 0..n: the offsets are
            // the counts' exclusive sums, which end at n.
            unsafe {
                stream.launch(
                    &kernel,
                    LaunchConfig::linear(blocks, threads, 0),
                    &[
                        (&constituent[0]).into(),
                        (&constituent[1]).into(),
                        (&constituent[2]).into(),
                        (&offsets).into(),
                        (&jet[0]).into(),
                        (&jet[1]).into(),
                        (&jet[2]).into(),
                        (&tx).into(),
                        (&ty).into(),
                        (jets as u32).into(),
                    ],
                )?;
            }
        }
        for (terms, out) in [(&tx, &mut px), (&ty, &mut py)] {
            // SAFETY: the offsets are n_jets + 1 non-decreasing sums of the
            // counts, the last n, the terms' length.
            unsafe { algorithms.segmented_reduce_on_device(&stream, terms, &offsets, ReduceOp::Sum, out)? };
        }
        Ok(())
    };
    // Untimed first run: the library builds its kernels on first use.
    sums()?;
    let (start, stop) = (ctx.event()?, ctx.event()?);
    stream.synchronize()?;
    let since = Instant::now();
    stream.record(&start)?;
    sums()?;
    stream.record(&stop)?;
    stop.synchronize()?;
    let ms = clock.elapsed_ms(&start, &stop, since)?;
    let (x, y) = (stream.download(&px)?, stream.download(&py)?);
    let got: Vec<f32> = x.iter().zip(&y).flat_map(|(x, y)| [*x, *y]).collect();
    env.dump(Workload::Pull, "library_pull", &[jets as u64, 2], &got)?;
    let (expect, tolerance) = reference(c, 1);
    let verdict = elementwise(&got, &expect, |i| tolerance[i]);
    Ok(Outcome::new("library", verdict, Some(ms))
        .with_output(super::Output::F32(got))
        .metric("events", c.events.len() as f64)
        .metric("jets_per_s", jets as f64 / (ms * 1e-3)))
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
                        for (index, &batch) in batches.iter().enumerate().skip(task).step_by(workers) {
                            framework_batch(ctx, slot, staged, kernel, (index, batch), got).await?;
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
    (index, e): (usize, EventRange),
    got: &std::sync::Mutex<Vec<f32>>,
) -> Result<(), hetero::Error> {
    let (_, len) = layout(&e);
    let mut counts = s.alloc::<u32>(e.jets)?;
    let mut offsets = s.alloc::<u32>(e.jets)?;
    // At least one element: a batch without constituents still passes buffers.
    let mut packed = s.alloc::<f32>(len.max(1))?;
    let mut pull = s.alloc::<f32>(2 * e.jets)?;
    let mut out = ctx.alloc_pinned::<f32>(2 * e.jets)?;
    let from = staged.starts[index];
    s.copy(staged.counts.slice(e.first_jet..e.first_jet + e.jets)?, &mut counts)?;
    s.copy(staged.packed.slice(from..from + len)?, packed.slice_mut(..len)?)?;
    scan.enqueue(s, &counts.slice(..)?, &mut offsets.slice_mut(..)?)?;
    launch_pull_jets(s, kernel, &packed, &offsets, &mut pull, e)?;
    s.copy(&pull, &mut out)?;
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
    /// Floats of the largest batch's packed region.
    max_packed: usize,
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
    let total_jets = shape.total_jets;
    let (ctx, clock) = (env.ctx, env.clock);
    // Intervals need the device's timer.
    let instrumented = instrumented && clock.unavailable().is_none();
    let mut lanes: Vec<Lane> = (0..variant.lanes)
        .map(|_| {
            let stream = if instrumented { ctx.stream()? } else { ctx.untimed_stream()? };
            Lane::new(ctx, stream, shape)
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
                        for (index, &batch) in batches.iter().enumerate().skip(t).step_by(count) {
                            lane.enqueue(staging, kernel, (index, batch), timeline, track)?;
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
            lanes[i % count].enqueue(staging, kernel, (i, batch), &mut timeline, &tracks[i % count])?;
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
        got[range.clone()].copy_from_slice(&lanes[i % count].bufs.out.host_slice()?[range]);
    }
    let mut intervals = Vec::new();
    for timeline in timelines {
        intervals.extend(timeline.finish()?);
    }
    Ok((ms, got, intervals))
}

/// One run of every batch round-robin over `count` lanes, each replaying
/// its [`LaneGraph`] once per batch: device ms between a start event every
/// lane waits on and a stop event after all of them (as [`pass`]), and the
/// pull vectors. With `copies_only` the graphs hold only the copies (the
/// copy floor; the vectors are then meaningless). Recording and building
/// the graphs come before the start event.
fn graph_pass(
    env: &Env<'_>,
    count: usize,
    staged: &Staged,
    kernel: &Kernel,
    batches: &[EventRange],
    shape: Shape,
    copies_only: bool,
) -> Result<(f64, Vec<f32>), Failure> {
    let (ctx, clock) = (env.ctx, env.clock);
    let mut lanes: Vec<Lane> =
        (0..count).map(|_| Lane::new(ctx, ctx.untimed_stream()?, shape)).collect::<Result<_, hetero::Error>>()?;
    let Some(&first) = batches.first() else { return Ok((0.0, Vec::new())) };
    let joined = ctx.stream()?;
    let (start, stop) = (ctx.event()?, ctx.event()?);
    {
        let (streams, mut graphs): (Vec<&Stream>, Vec<LaneGraph<'_>>) = lanes
            .iter_mut()
            .map(|lane| Ok((&lane.stream, LaneGraph::record(ctx, &mut lane.bufs, staged, kernel, first, copies_only)?)))
            .collect::<Result<Vec<_>, hetero::Error>>()?
            .into_iter()
            .unzip();
        let since = Instant::now();
        joined.record(&start)?;
        for stream in &streams {
            stream.wait(&start)?;
        }
        for (i, &batch) in batches.iter().enumerate() {
            graphs[i % count].replay(streams[i % count], batch, staged.starts[i])?;
        }
        for stream in &streams {
            let end = ctx.event()?;
            stream.record(&end)?;
            joined.wait(&end)?;
        }
        joined.record(&stop)?;
        stop.synchronize()?;
        let ms = clock.elapsed_ms(&start, &stop, since)?;
        drop(graphs);
        let mut got = vec![0.0f32; 2 * shape.total_jets];
        if !copies_only {
            for (i, e) in batches.iter().enumerate() {
                let range = 2 * e.first_jet..2 * (e.first_jet + e.jets);
                got[range.clone()].copy_from_slice(&lanes[i % count].bufs.out.host_slice()?[range]);
            }
        }
        Ok((ms, got))
    }
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
