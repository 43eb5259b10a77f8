//! wave split across devices: `split-sync` and `split-overlap`, run when
//! two or more devices of one backend are selected.
//!
//! The grid's rows are cut into one band per device ([`Band`]). Each device
//! holds its band and the two rows beyond each of its edges that the
//! fourth-order stencil reads (halo rows), and computes its own rows with
//! `wave_rows`. After every step each device pulls its halo rows of the
//! new field from its neighbours with peer copies
//! ([`hetero::Stream::copy_peer`]); the typed layer orders each copy after
//! the neighbour's kernel and the next steps after the copy, on the
//! devices. Each cell is computed with the same arithmetic from the same
//! values as on one device, so the snapshots must equal the single-device
//! `sync` run's bit for bit.
//!
//! - `split-sync`: one stream per device; a step's halo copies follow its
//!   kernel on that stream.
//! - `split-overlap`: each device first computes its edge rows (the two
//!   rows each neighbour reads), its halo stream pulls the neighbours' edge
//!   rows while its compute stream computes the interior rows.
//!
//! Snapshots: each device copies its own rows to pinned memory of its own,
//! on its compute stream, and the host gathers them. Reported: time (the
//! slowest device's), speed-up over the single-device `sync` run, halo
//! exchange time (the slowest device's summed halo copies) and the
//! fraction of it hidden under compute (the mean over devices, from each
//! device's timeline).

use std::time::Instant;

use hetero::{Context, DeviceBuffer, Kernel, Stream};

use super::grid::{C2, FIELDS, Grid, block_width};
use super::{Env, Failure, Outcome};
use crate::check::elementwise;
use crate::clock::Clock;
use crate::timeline::{Interval, Kind, Timeline, hidden_copy_fraction, total_ms};

/// Rows a band needs at least: two edge rows for each neighbour.
pub const MIN_BAND_ROWS: usize = 4;

/// How a step's halo exchange is ordered against compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Halo copies follow the whole step on the compute stream.
    Sync,
    /// Edge rows first, halo copies on their own stream under the interior.
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

/// One device's rows of the grid: it computes `[begin, end)` and holds
/// `[lo, hi)`, its rows and the halo rows beyond its edges (global rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Band {
    /// First row it computes.
    pub begin: usize,
    /// One past the last row it computes.
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

    /// A global row range in the band's local rows.
    fn local(&self, rows: std::ops::Range<usize>) -> std::ops::Range<usize> {
        rows.start - self.lo..rows.end - self.lo
    }
}

/// `ny` rows cut into `devices` bands of near-equal size; `None` when a
/// band would have fewer than [`MIN_BAND_ROWS`] rows.
pub fn bands(ny: usize, devices: usize) -> Option<Vec<Band>> {
    if devices == 0 || ny / devices < MIN_BAND_ROWS {
        return None;
    }
    Some(
        (0..devices)
            .map(|d| {
                let (begin, end) = (d * ny / devices, (d + 1) * ny / devices);
                Band { begin, end, lo: begin.saturating_sub(2), hi: (end + 2).min(ny) }
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
    halo: Stream,
    fields: Vec<DeviceBuffer<f32>>,
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
    rows: std::ops::Range<usize>,
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
    // SAFETY: wave_rows reads rows [start - 2, end + 2) of u and rows
    // [start, end) of u_prev, writes rows [start, end) of u_next, all within
    // the band's rows() * nx cells each field holds.
    unsafe { compute.launch(kernel, config, &args) }?;
    Ok(())
}

/// Pulls the halo rows of field `field` of part `d` from its neighbours, on
/// `d`'s compute or halo stream; spans go to `timeline`.
fn pull_halos(
    parts: &mut [Part<'_>],
    d: usize,
    field: usize,
    on_halo_stream: bool,
    timeline: &mut Timeline<'_>,
    nx: usize,
) -> Result<(), Failure> {
    let (before, rest) = parts.split_at_mut(d);
    let (me, after) = rest.split_first_mut().ok_or_else(|| Failure::Internal("no such band".into()))?;
    let band = me.band;
    let stream = if on_halo_stream { &me.halo } else { &me.compute };
    let lane = if on_halo_stream { "halo" } else { "compute" };
    let mut pull = |from: &Part<'_>, rows: std::ops::Range<usize>| -> Result<(), Failure> {
        let src = from.band.local(rows.clone());
        let dst = band.local(rows);
        let src = from.fields[field].slice(src.start * nx..src.end * nx)?;
        let dst = me.fields[field].slice_mut(dst.start * nx..dst.end * nx)?;
        timeline.span(stream, lane, "halo copy", Kind::Copy, || Ok::<_, Failure>(stream.copy_peer(src, dst)?))?;
        Ok(())
    };
    if let Some(up) = before.last() {
        pull(up, band.lo..band.begin)?;
    }
    if let Some(down) = after.first() {
        pull(down, band.end..band.hi)?;
    }
    Ok(())
}

/// What a split run gives: the gathered snapshots, the slowest device's
/// time, and each device's intervals.
struct SplitRun {
    snapshots: Vec<f32>,
    total_ms: f64,
    intervals: Vec<Vec<Interval>>,
}

fn run_split(contexts: &[&Context], clock: &Clock, g: Grid, source: &[f32], split: Split) -> Result<SplitRun, Failure> {
    let bands = bands(g.ny, contexts.len()).ok_or_else(|| Failure::Internal("too few rows per device".into()))?;
    let nx = g.nx;
    let snapshot_count = g.steps / g.snapshot_every;
    let mut parts = Vec::new();
    for (ctx, band) in contexts.iter().zip(&bands) {
        let kernel = ctx.build_module(hetero::kernels::WAVE)?.kernel("wave_rows")?;
        let (compute, halo) = (ctx.stream()?, ctx.stream()?);
        let mut fields = Vec::new();
        for _ in 0..FIELDS {
            let mut field = ctx.alloc::<f32>(band.rows() * nx)?;
            compute.fill(&mut field, 0.0f32)?;
            fields.push(field);
        }
        let snapshots = ctx.alloc_pinned::<f32>(snapshot_count * (band.end - band.begin) * nx)?;
        parts.push(Part { ctx, band: *band, kernel, compute, halo, fields, snapshots });
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
        part.halo.wait(&start)?;
        marks.push((start, stop));
        timelines.push(match clock {
            Clock::Device => Timeline::new(part.ctx, &part.compute, &[&part.halo])?,
            Clock::Host(_) => Timeline::off(part.ctx)?,
        });
    }
    for (step, &src) in source.iter().enumerate() {
        let field = (step + 2) % FIELDS;
        match split {
            Split::Sync => {
                for (part, timeline) in parts.iter_mut().zip(&mut timelines) {
                    let Part { compute, kernel, fields, band, .. } = part;
                    timeline.span(compute, "compute", "wave_rows", Kind::Kernel, || {
                        launch_rows(compute, kernel, *band, fields, g, band.begin..band.end, step, src)
                    })?;
                }
                for (d, timeline) in timelines.iter_mut().enumerate() {
                    pull_halos(&mut parts, d, field, false, timeline, nx)?;
                }
            }
            Split::Overlap => {
                let count = parts.len();
                for (d, (part, timeline)) in parts.iter_mut().zip(&mut timelines).enumerate() {
                    let Part { compute, kernel, fields, band, .. } = part;
                    for rows in edges(*band, d > 0, d + 1 < count) {
                        timeline.span(compute, "compute", "wave_rows edge", Kind::Kernel, || {
                            launch_rows(compute, kernel, *band, fields, g, rows, step, src)
                        })?;
                    }
                }
                for (d, timeline) in timelines.iter_mut().enumerate() {
                    pull_halos(&mut parts, d, field, true, timeline, nx)?;
                }
                for (d, (part, timeline)) in parts.iter_mut().zip(&mut timelines).enumerate() {
                    let Part { compute, kernel, fields, band, .. } = part;
                    let rows = interior(*band, d > 0, d + 1 < count);
                    timeline.span(compute, "compute", "wave_rows interior", Kind::Kernel, || {
                        launch_rows(compute, kernel, *band, fields, g, rows, step, src)
                    })?;
                }
            }
        }
        if (step + 1) % g.snapshot_every == 0 {
            let slot = (step + 1) / g.snapshot_every - 1;
            for part in &mut parts {
                let b = part.band;
                let own = (b.end - b.begin) * nx;
                let local = b.local(b.begin..b.end);
                let src = part.fields[field].slice(local.start * nx..local.end * nx)?;
                let dst = part.snapshots.slice_mut(slot * own..(slot + 1) * own)?;
                part.compute.copy(src, dst)?;
            }
        }
    }
    let mut total_ms = 0.0f64;
    let mut intervals = Vec::new();
    for ((part, (start, stop)), timeline) in parts.iter().zip(&marks).zip(timelines) {
        let drained = part.ctx.event()?;
        part.halo.record(&drained)?;
        part.compute.wait(&drained)?;
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
    Ok(SplitRun { snapshots, total_ms, intervals })
}

/// The edge rows a band computes first: two at each edge with a neighbour.
fn edges(b: Band, above: bool, below: bool) -> Vec<std::ops::Range<usize>> {
    let mut rows = Vec::new();
    if above {
        rows.push(b.begin..b.begin + 2);
    }
    if below {
        rows.push(b.end - 2..b.end);
    }
    rows
}

/// The rows between a band's edges.
fn interior(b: Band, above: bool, below: bool) -> std::ops::Range<usize> {
    let start = if above { b.begin + 2 } else { b.begin };
    let end = if below { b.end - 2 } else { b.end };
    start..end.max(start)
}

/// The single-device `sync` run a split run is checked against.
pub struct SingleRun<'a> {
    /// Its snapshots.
    pub snapshots: &'a [f32],
    /// Its device time, ms.
    pub total_ms: Option<f64>,
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
    if bands(g.ny, contexts.len()).is_none() {
        return Ok(Vec::new());
    }
    let mut outcomes = Vec::new();
    for split in Split::ALL {
        let run = run_split(&contexts, env.clock, g, source, split)?;
        let verdict = elementwise(&run.snapshots, expect, |_| tolerance);
        let mut outcome = Outcome::new(split.name(), verdict, Some(run.total_ms))
            .metric("devices", contexts.len() as f64)
            .with_output(super::Output::F32(run.snapshots.clone()));
        let differing = run.snapshots.iter().zip(single.snapshots).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        if differing > 0 || run.snapshots.len() != single.snapshots.len() {
            outcome.note = Some(format!("{differing} snapshot values differ from the single-device sync run's"));
        }
        if let Some(single_ms) = single.total_ms {
            outcome = outcome.metric("single_ms", single_ms).metric("speedup_vs_single", single_ms / run.total_ms);
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
    use super::{Band, bands, edges, interior};

    #[test]
    fn bands_cover_the_grid_with_two_halo_rows() {
        let b = bands(130, 3).expect("43 rows each");
        assert_eq!(b[0], Band { begin: 0, end: 43, lo: 0, hi: 45 });
        assert_eq!(b[1], Band { begin: 43, end: 86, lo: 41, hi: 88 });
        assert_eq!(b[2], Band { begin: 86, end: 130, lo: 84, hi: 130 });
        assert!(bands(7, 2).is_none(), "fewer than four rows a band");
        assert!(bands(8, 0).is_none());
    }

    #[test]
    fn edges_and_interior_split_a_band() {
        let b = Band { begin: 10, end: 20, lo: 8, hi: 22 };
        assert_eq!(edges(b, true, true), vec![10..12, 18..20]);
        assert_eq!(interior(b, true, true), 12..18);
        assert_eq!(edges(b, false, true), vec![18..20]);
        assert_eq!(interior(b, false, true), 10..18);
    }
}
