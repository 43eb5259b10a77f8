//! wave split across devices: `split-sync` and `split-overlap`, run when
//! two or more devices of one backend are selected.
//!
//! The grid's rows are cut into one band per device ([`Band`]). Each device
//! holds its band and `2k` rows beyond each edge it shares with a
//! neighbour (halo rows), and exchanges halos once every `k` steps (a
//! *round*, [`halo_steps`]): the fourth-order stencil reads two rows on
//! each side, so after an exchange a device can compute `k` steps on its
//! own, the rows it computes shrinking by two at each shared edge per step
//! (`Band::computed`), the last step's being exactly its band. Rows it
//! computes beyond its band are computed by their owner too, with the same
//! arithmetic from the same values. After each round a device pulls from
//! each neighbour the neighbour's rows of its halo, of the round's last two
//! fields (the stencil reads two time levels), with peer copies
//! ([`hetero::Stream::copy_peer`]); the typed layer orders each copy after
//! the neighbour's kernels and the next steps after the copy, on the
//! devices. Each cell is computed with the same arithmetic from the same
//! values as on one device, so the snapshots must equal the single-device
//! `sync` run's bit for bit.
//!
//! Exchanging every `k` steps keeps the host's work per step near one
//! launch a device: per-step exchanges cost each device a peer copy and
//! its cross-device waits every step, more host time than a step of a
//! large grid takes on two devices.
//!
//! - `split-sync`: one stream per device; a round's halo copies follow its
//!   last step on that stream.
//! - `split-overlap`: in a round's last step each device first computes the
//!   rows its neighbours pull, then its halo streams (one per neighbour)
//!   pull the neighbours' rows while its compute stream computes the rest.
//!   Snapshots are overlapped too, as the single-device `event-sync` run
//!   does: the compute stream copies its rows into one of [`STAGING`]
//!   device buffers and a copy stream copies that to pinned memory (the
//!   devices' copies to the host share the host's links, so left on the
//!   compute streams they would take as long as on one device).
//!
//! Snapshots: each device copies its own rows to pinned memory of its own
//! (in `split-sync` on its compute stream), and the host gathers them. Reported: time (the
//! slowest device's), speed-up over the single-device `sync` run, steps a
//! round, the host's time enqueueing, halo exchange time (the slowest
//! device's summed halo copies, each timed from the moment both sides'
//! rows are ready) and the fraction of it hidden under compute (the mean
//! over devices, from each device's timeline).

use std::ops::Range;
use std::time::Instant;

use hetero::{Context, DeviceBuffer, Kernel, Stream};

use super::grid::{C2, FIELDS, Grid, STAGING, block_width};
use super::{Env, Failure, Outcome};
use crate::check::elementwise;
use crate::clock::Clock;
use crate::timeline::{Interval, Kind, Timeline, hidden_copy_fraction, total_ms};

/// Rows a band needs at least: two edge rows for each neighbour.
pub const MIN_BAND_ROWS: usize = 4;

/// Steps between halo exchanges at most ([`halo_steps`]).
pub const MAX_HALO_STEPS: usize = 8;

/// How a step's halo exchange is ordered against compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Halo copies follow the round on the compute stream.
    Sync,
    /// Edge rows first, halo copies on their own streams under the rest.
    Overlap,
}

impl Split {
    /// Both, in report order.
    pub const ALL: [Split; 2] = [Split::Sync, Split::Overlap];

    /// Report name.
    pub fn name(self) -> &'static str {
        match self {
            Split::Sync => "split-sync",
            Split::Overlap => "split-overlap",
        }
    }
}

/// One device's rows of the grid: it owns `[begin, end)` and holds
/// `[lo, hi)`, its rows and the halo rows beyond the edges it shares with a
/// neighbour (global rows; `lo == begin` at the grid's first row, `hi ==
/// end` at its last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Band {
    /// First row it owns.
    pub begin: usize,
    /// One past the last row it owns.
    pub end: usize,
    /// First row it holds.
    pub lo: usize,
    /// One past the last row it holds.
    pub hi: usize,
}

impl Band {
    /// Rows held.
    fn rows(&self) -> usize {
        self.hi - self.lo
    }

    /// Whether a neighbour holds rows above (before) the band.
    fn above(&self) -> bool {
        self.lo < self.begin
    }

    /// Whether a neighbour holds rows below (after) the band.
    fn below(&self) -> bool {
        self.end < self.hi
    }

    /// A global row range in the band's local rows.
    fn local(&self, rows: Range<usize>) -> Range<usize> {
        rows.start - self.lo..rows.end - self.lo
    }

    /// The rows it computes at step `j` (from 1) of a round: two fewer at
    /// each shared edge per step, from the held rows; its own rows at step
    /// `k` of a band with `2k` halo rows.
    fn computed(&self, j: usize) -> Range<usize> {
        let start = if self.above() { self.lo + 2 * j } else { self.lo };
        let end = if self.below() { self.hi - 2 * j } else { self.hi };
        start..end.max(start)
    }
}

/// Steps between halo exchanges for `ny` rows on `devices` devices: as
/// many as [`MAX_HALO_STEPS`], while every band owns at least four times
/// that (its neighbours' halos, `2k` rows each side, must be its own rows
/// and not overlap).
pub fn halo_steps(ny: usize, devices: usize) -> usize {
    (ny / devices.max(1) / 4).clamp(1, MAX_HALO_STEPS)
}

/// `ny` rows cut into `devices` bands of near-equal size, each holding
/// `2 * halo_steps` halo rows at each shared edge; `None` when a band would
/// own fewer than [`MIN_BAND_ROWS`] rows or fewer than `4 * halo_steps`.
pub fn bands(ny: usize, devices: usize, halo_steps: usize) -> Option<Vec<Band>> {
    if devices == 0 || halo_steps == 0 || ny / devices < MIN_BAND_ROWS.max(4 * halo_steps) {
        return None;
    }
    let halo = 2 * halo_steps;
    Some(
        (0..devices)
            .map(|d| {
                let (begin, end) = (d * ny / devices, (d + 1) * ny / devices);
                Band { begin, end, lo: begin.saturating_sub(halo), hi: (end + halo).min(ny) }
            })
            .collect(),
    )
}

/// One device's part of a split run.
struct Part<'a> {
    ctx: &'a Context,
    band: Band,
    kernel: Kernel,
    compute: Stream,
    /// Halo streams: the pulls from the neighbour above, and below (one
    /// each, so the two sides' copies are tracked apart and never wait for
    /// each other).
    halos: [Stream; 2],
    /// Recorded on `compute` after the rows its neighbours pull, each
    /// round: the halo copies start after it on both sides, so that their
    /// timeline spans hold the copies only.
    ready: hetero::Event,
    fields: Vec<DeviceBuffer<f32>>,
    /// `split-overlap`'s snapshot path: device buffers of the band's own
    /// rows, and the stream that copies them to `snapshots`.
    staging: Vec<DeviceBuffer<f32>>,
    copier: Stream,
    snapshots: hetero::PinnedBuffer<f32>,
}

/// Launches `wave_rows` on `compute` for global rows `rows` of `band`'s
/// `fields` at `step`.
#[allow(clippy::too_many_arguments)]
fn launch_rows(
    compute: &Stream,
    kernel: &Kernel,
    band: Band,
    fields: &mut [DeviceBuffer<f32>],
    g: Grid,
    rows: Range<usize>,
    step: usize,
    source: f32,
) -> Result<(), Failure> {
    if rows.is_empty() {
        return Ok(());
    }
    let local = band.local(rows.clone());
    let (sx, sy) = (g.nx / 2, g.ny / 2);
    // The source cell, in local rows, where this band computes it.
    let sy_local = if rows.contains(&sy) { (sy - band.lo) as u32 } else { u32::MAX };
    let width = block_width(kernel);
    let [prev, cur, next] = fields
        .get_disjoint_mut([step % FIELDS, (step + 1) % FIELDS, (step + 2) % FIELDS])
        .map_err(|e| Failure::Internal(format!("wave field rotation: {e}")))?;
    let (prev, cur, next) = (prev.slice(..)?, cur.slice(..)?, next.slice_mut(..)?);
    let config = super::grid::rows_launch(g.nx, local.len(), width);
    let args = [
        (&prev).into(),
        (&cur).into(),
        (&next).into(),
        (g.nx as u32).into(),
        (band.rows() as u32).into(),
        (local.start as u32).into(),
        (local.end as u32).into(),
        C2.into(),
        (sx as u32).into(),
        sy_local.into(),
        source.into(),
    ];
    // SAFETY: wave_rows reads rows [start - 2, end + 2) of u (rows outside
    // the held ones read as zero) and rows [start, end) of u_prev, writes
    // rows [start, end) of u_next, all within the band's rows() * nx cells
    // each field holds.
    unsafe { compute.launch(kernel, config, &args) }?;
    Ok(())
}

/// Pulls part `d`'s halo rows from its neighbours after the round whose
/// last step is `last`: of that step's field all halo rows, of the step
/// before's all but the two next to the band (which `d` computed itself
/// in that step). On `d`'s halo streams, or its compute stream when
/// `on_compute`; spans go to `timeline`.
fn pull_halos(
    parts: &mut [Part<'_>],
    d: usize,
    last: usize,
    on_compute: bool,
    timeline: &mut Timeline<'_>,
    nx: usize,
) -> Result<(), Failure> {
    let (before, rest) = parts.split_at_mut(d);
    let (me, after) = rest.split_first_mut().ok_or_else(|| Failure::Internal("no such band".into()))?;
    let band = me.band;
    let newest = (last + 2) % FIELDS;
    let older = (last + 1) % FIELDS;
    let mut pull = |from: &Part<'_>, side: usize, field: usize, rows: Range<usize>| -> Result<(), Failure> {
        if rows.is_empty() {
            return Ok(());
        }
        let (stream, lane) = if on_compute { (&me.compute, "compute") } else { (&me.halos[side], "halo") };
        if !on_compute {
            stream.wait(&me.ready)?;
        }
        stream.wait(&from.ready)?;
        let src = from.band.local(rows.clone());
        let dst = band.local(rows);
        let src = from.fields[field].slice(src.start * nx..src.end * nx)?;
        let dst = me.fields[field].slice_mut(dst.start * nx..dst.end * nx)?;
        timeline.span(stream, lane, "halo copy", Kind::Copy, || Ok::<_, Failure>(stream.copy_peer(src, dst)?))?;
        Ok(())
    };
    if let Some(up) = before.last() {
        pull(up, 0, newest, band.lo..band.begin)?;
        pull(up, 0, older, band.lo..band.begin.saturating_sub(2).max(band.lo))?;
    }
    if let Some(down) = after.first() {
        pull(down, 1, newest, band.end..band.hi)?;
        pull(down, 1, older, (band.end + 2).min(band.hi)..band.hi)?;
    }
    Ok(())
}

/// What a split run gives: the gathered snapshots, the slowest device's
/// time, and each device's intervals.
struct SplitRun {
    snapshots: Vec<f32>,
    total_ms: f64,
    /// Host time spent enqueueing the steps: near `total_ms` when the host,
    /// not the devices, is the limit.
    enqueue_ms: f64,
    intervals: Vec<Vec<Interval>>,
}

fn run_split(
    contexts: &[&Context],
    tuning: &super::Tuning,
    clock: &Clock,
    g: Grid,
    source: &[f32],
    split: Split,
    k: usize,
) -> Result<SplitRun, Failure> {
    let bands = bands(g.ny, contexts.len(), k).ok_or_else(|| Failure::Internal("too few rows per device".into()))?;
    let nx = g.nx;
    let snapshot_count = g.steps / g.snapshot_every;
    let mut parts = Vec::new();
    for (ctx, band) in contexts.iter().zip(&bands) {
        let kernel = super::build(ctx, tuning, hetero::kernels::WAVE)?.kernel("wave_rows")?;
        let (compute, halos) = (ctx.stream()?, [ctx.stream()?, ctx.stream()?]);
        let mut fields = Vec::new();
        for _ in 0..FIELDS {
            let mut field = ctx.alloc::<f32>(band.rows() * nx)?;
            compute.fill(&mut field, 0.0f32)?;
            fields.push(field);
        }
        let own = (band.end - band.begin) * nx;
        let snapshots = ctx.alloc_pinned::<f32>(snapshot_count * own)?;
        let staged = if split == Split::Overlap { STAGING } else { 0 };
        let staging = (0..staged).map(|_| ctx.alloc::<f32>(own)).collect::<Result<Vec<_>, _>>()?;
        let (ready, copier) = (ctx.event()?, ctx.stream()?);
        parts.push(Part { ctx, band: *band, kernel, compute, halos, ready, fields, staging, copier, snapshots });
    }
    for part in &parts {
        part.compute.synchronize()?;
    }
    let since = Instant::now();
    let mut marks = Vec::new();
    let mut timelines = Vec::new();
    for part in &parts {
        let (start, stop) = (part.ctx.event()?, part.ctx.event()?);
        part.compute.record(&start)?;
        for other in part.halos.iter().chain([&part.copier]) {
            other.wait(&start)?;
        }
        marks.push((start, stop));
        timelines.push(match clock {
            Clock::Device => Timeline::new(part.ctx, &part.compute, &[&part.halos[0], &part.halos[1]])?,
            Clock::Host(_) => Timeline::off(part.ctx)?,
        });
    }
    let enqueue = Instant::now();
    for (step, &src) in source.iter().enumerate() {
        // Step j (from 1) of its round; the round's last step exchanges
        // halos after it, unless it is the run's last. Only exchange steps
        // go on the timelines (two events each span, host time on every
        // step otherwise): they are what the halo copies overlap.
        let j = step % k + 1;
        let exchange = j == k && step + 1 < source.len();
        let edges_first = exchange && split == Split::Overlap;
        for (part, timeline) in parts.iter_mut().zip(&mut timelines) {
            let Part { compute, kernel, fields, band, ready, .. } = part;
            let rows = band.computed(j);
            if edges_first {
                for edge in edges(*band, k) {
                    timeline.span(compute, "compute", "wave_rows edge", Kind::Kernel, || {
                        launch_rows(compute, kernel, *band, fields, g, edge, step, src)
                    })?;
                }
            } else if exchange {
                timeline.span(compute, "compute", "wave_rows", Kind::Kernel, || {
                    launch_rows(compute, kernel, *band, fields, g, rows, step, src)
                })?;
            } else {
                launch_rows(compute, kernel, *band, fields, g, rows, step, src)?;
            }
            if exchange {
                compute.record(ready)?;
            }
        }
        if exchange {
            for (d, timeline) in timelines.iter_mut().enumerate() {
                pull_halos(&mut parts, d, step, split == Split::Sync, timeline, nx)?;
            }
        }
        if edges_first {
            for (part, timeline) in parts.iter_mut().zip(&mut timelines) {
                let Part { compute, kernel, fields, band, .. } = part;
                let rows = interior(*band, k);
                timeline.span(compute, "compute", "wave_rows interior", Kind::Kernel, || {
                    launch_rows(compute, kernel, *band, fields, g, rows, step, src)
                })?;
            }
        }
        if (step + 1) % g.snapshot_every == 0 {
            let slot = (step + 1) / g.snapshot_every - 1;
            let field = (step + 2) % FIELDS;
            for part in &mut parts {
                let b = part.band;
                let own = (b.end - b.begin) * nx;
                let local = b.local(b.begin..b.end);
                let src = part.fields[field].slice(local.start * nx..local.end * nx)?;
                let dst = part.snapshots.slice_mut(slot * own..(slot + 1) * own)?;
                if part.staging.is_empty() {
                    part.compute.copy(src, dst)?;
                } else {
                    // The typed layer orders the copy stream after this
                    // write, and the buffer's next write after that read.
                    let buffer = &mut part.staging[slot % STAGING];
                    part.compute.copy(src, &mut *buffer)?;
                    part.copier.copy(&*buffer, dst)?;
                }
            }
        }
    }
    let enqueue_ms = enqueue.elapsed().as_secs_f64() * 1e3;
    let mut total_ms = 0.0f64;
    let mut intervals = Vec::new();
    for ((part, (start, stop)), timeline) in parts.iter().zip(&marks).zip(timelines) {
        for other in part.halos.iter().chain([&part.copier]) {
            let drained = part.ctx.event()?;
            other.record(&drained)?;
            part.compute.wait(&drained)?;
        }
        part.compute.record(stop)?;
        stop.synchronize()?;
        total_ms = total_ms.max(clock.elapsed_ms(start, stop, since)?);
        intervals.push(timeline.finish()?);
    }
    let cells = g.nx * g.ny;
    let mut snapshots = vec![0.0f32; snapshot_count * cells];
    for part in &parts {
        let b = part.band;
        let own = (b.end - b.begin) * nx;
        let host = part.snapshots.host_slice()?;
        for slot in 0..snapshot_count {
            let at = slot * cells + b.begin * nx;
            snapshots[at..at + own].copy_from_slice(&host[slot * own..(slot + 1) * own]);
        }
    }
    Ok(SplitRun { snapshots, total_ms, enqueue_ms, intervals })
}

/// The rows a band computes first in a round's last step: the `2k` its
/// neighbour on each shared edge pulls.
fn edges(b: Band, k: usize) -> Vec<Range<usize>> {
    let mut rows = Vec::new();
    if b.above() {
        rows.push(b.begin..b.begin + 2 * k);
    }
    if b.below() {
        rows.push(b.end - 2 * k..b.end);
    }
    rows
}

/// The band's own rows between its [`edges`].
fn interior(b: Band, k: usize) -> Range<usize> {
    let start = if b.above() { b.begin + 2 * k } else { b.begin };
    let end = if b.below() { b.end - 2 * k } else { b.end };
    start..end.max(start)
}

/// The single-device `sync` run a split run is checked against.
pub struct SingleRun<'a> {
    /// Its snapshots.
    pub snapshots: &'a [f32],
    /// Its device time, ms.
    pub total_ms: Option<f64>,
    /// The single-device `event-sync` run's device time, ms: one device
    /// with its snapshot copies overlapped, as `split-overlap` overlaps them.
    pub overlapped_ms: Option<f64>,
}

/// Runs both split variants on `env`'s device and its peers, on grid `g`,
/// each checked against the reference (`expect`, `tolerance`) and against
/// the single-device run bit for bit.
pub fn run(
    env: &Env<'_>,
    g: Grid,
    source: &[f32],
    expect: &[f64],
    tolerance: f64,
    single: &SingleRun<'_>,
) -> Result<Vec<Outcome>, Failure> {
    let contexts: Vec<&Context> = std::iter::once(env.ctx).chain(env.peers.iter()).collect();
    let k = halo_steps(g.ny, contexts.len());
    if bands(g.ny, contexts.len(), k).is_none() {
        return Ok(Vec::new());
    }
    let mut outcomes = Vec::new();
    for split in Split::ALL {
        let run = run_split(&contexts, env.tuning, env.clock, g, source, split, k)?;
        let verdict = elementwise(&run.snapshots, expect, |_| tolerance);
        let mut outcome = Outcome::new(split.name(), verdict, Some(run.total_ms))
            .metric("devices", contexts.len() as f64)
            .metric("halo_steps", k as f64)
            .metric("enqueue_ms", run.enqueue_ms)
            .with_output(super::Output::F32(run.snapshots.clone()));
        let differing = run.snapshots.iter().zip(single.snapshots).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        if differing > 0 || run.snapshots.len() != single.snapshots.len() {
            outcome.note = Some(format!("{differing} snapshot values differ from the single-device sync run's"));
        }
        if let Some(single_ms) = single.total_ms {
            outcome = outcome.metric("single_ms", single_ms).metric("speedup_vs_single", single_ms / run.total_ms);
        }
        if let Some(overlapped_ms) = single.overlapped_ms {
            outcome = outcome
                .metric("single_overlapped_ms", overlapped_ms)
                .metric("speedup_vs_single_overlapped", overlapped_ms / run.total_ms);
        }
        if env.clock.unavailable().is_none() {
            let halo_ms = run.intervals.iter().map(|i| total_ms(i, Kind::Copy)).fold(0.0f64, f64::max);
            outcome = outcome.metric("halo_ms", halo_ms);
            let hidden: Vec<f64> = run.intervals.iter().filter_map(|i| hidden_copy_fraction(i)).collect();
            if split == Split::Overlap && !hidden.is_empty() {
                outcome = outcome.metric("halo_hidden_fraction", hidden.iter().sum::<f64>() / hidden.len() as f64);
            }
        }
        outcome.intervals = run.intervals.into_iter().next().unwrap_or_default();
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::{Band, MAX_HALO_STEPS, bands, edges, halo_steps, interior};

    #[test]
    fn bands_cover_the_grid_with_halo_rows_of_a_round() {
        let b = bands(130, 3, 2).expect("43 rows each");
        assert_eq!(b[0], Band { begin: 0, end: 43, lo: 0, hi: 47 });
        assert_eq!(b[1], Band { begin: 43, end: 86, lo: 39, hi: 90 });
        assert_eq!(b[2], Band { begin: 86, end: 130, lo: 82, hi: 130 });
        assert!(bands(7, 2, 1).is_none(), "fewer than four rows a band");
        assert!(bands(60, 2, 8).is_none(), "a band must own four halos' worth");
        assert!(bands(8, 0, 1).is_none());
        assert!(bands(8, 2, 0).is_none());
    }

    #[test]
    fn halo_steps_fit_every_band() {
        assert_eq!(halo_steps(4096, 2), MAX_HALO_STEPS);
        assert_eq!(halo_steps(128, 2), MAX_HALO_STEPS);
        assert_eq!(halo_steps(40, 2), 5);
        assert_eq!(halo_steps(8, 2), 1);
        for (ny, devices) in [(4096, 2), (128, 2), (40, 2), (130, 3), (8, 2), (1000, 7)] {
            assert!(bands(ny, devices, halo_steps(ny, devices)).is_some(), "{ny} rows on {devices}");
        }
    }

    #[test]
    fn a_round_shrinks_to_the_band() {
        let b = Band { begin: 40, end: 80, lo: 32, hi: 88 };
        assert_eq!(b.computed(1), 34..86);
        assert_eq!(b.computed(4), 40..80, "the round's last step computes the band's own rows");
        let first = Band { begin: 0, end: 40, lo: 0, hi: 48 };
        assert_eq!(first.computed(1), 0..46, "no shrink at the grid's edge");
        assert_eq!(first.computed(4), 0..40);
    }

    #[test]
    fn edges_and_interior_split_a_band() {
        let b = Band { begin: 40, end: 80, lo: 32, hi: 88 };
        assert_eq!(edges(b, 4), vec![40..48, 72..80]);
        assert_eq!(interior(b, 4), 48..72);
        let first = Band { begin: 0, end: 40, lo: 0, hi: 48 };
        assert_eq!(edges(first, 4), vec![32..40]);
        assert_eq!(interior(first, 4), 0..32);
    }
}
