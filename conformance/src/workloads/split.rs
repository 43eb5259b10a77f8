//! wave split across devices: `split-sync` and `split-overlap`, run when
//! two or more devices of one backend are selected.
//!
//! The grid's rows are cut into one band per device ([`Band`]), a strip
//! of any number of devices. Each device holds its band and `2k` rows
//! beyond each edge it shares with a neighbour (halo rows), and exchanges
//! halos once every `k` steps (a *round*): the fourth-order stencil reads
//! two rows on each side, so after an exchange a device can compute `k`
//! steps on its own, the rows it computes shrinking by two at each shared
//! edge per step (`Band::computed`), the last step's being exactly its
//! band. Rows it computes beyond its band are computed by their owner too,
//! with the same arithmetic from the same values. After each round a
//! device pulls from each neighbour the neighbour's rows of its halo, of
//! the round's last two fields (the stencil reads two time levels), with
//! peer copies ([`hetero::Stream::copy_peer`]); the typed layer orders each
//! copy after the neighbour's kernels and the next steps after the copy,
//! on the devices, per row range: an eager launch is ordered by only the
//! rows it reads and writes, so work on other rows of a field never waits
//! for a copy. Every launch passes whole fields, the rows as scalars (an
//! eager one with [`hetero::Arg::whole_buffer`]; a replay is tracked as
//! one operation over every row it touches anyway): OpenCL would make a
//! sub-buffer for each offset, which NVIDIA's driver charges every launch
//! for. Each cell is computed with the same arithmetic from the same
//! values as on one device, so the snapshots must equal the single-device
//! `sync` run's bit for bit, whatever `k`.
//!
//! `k` is chosen from measured times ([`round_steps`]): one step of a
//! band, and a halo copy of two sizes. Longer rounds mean fewer exchanges
//! and cross-device waits, and more rows computed twice. The model's
//! choice and longer ones are then tried on the devices over the first
//! snapshot interval (the first two where a round is longer than half of
//! one, so that every trial exchanges halos; each run starts after a few
//! untimed exchanges, `warm_exchanges`), and so is the first device alone
//! (one band, no halos, the longest round), both in replayed rounds and
//! with eager launches, beside the fastest single-device variant's run
//! ([`Alone`]):
//! where the fastest of those is faster a step than every round tried on
//! all devices, `split-overlap` declines to split and runs it on the first
//! device alone ([`declines`]; its `devices` and `single_best_variant`
//! metrics say so), since splitting a grid too small for it only costs
//! time (and replaying rounds can cost more than eager launches where a
//! backend replays a graph launch by launch). The trials'
//! snapshots are checked bit for bit too, so the split over all devices is
//! checked even where it is declined.
//!
//! - `split-sync`: one stream per device, every step an eager launch; a
//!   round's halo copies follow its last step on that stream.
//! - `split-overlap`: each device runs a round as the single-device
//!   `graph` variant runs an interval: a graph of its steps, recorded once
//!   and replayed with the round's fields and source values, whose last
//!   step computes only the rows its neighbours pull (edges). Then its
//!   halo streams (one per neighbour) pull the neighbours' rows while its
//!   compute stream computes the rest of the last step (interior): the
//!   only cross-device dependencies are each pull on its neighbour's
//!   replay, and the neighbour's next replay on the pull. Snapshots are
//!   overlapped too, as the single-device `event-sync` run does: the
//!   compute stream copies its rows into one of [`STAGING`] device buffers
//!   and a copy stream copies that to pinned memory.
//!
//! Snapshots: each device copies its own rows to pinned memory of its own
//! (in `split-sync` on its compute stream), and the host gathers them.
//! Reported: time (the slowest device's), speed-up over the single-device
//! `sync` run and over the best single-device variant, steps a round and
//! the costs it was chosen from, the host's time enqueueing, halo exchange
//! time (the slowest device's summed halo copies) and the fraction of it
//! hidden under compute (the mean over devices, from each device's
//! timeline).

use std::ops::Range;
use std::time::Instant;

use hetero::{
    Arg, Context, DeviceBuffer, DeviceSlice, DeviceSliceMut, Graph, GraphBuffer, Kernel, Node, OnDevice, Stream,
};

use super::grid::{C2, FIELDS, Grid, STAGING, block_width, rows_launch};
use super::{Env, Failure, Outcome, median};
use crate::check::elementwise;
use crate::clock::{Clock, timed};
use crate::timeline::{Interval, Kind, Timeline, hidden_copy_fraction, total_ms};

/// Rows a band needs at least: two edge rows for each neighbour.
pub const MIN_BAND_ROWS: usize = 4;

/// Steps a round has at most ([`halo_steps`]).
pub const MAX_HALO_STEPS: usize = 128;

/// Round lengths tried on the devices ([`rounds_to_try`]).
pub const TRIED_ROUNDS: usize = 3;

/// How a step's halo exchange is ordered against compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Eager launches; halo copies follow the round on the compute stream.
    Sync,
    /// A graph a round; halo copies on their own streams under the last
    /// step's interior.
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

    /// Its name in `conform --wave-variants`.
    fn selector(self) -> super::WaveVariant {
        match self {
            Split::Sync => super::WaveVariant::SplitSync,
            Split::Overlap => super::WaveVariant::SplitOverlap,
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

    /// The cells of each field a launch computing global `rows` touches,
    /// local: of `u_prev` and `u_next` the rows themselves, of `u` two more
    /// on each side within the held rows (`wave_rows`'s contract).
    fn touched(&self, rows: &Range<usize>, nx: usize) -> [Range<usize>; 2] {
        let out = self.local(rows.clone());
        let u = out.start.saturating_sub(2)..(out.end + 2).min(self.rows());
        [out.start * nx..out.end * nx, u.start * nx..u.end * nx]
    }
}

/// The most steps a round of `ny` rows on `devices` devices may have: at
/// most [`MAX_HALO_STEPS`], while every band owns at least four times
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

/// Measured device times a round length is chosen from, ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    /// One step of a band's own rows.
    pub step_ms: f64,
    /// Rows a band owns.
    pub own_rows: usize,
    /// A halo copy's fixed time (a copy of two rows).
    pub halo_fixed_ms: f64,
    /// A halo copy's time per row beyond that.
    pub halo_row_ms: f64,
}

impl Costs {
    /// The modelled time a step with rounds of `k` steps: the rows a
    /// middle band computes (its own and, on average, `k - 1` more at each
    /// shared edge) plus a round's halo copies (two fields of `2k` rows)
    /// spread over its steps.
    pub fn per_step_ms(&self, k: usize) -> f64 {
        let k = k as f64;
        let rows = self.own_rows.max(1) as f64;
        let compute = self.step_ms * (1.0 + 2.0 * (k - 1.0) / rows);
        let exchange = 2.0 * (self.halo_fixed_ms + 2.0 * k * self.halo_row_ms);
        compute + exchange / k
    }
}

/// The round lengths allowed: of the divisors of `every` (snapshots then
/// fall at a round's end) up to `limit`, the multiples of [`FIELDS`] where
/// there are any (every round then starts with the same field rotation,
/// so a round's graph is replayed unchanged); ascending.
fn round_candidates(limit: usize, every: usize) -> Vec<usize> {
    let divisors: Vec<usize> = (1..=limit.min(every).max(1)).filter(|d| every.is_multiple_of(*d)).collect();
    let rotating = divisors.iter().any(|d| d.is_multiple_of(FIELDS));
    divisors.into_iter().filter(|d| !rotating || d.is_multiple_of(FIELDS)).collect()
}

/// The steps a round by the model: of the round lengths allowed
/// (`round_candidates`), the one with the least modelled time a step
/// ([`Costs::per_step_ms`]), the longer on a tie; with costs that are not
/// finite, the longest up to 8.
pub fn round_steps(costs: Costs, limit: usize, every: usize) -> usize {
    let candidates = round_candidates(limit, every);
    let finite = [costs.step_ms, costs.halo_fixed_ms, costs.halo_row_ms].iter().all(|c| c.is_finite() && *c >= 0.0);
    if !finite {
        let smallest = candidates.first().copied().unwrap_or(1);
        return candidates.into_iter().filter(|&d| d <= 8).max().unwrap_or(smallest);
    }
    candidates
        .into_iter()
        .map(|d| (d, costs.per_step_ms(d)))
        .fold(None, |best: Option<(usize, f64)>, (d, t)| match best {
            Some((_, b)) if b < t => best,
            _ => Some((d, t)),
        })
        .map_or(1, |(d, _)| d)
}

/// The round lengths to run on the devices, ascending: the model's choice
/// ([`round_steps`]) and up to [`TRIED_ROUNDS`] − 1 longer candidates.
/// The model counts the devices' work and copies; what it leaves out (the
/// host's time enqueueing a round, the latency of each cross-device wait)
/// is paid once a round, so a longer round can only gain from it.
pub fn rounds_to_try(costs: Costs, limit: usize, every: usize) -> Vec<usize> {
    let modelled = round_steps(costs, limit, every);
    let longer = round_candidates(limit, every).into_iter().filter(|&d| d > modelled);
    std::iter::once(modelled).chain(longer.take(TRIED_ROUNDS - 1)).collect()
}

/// The fields step `step` reads (two) and writes, as indices of the
/// [`FIELDS`] rotating ones.
fn rotation(step: usize) -> [usize; 3] {
    [step % FIELDS, (step + 1) % FIELDS, (step + 2) % FIELDS]
}

/// `wave_rows`'s arguments: the three fields, passed whole (from the
/// band's first held row), then for global `rows` of `band` its held
/// rows, the rows computed in local rows, where the fields passed start
/// (their first row), and the source's cell, local, where the band
/// computes it; for an eager launch or a graph's.
fn rows_args<A: From<u32> + From<f32>>(
    fields: [A; 3],
    g: Grid,
    band: Band,
    rows: &Range<usize>,
    source: f32,
) -> Vec<A> {
    let out = band.local(rows.clone());
    let (out_first, u_first) = (0u32, 0u32);
    let (sx, sy) = g.source();
    let sy_local = if rows.contains(&sy) { (sy - band.lo) as u32 } else { u32::MAX };
    let scalars: [A; 10] = [
        (g.nx as u32).into(),
        (band.rows() as u32).into(),
        (out.start as u32).into(),
        (out.end as u32).into(),
        out_first.into(),
        u_first.into(),
        C2.into(),
        (sx as u32).into(),
        sy_local.into(),
        source.into(),
    ];
    fields.into_iter().chain(scalars).collect()
}

/// Index of the source value among `wave_rows`'s arguments.
const SOURCE_ARG: usize = 12;

/// Launches `wave_rows` on `compute` for global `rows` of `band` with the
/// step's fields (`u_prev`, `u`, `u_next`, whole): each passed from its
/// start ([`hetero::Arg::whole_buffer`]) and ordered only against the rows
/// the launch touches, so no OpenCL sub-buffer is made for a row range and
/// work on other rows (a halo copy) still runs beside it.
fn launch_rows(
    compute: &Stream,
    kernel: &Kernel,
    band: Band,
    [prev, cur, mut next]: [DeviceSliceMut<'_, f32>; 3],
    g: Grid,
    rows: Range<usize>,
    source: f32,
) -> Result<(), Failure> {
    if rows.is_empty() {
        return Ok(());
    }
    let [out, u] = band.touched(&rows, g.nx);
    let (prev, cur, next) = (prev.slice(out.clone())?, cur.slice(u)?, next.slice_mut(out)?);
    let config = rows_launch(g.nx, rows.len(), block_width(kernel));
    let fields = [Arg::from(&prev), Arg::from(&cur), Arg::from(&next)].map(Arg::whole_buffer);
    let args = rows_args(fields, g, band, &rows, source);
    // SAFETY: wave_rows reads the rows of u two beyond `rows` on each side
    // within the held ones, and `rows` of u_prev, and writes `rows` of
    // u_next (wave.kern), indexed from each field's first row as the
    // arguments say: the slices passed, as `touched` cuts them.
    unsafe { compute.launch(kernel, config, &args) }?;
    Ok(())
}

/// Elements `range` of a writable slice, keeping its borrow.
fn sub_mut(slice: DeviceSliceMut<'_, f32>, range: Range<usize>) -> Result<DeviceSliceMut<'_, f32>, Failure> {
    let (head, _) = slice.split_at_mut(range.end)?;
    Ok(head.split_at_mut(range.start)?.1)
}

/// A device's [`FIELDS`] fields: its own buffers, or bound to its round graph.
trait Fields {
    /// Cells `cells` of field `field`, read.
    fn read(&self, field: usize, cells: Range<usize>) -> Result<DeviceSlice<'_, f32>, Failure>;
    /// Cells `cells` of field `field`, written.
    fn write(&mut self, field: usize, cells: Range<usize>) -> Result<DeviceSliceMut<'_, f32>, Failure>;
    /// The fields `step` reads and writes, whole.
    fn step(&mut self, step: usize) -> Result<[DeviceSliceMut<'_, f32>; 3], Failure>;
}

impl Fields for Vec<DeviceBuffer<f32>> {
    fn read(&self, field: usize, cells: Range<usize>) -> Result<DeviceSlice<'_, f32>, Failure> {
        Ok(self[field].slice(cells)?)
    }

    fn write(&mut self, field: usize, cells: Range<usize>) -> Result<DeviceSliceMut<'_, f32>, Failure> {
        Ok(self[field].slice_mut(cells)?)
    }

    fn step(&mut self, step: usize) -> Result<[DeviceSliceMut<'_, f32>; 3], Failure> {
        let fields = self
            .get_disjoint_mut(rotation(step))
            .map_err(|e| Failure::Internal(format!("wave field rotation: {e}")))?;
        Ok(fields.map(DeviceSliceMut::from))
    }
}

/// A device's round graph: the fields it binds, and its launches with the
/// step of the round (from 0) and the global rows each computes. Only
/// arguments that change are set before a replay (a changed graph is
/// updated in the driver, host time every round): the field rotation when
/// a round starts at another one, the source value where a launch
/// computes the source's cell.
struct Round<'b> {
    graph: Graph<'b>,
    bound: Vec<GraphBuffer<f32, OnDevice>>,
    launches: Vec<(Node, usize, Range<usize>)>,
    /// The rotation (first step modulo [`FIELDS`]) the graph holds.
    phase: usize,
    /// Each launch's source value as set (bits).
    sources: Vec<u32>,
}

impl Fields for Round<'_> {
    fn read(&self, field: usize, cells: Range<usize>) -> Result<DeviceSlice<'_, f32>, Failure> {
        Ok(self.graph.get(self.bound[field])?.slice(cells)?)
    }

    fn write(&mut self, field: usize, cells: Range<usize>) -> Result<DeviceSliceMut<'_, f32>, Failure> {
        sub_mut(self.graph.get_mut(self.bound[field])?, cells)
    }

    fn step(&mut self, step: usize) -> Result<[DeviceSliceMut<'_, f32>; 3], Failure> {
        Ok(self.graph.get_disjoint_mut(rotation(step).map(|f| self.bound[f]))?)
    }
}

impl<'b> Round<'b> {
    /// Records a round of `k` steps of `band` on `ctx`: steps 1 to `k - 1`,
    /// then the edges of step `k`, over `fields`.
    fn record(
        ctx: &Context,
        kernel: &'b Kernel,
        fields: &'b mut [DeviceBuffer<f32>],
        band: Band,
        g: Grid,
        k: usize,
    ) -> Result<Self, Failure> {
        let mut rec = ctx.recorder();
        let bound: Vec<_> = fields.iter_mut().map(|f| rec.bind_mut(f)).collect::<Result<_, _>>()?;
        let s = rec.stream();
        let width = block_width(kernel);
        let mut launches = Vec::new();
        let steps = (1..k).map(|j| band.computed(j)).map(|rows| (rows, false));
        let rows_of = steps.chain(edges(band, k).into_iter().map(|rows| (rows, true)));
        for (i, (rows, edge)) in rows_of.enumerate() {
            if rows.is_empty() {
                continue;
            }
            let step = if edge { k - 1 } else { i };
            let [prev, cur, next] = rotation(step).map(|f| bound[f]);
            // Whole fields: a round's launches over shrinking row ranges
            // then pass three buffers, not a sub-buffer each on OpenCL
            // (`wave_rows`). A replay is tracked as one operation over
            // all it touches, so nothing is ordered later than before.
            let fields = [prev.read().into(), cur.read().into(), next.write().into()];
            let args = rows_args(fields, g, band, &rows, 0.0);
            let config = rows_launch(g.nx, rows.len(), width);
            // SAFETY: whole fields of the band's held rows, indexed from
            // their first: wave_rows touches only rows of `rows` and two
            // beyond, within them, in every rotation `replay` sets.
            launches.push((unsafe { rec.launch(s, kernel, config, args) }?, step, rows));
        }
        let sources = vec![0.0f32.to_bits(); launches.len()];
        Ok(Self { graph: rec.finish()?, bound, launches, phase: 0, sources })
    }

    /// Replays the round whose first step is `first` on `stream`.
    fn replay(&mut self, stream: &Stream, g: Grid, first: usize, source: &[f32]) -> Result<(), Failure> {
        let phase = first % FIELDS;
        let (_, source_row) = g.source();
        for ((node, step, rows), set) in self.launches.iter().zip(&mut self.sources) {
            let (node, step) = (*node, *step);
            if self.phase != phase {
                let [prev, cur, next] = rotation(first + step).map(|f| self.bound[f]);
                // SAFETY: other whole fields of the same length.
                unsafe {
                    self.graph.set_arg(node, 0, prev.read())?;
                    self.graph.set_arg(node, 1, cur.read())?;
                    self.graph.set_arg(node, 2, next.write())?;
                }
            }
            let value = source[first + step];
            if rows.contains(&source_row) && value.to_bits() != *set {
                // SAFETY: a scalar of the recorded type.
                unsafe { self.graph.set_arg(node, SOURCE_ARG, value) }?;
                *set = value.to_bits();
            }
        }
        self.phase = phase;
        Ok(self.graph.replay(stream)?)
    }
}

/// One device's part of a split run, beside its fields.
struct Part<'a> {
    ctx: &'a Context,
    band: Band,
    compute: Stream,
    /// Halo streams: the pulls from the neighbour above, and below (one
    /// each, so the two sides' copies are tracked apart and never wait for
    /// each other).
    halos: [Stream; 2],
    /// `split-overlap`'s snapshot path: device buffers of the band's own
    /// rows, and the stream that copies them to `snapshots`.
    staging: Vec<DeviceBuffer<f32>>,
    copier: Stream,
    snapshots: hetero::PinnedBuffer<f32>,
}

/// Pulls part `d`'s halo rows from its neighbours after the round whose
/// last step is `last`: of that step's field all halo rows, of the step
/// before's all but the two next to the band (which `d` computed itself
/// in that step). On `d`'s halo streams, or its compute stream when
/// `on_compute`; spans go to `timeline`.
fn pull_halos<F: Fields>(
    parts: &[Part<'_>],
    fields: &mut [F],
    d: usize,
    last: usize,
    on_compute: bool,
    timeline: &mut Timeline<'_>,
    nx: usize,
) -> Result<(), Failure> {
    let (before, rest) = fields.split_at_mut(d);
    let (mine, after) = rest.split_first_mut().ok_or_else(|| Failure::Internal("no such band".into()))?;
    let me = &parts[d];
    let band = me.band;
    let [_, older, newest] = rotation(last);
    let mut pull = |from: (&Band, &F), side: usize, field: usize, rows: Range<usize>| -> Result<(), Failure> {
        if rows.is_empty() {
            return Ok(());
        }
        let (stream, lane) = if on_compute { (&me.compute, "compute") } else { (&me.halos[side], "halo") };
        let (src, dst) = (from.0.local(rows.clone()), band.local(rows));
        let src = from.1.read(field, src.start * nx..src.end * nx)?;
        let dst = mine.write(field, dst.start * nx..dst.end * nx)?;
        timeline.span(stream, lane, "halo copy", Kind::Copy, || Ok::<_, Failure>(stream.copy_peer(src, dst)?))?;
        Ok(())
    };
    if let Some(up) = before.last() {
        let from = (&parts[d - 1].band, up);
        pull(from, 0, newest, band.lo..band.begin)?;
        pull(from, 0, older, band.lo..band.begin.saturating_sub(2).max(band.lo))?;
    }
    if let Some(down) = after.first() {
        let from = (&parts[d + 1].band, down);
        pull(from, 1, newest, band.end..band.hi)?;
        pull(from, 1, older, (band.end + 2).min(band.hi)..band.hi)?;
    }
    Ok(())
}

/// Copies part `part`'s own rows of the field `step` wrote into snapshot
/// `slot`: on its compute stream, or through a staging buffer and its copy
/// stream where it has them.
fn snapshot<F: Fields>(part: &mut Part<'_>, fields: &F, step: usize, slot: usize, nx: usize) -> Result<(), Failure> {
    let b = part.band;
    let own = (b.end - b.begin) * nx;
    let local = b.local(b.begin..b.end);
    let src = fields.read(rotation(step)[2], local.start * nx..local.end * nx)?;
    let dst = part.snapshots.slice_mut(slot * own..(slot + 1) * own)?;
    if part.staging.is_empty() {
        part.compute.copy(src, dst)?;
    } else {
        // The typed layer orders the copy stream after this write, and the
        // buffer's next write after that read.
        let buffer = &mut part.staging[slot % STAGING];
        part.compute.copy(src, &mut *buffer)?;
        part.copier.copy(&*buffer, dst)?;
    }
    Ok(())
}

/// What a split run gives: the gathered snapshots, the slowest device's
/// time, and each device's intervals.
struct SplitRun {
    snapshots: Vec<f32>,
    total_ms: f64,
    /// Host time spent enqueueing the steps: near `total_ms` when the host,
    /// not the devices, is the limit (not measured for a single-device
    /// variant's run).
    enqueue_ms: Option<f64>,
    intervals: Vec<Vec<Interval>>,
}

/// What a split run enqueues: eager launches on each device's fields, or
/// replays of each device's round graph (which borrows them).
enum Work<'f> {
    Eager(&'f mut [Vec<DeviceBuffer<f32>>]),
    Rounds(Vec<Round<'f>>),
}

/// Each device's part, zeroed fields and kernel for a split of `g` into `bands`.
type Parts<'a> = (Vec<Part<'a>>, Vec<Vec<DeviceBuffer<f32>>>, Vec<Kernel>);

/// Each device's [`Parts`] for a split of `g` into `bands`.
fn parts<'a>(
    contexts: &[&'a Context],
    tuning: &super::Tuning,
    g: Grid,
    bands: &[Band],
    split: Split,
) -> Result<Parts<'a>, Failure> {
    let nx = g.nx;
    let (mut parts, mut fields, mut kernels) = (Vec::new(), Vec::new(), Vec::new());
    for (ctx, band) in contexts.iter().zip(bands) {
        kernels.push(super::build(ctx, tuning, hetero::kernels::WAVE)?.kernel("wave_rows")?);
        let (compute, halos) = (ctx.stream()?, [ctx.stream()?, ctx.stream()?]);
        let mut own_fields = Vec::new();
        for _ in 0..FIELDS {
            let mut field = ctx.alloc::<f32>(band.rows() * nx)?;
            compute.fill(&mut field, 0.0f32)?;
            own_fields.push(field);
        }
        let own = (band.end - band.begin) * nx;
        let snapshots = ctx.alloc_pinned::<f32>(g.snapshots() * own)?;
        let staged = if split == Split::Overlap { STAGING } else { 0 };
        let staging = (0..staged).map(|_| ctx.alloc::<f32>(own)).collect::<Result<Vec<_>, _>>()?;
        let copier = ctx.stream()?;
        parts.push(Part { ctx, band: *band, compute, halos, staging, copier, snapshots });
        fields.push(own_fields);
    }
    for part in &parts {
        part.compute.synchronize()?;
    }
    Ok((parts, fields, kernels))
}

/// Returns the blocks earlier work left in `contexts`' caches to the
/// driver, so that a run allocates its own: on OpenCL a block that a
/// launch passed at an offset keeps a sub-buffer from it, and NVIDIA's
/// driver charges every launch on a buffer for each live sub-buffer that
/// overlaps another (`opencl-profile/subbuf-cost.txt`). The split's own
/// launches make none ([`launch_rows`]); blocks of other work in the
/// process (a workload that launched at offsets) can carry them.
fn fresh(contexts: &[&Context]) {
    for ctx in contexts {
        ctx.trim();
    }
}

/// Exchanges before the clock starts ([`warm_exchanges`]).
const WARM_EXCHANGES: usize = 4;

/// Runs [`WARM_EXCHANGES`] halo exchanges on the halo streams and waits
/// for them, before the clock starts, as the round graphs are recorded
/// before it: a peer copy staged through the host (OpenCL across
/// contexts) maps its pinned buffer at its first use, about 0.36 ms a MiB
/// on NVIDIA's driver, and the host enqueues up to eight such copies ahead
/// of the devices, so a timed run that mapped them would count 11 ms of
/// setup at large (`opencl-profile/` in the two-GPU results). The fields
/// are still zero, so the copies change no value.
fn warm_exchanges(parts: &[Part<'_>], work: &mut Work<'_>, nx: usize) -> Result<(), Failure> {
    if parts.len() < 2 {
        return Ok(());
    }
    for _ in 0..WARM_EXCHANGES {
        for (d, part) in parts.iter().enumerate() {
            let mut off = Timeline::off(part.ctx)?;
            match work {
                Work::Eager(fields) => pull_halos(parts, fields, d, 0, false, &mut off, nx)?,
                Work::Rounds(rounds) => pull_halos(parts, rounds, d, 0, false, &mut off, nx)?,
            }
        }
    }
    for part in parts {
        for halo in &part.halos {
            halo.synchronize()?;
        }
    }
    Ok(())
}

/// Runs `g` split over `contexts` in rounds of `k` steps.
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
    fresh(contexts);
    let (mut parts, mut fields, kernels) = parts(contexts, tuning, g, &bands, split)?;
    // Round graphs are recorded before the clock starts, as the
    // single-device `graph` variant records its interval before its own.
    let mut work = match split {
        Split::Sync => Work::Eager(&mut fields),
        Split::Overlap => {
            let mut rounds = Vec::new();
            for ((part, fields), kernel) in parts.iter().zip(&mut fields).zip(&kernels) {
                rounds.push(Round::record(part.ctx, kernel, fields, part.band, g, k)?);
            }
            Work::Rounds(rounds)
        }
    };
    warm_exchanges(&parts, &mut work, g.nx)?;
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
            Clock::Device => Timeline::new(part.ctx, &part.compute, &part.halos.each_ref())?,
            Clock::Host(_) => Timeline::off(part.ctx)?,
        });
    }
    let enqueue = Instant::now();
    match &mut work {
        Work::Eager(fields) => eager(&mut parts, fields, &kernels, &mut timelines, g, source, k)?,
        Work::Rounds(rounds) => in_rounds(&mut parts, rounds, &kernels, &mut timelines, g, source, k)?,
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
    let mut snapshots = vec![0.0f32; g.snapshots() * cells];
    for part in &parts {
        let b = part.band;
        let own = (b.end - b.begin) * g.nx;
        let host = part.snapshots.host_slice()?;
        for slot in 0..g.snapshots() {
            let at = slot * cells + b.begin * g.nx;
            snapshots[at..at + own].copy_from_slice(&host[slot * own..(slot + 1) * own]);
        }
    }
    Ok(SplitRun { snapshots, total_ms, enqueue_ms: Some(enqueue_ms), intervals })
}

/// `split-sync`: every step an eager launch per device, each round's halo
/// copies after it on the compute stream. Only exchange steps go on the
/// timelines (two events each span, host time on every step otherwise).
fn eager(
    parts: &mut [Part<'_>],
    fields: &mut [Vec<DeviceBuffer<f32>>],
    kernels: &[Kernel],
    timelines: &mut [Timeline<'_>],
    g: Grid,
    source: &[f32],
    k: usize,
) -> Result<(), Failure> {
    for (step, &src) in source.iter().enumerate() {
        let j = step % k + 1;
        let exchange = j == k && step + 1 < source.len();
        let devices = parts.iter().zip(fields.iter_mut()).zip(kernels).zip(timelines.iter_mut());
        for (((part, fields), kernel), timeline) in devices {
            let rows = part.band.computed(j);
            let launch = || launch_rows(&part.compute, kernel, part.band, fields.step(step)?, g, rows, src);
            if exchange {
                timeline.span(&part.compute, "compute", "wave_rows", Kind::Kernel, launch)?;
            } else {
                launch()?;
            }
        }
        if exchange {
            for (d, timeline) in timelines.iter_mut().enumerate() {
                pull_halos(parts, fields, d, step, true, timeline, g.nx)?;
            }
        }
        if (step + 1) % g.snapshot_every == 0 {
            for (part, fields) in parts.iter_mut().zip(fields.iter()) {
                snapshot(part, fields, step, (step + 1) / g.snapshot_every - 1, g.nx)?;
            }
        }
    }
    Ok(())
}

/// `split-overlap`: per round, each device replays its round graph, pulls
/// its halos on its halo streams, and computes its last step's interior
/// on its compute stream meanwhile; steps past the last whole round run
/// as eager launches (`k` divides the snapshot interval, so snapshots fall
/// at a round's end).
fn in_rounds(
    parts: &mut [Part<'_>],
    rounds: &mut [Round<'_>],
    kernels: &[Kernel],
    timelines: &mut [Timeline<'_>],
    g: Grid,
    source: &[f32],
    k: usize,
) -> Result<(), Failure> {
    let whole = source.len() / k;
    for r in 0..whole {
        let (first, last) = (r * k, r * k + k - 1);
        for ((part, round), timeline) in parts.iter().zip(rounds.iter_mut()).zip(timelines.iter_mut()) {
            timeline.span(&part.compute, "compute", "round", Kind::Kernel, || {
                round.replay(&part.compute, g, first, source)
            })?;
        }
        if last + 1 < source.len() {
            for (d, timeline) in timelines.iter_mut().enumerate() {
                pull_halos(parts, rounds, d, last, false, timeline, g.nx)?;
            }
        }
        let devices = parts.iter().zip(rounds.iter_mut()).zip(kernels).zip(timelines.iter_mut());
        for (((part, round), kernel), timeline) in devices {
            let rows = interior(part.band, k);
            timeline.span(&part.compute, "compute", "interior", Kind::Kernel, || {
                launch_rows(&part.compute, kernel, part.band, round.step(last)?, g, rows, source[last])
            })?;
        }
        if (last + 1) % g.snapshot_every == 0 {
            for (part, round) in parts.iter_mut().zip(rounds.iter()) {
                snapshot(part, round, last, (last + 1) / g.snapshot_every - 1, g.nx)?;
            }
        }
    }
    for (step, &src) in source.iter().enumerate().skip(whole * k) {
        let j = step - whole * k + 1;
        for ((part, round), kernel) in parts.iter().zip(rounds.iter_mut()).zip(kernels) {
            launch_rows(&part.compute, kernel, part.band, round.step(step)?, g, part.band.computed(j), src)?;
        }
        if (step + 1) % g.snapshot_every == 0 {
            for (part, round) in parts.iter_mut().zip(rounds.iter()) {
                snapshot(part, round, step, (step + 1) / g.snapshot_every - 1, g.nx)?;
            }
        }
    }
    Ok(())
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

/// Measures the [`Costs`] on the first two of `contexts` with rounds of at
/// most `limit` steps: a step of the first band's own rows, and pulls of
/// two and of `2 * limit` rows of a field from the second device; medians
/// of five after one untimed.
fn measure(
    contexts: &[&Context],
    tuning: &super::Tuning,
    clock: &Clock,
    g: Grid,
    limit: usize,
) -> Result<Costs, Failure> {
    let bands =
        bands(g.ny, contexts.len(), limit).ok_or_else(|| Failure::Internal("too few rows per device".into()))?;
    let (parts, mut fields, kernels) =
        parts(&contexts[..2.min(contexts.len())], tuning, g, &bands[..2.min(bands.len())], Split::Sync)?;
    const REPEATS: usize = 5;
    let time = |stream: &Stream, ctx: &Context, op: &mut dyn FnMut() -> Result<(), Failure>| -> Result<f64, Failure> {
        op()?;
        let times = (0..REPEATS).map(|_| timed(clock, ctx, stream, &mut *op).map(|((), ms)| ms));
        Ok(median(times.collect::<Result<_, _>>()?))
    };
    let first = &parts[0];
    let own = first.band.begin..first.band.end;
    let step_ms = {
        let fields = &mut fields[0];
        time(&first.compute, first.ctx, &mut || {
            launch_rows(&first.compute, &kernels[0], first.band, fields.step(0)?, g, own.clone(), 0.0)
        })?
    };
    let (halo_fixed_ms, halo_row_ms) = match (&parts[..], &mut fields[..]) {
        ([near, _], [mine, theirs]) => {
            let rows = (2 * limit).min(near.band.rows()).max(2);
            let mut pull = |n: usize| -> Result<f64, Failure> {
                time(&near.halos[1], near.ctx, &mut || {
                    let src = theirs.read(0, 0..n * g.nx)?;
                    near.halos[1].copy_peer(src, mine.write(0, 0..n * g.nx)?)?;
                    Ok(())
                })
            };
            let (small, large) = (pull(2)?, pull(rows)?);
            (small, ((large - small) / (rows - 2).max(1) as f64).max(0.0))
        }
        _ => (f64::NAN, f64::NAN),
    };
    Ok(Costs { step_ms, own_rows: own.len(), halo_fixed_ms, halo_row_ms })
}

/// A trial of `split` over `contexts` in rounds of `k` steps, over the
/// first snapshot interval of `g`, or the first two where a round is
/// longer than half of one (a trial then still has an exchange): its time
/// a step (the least of two runs, ms), and how many values of its first
/// snapshot differ from `first` (the single-device run's first snapshot;
/// not compared where it has another length).
fn trial(
    contexts: &[&Context],
    env: &Env<'_>,
    g: Grid,
    source: &[f32],
    split: Split,
    k: usize,
    first: &[f32],
) -> Result<(f64, usize), Failure> {
    let intervals = if 2 * k > g.snapshot_every { 2 } else { 1 };
    let steps = (intervals * g.snapshot_every).min(g.steps);
    let trial = Grid { steps, snapshot_every: g.snapshot_every.min(steps), ..g };
    let source = source.get(..steps).ok_or_else(|| Failure::Internal("fewer source values than steps".into()))?;
    let (mut least, mut differing) = (f64::INFINITY, 0);
    for _ in 0..2 {
        let run = run_split(contexts, env.tuning, env.clock, trial, source, split, k)?;
        least = least.min(run.total_ms / steps as f64);
        if let Some(snapshot) = run.snapshots.get(..first.len()) {
            differing = differing.max(snapshot.iter().zip(first).filter(|(a, b)| a.to_bits() != b.to_bits()).count());
        }
    }
    Ok((least, differing))
}

/// One trial result: the round length, the time a step (ms, NaN where not
/// run) and the snapshot values that differed from the single-device run's.
pub type Tried = (usize, f64, usize);

/// Each of `candidates` (round lengths) tried on all of `contexts`
/// ([`trial`]): the candidate with the least time is the round length. A
/// single candidate is not run (time NaN).
fn try_rounds(
    contexts: &[&Context],
    env: &Env<'_>,
    g: Grid,
    source: &[f32],
    candidates: &[usize],
    first: &[f32],
) -> Result<Vec<Tried>, Failure> {
    if candidates.len() < 2 {
        return Ok(candidates.iter().map(|&k| (k, f64::NAN, 0)).collect());
    }
    let mut tried = Vec::new();
    for &k in candidates {
        let (ms, differing) = trial(contexts, env, g, source, Split::Overlap, k, first)?;
        tried.push((k, ms, differing));
    }
    Ok(tried)
}

/// The first device alone, as `split-overlap` falls back to it, in
/// rounds as long as they may be (one band has no halos to exchange): the
/// time a step of its trials in replayed rounds and with eager launches,
/// and of the fastest single-device variant's run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Alone {
    /// Steps a round.
    pub k: usize,
    /// In replayed rounds ([`Split::Overlap`]), ms a step.
    pub rounds_ms: f64,
    /// With eager launches ([`Split::Sync`]), ms a step.
    pub eager_ms: f64,
    /// The fastest single-device variant ([`SingleRun::best_ms`]), ms a
    /// step; not finite when it cannot be run again ([`SingleRun::rerun_best`]).
    pub variant_ms: f64,
}

/// What the first device runs where `split-overlap` declines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// The split's own schedule on one band.
    Schedule(Split),
    /// The fastest single-device variant, run again.
    Variant,
}

impl Alone {
    /// The fastest of the three: replayed rounds unless eager launches or
    /// the variant were faster (so a time that is not finite never wins).
    pub fn fallback(self) -> Fallback {
        let own = if self.eager_ms < self.rounds_ms { Split::Sync } else { Split::Overlap };
        let own_ms = if own == Split::Sync { self.eager_ms } else { self.rounds_ms };
        if self.variant_ms < own_ms || (own_ms.is_nan() && self.variant_ms.is_finite()) {
            Fallback::Variant
        } else {
            Fallback::Schedule(own)
        }
    }

    /// The fallback's time a step, ms.
    pub fn step_ms(self) -> f64 {
        match self.fallback() {
            Fallback::Schedule(Split::Sync) => self.eager_ms,
            Fallback::Schedule(Split::Overlap) => self.rounds_ms,
            Fallback::Variant => self.variant_ms,
        }
    }
}

/// The first device alone tried as the rounds on all devices were, in
/// replayed rounds and with eager launches, beside `variant_ms`, the
/// fastest single-device variant's time a step ([`Alone`]). `None` where
/// no round was tried on all devices.
fn try_alone(
    contexts: &[&Context],
    env: &Env<'_>,
    g: Grid,
    source: &[f32],
    tried: &[Tried],
    first: &[f32],
    variant_ms: f64,
) -> Result<Option<Alone>, Failure> {
    let longest = round_candidates(halo_steps(g.ny, 1), g.snapshot_every).last().copied();
    let (Some(ctx), Some(k)) = (contexts.first(), longest) else { return Ok(None) };
    if !tried.iter().any(|t| t.1.is_finite()) {
        return Ok(None);
    }
    let time = |split| Ok::<_, Failure>(trial(&[*ctx], env, g, source, split, k, first)?.0);
    Ok(Some(Alone { k, rounds_ms: time(Split::Overlap)?, eager_ms: time(Split::Sync)?, variant_ms }))
}

/// Whether `split-overlap` declines to split: the first device alone
/// (`alone`'s time a step) was faster than every round tried on all devices.
pub fn declines(tried: &[Tried], alone: Option<Alone>) -> bool {
    let best = tried.iter().map(|t| t.1).filter(|ms| ms.is_finite()).reduce(f64::min);
    matches!((best, alone), (Some(best), Some(a)) if a.step_ms() < best)
}

/// The single-device runs a split run is checked and timed against.
pub struct SingleRun<'a> {
    /// The `sync` run's snapshots.
    pub snapshots: &'a [f32],
    /// The `sync` run's device time, ms.
    pub total_ms: Option<f64>,
    /// The `event-sync` run's device time, ms: one device with its
    /// snapshot copies overlapped, as `split-overlap` overlaps them.
    pub overlapped_ms: Option<f64>,
    /// The fastest single-device variant's device time, ms.
    pub best_ms: Option<f64>,
    /// Runs that variant again on the first device: what `split-overlap`
    /// runs where it declines and the variant is the fastest way alone.
    pub rerun_best: Option<&'a dyn Fn() -> Result<OneDevice, Failure>>,
}

/// A single-device run's snapshots, device time (ms) and timeline.
pub type OneDevice = (Vec<f32>, f64, Vec<Interval>);

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
    let limit = halo_steps(g.ny, contexts.len());
    let chosen: Vec<Split> = Split::ALL.into_iter().filter(|s| env.tuning.runs_wave(s.selector())).collect();
    if contexts.len() < 2 || chosen.is_empty() || bands(g.ny, contexts.len(), limit).is_none() {
        return Ok(Vec::new());
    }
    let costs = measure(&contexts, env.tuning, env.clock, g, limit)?;
    let first = single.snapshots.get(..g.cells()).unwrap_or_default();
    let candidates = rounds_to_try(costs, limit, g.snapshot_every);
    let tried = try_rounds(&contexts, env, g, source, &candidates, first)?;
    let k = tried.iter().min_by(|a, b| a.1.total_cmp(&b.1)).map_or(1, |&(k, ..)| k);
    let variant_ms = match (single.best_ms, single.rerun_best) {
        (Some(ms), Some(_)) => ms / g.steps as f64,
        _ => f64::NAN,
    };
    let alone = try_alone(&contexts, env, g, source, &tried, first, variant_ms)?;
    let declined = declines(&tried, alone);
    let mut outcomes = Vec::new();
    for split in chosen {
        let (devices, schedule, k) = match alone {
            Some(a) if declined && split == Split::Overlap => (&contexts[..1], a.fallback(), a.k),
            _ => (&contexts[..], Fallback::Schedule(split), k),
        };
        let run = match (schedule, single.rerun_best) {
            (Fallback::Schedule(schedule), _) => run_split(devices, env.tuning, env.clock, g, source, schedule, k)?,
            (Fallback::Variant, Some(rerun)) => {
                fresh(devices);
                let (snapshots, total_ms, intervals) = rerun()?;
                SplitRun { snapshots, total_ms, enqueue_ms: None, intervals: vec![intervals] }
            }
            (Fallback::Variant, None) => return Err(Failure::Internal("no single-device variant to run".into())),
        };
        let verdict = elementwise(&run.snapshots, expect, |_| tolerance);
        let mut outcome = Outcome::new(split.name(), verdict, Some(run.total_ms))
            .metric("devices", devices.len() as f64)
            .metric("devices_available", contexts.len() as f64)
            .metric("eager_launches", f64::from(u8::from(schedule == Fallback::Schedule(Split::Sync))))
            .metric("single_best_variant", f64::from(u8::from(schedule == Fallback::Variant)))
            .metric("step_ms", costs.step_ms)
            .metric("halo_fixed_ms", costs.halo_fixed_ms)
            .metric("halo_row_ms", costs.halo_row_ms)
            .with_output(super::Output::F32(run.snapshots.clone()));
        for &(k, ms, _) in tried.iter().filter(|t| t.1.is_finite()) {
            outcome.metrics.insert(format!("round_{k}_trial_step_ms"), ms);
        }
        // A single-device variant's run has no halos (its copies are snapshots).
        let own = matches!(schedule, Fallback::Schedule(_));
        if own {
            outcome.metrics.insert("halo_steps".into(), k as f64);
        }
        if let Some(ms) = run.enqueue_ms {
            outcome.metrics.insert("enqueue_ms".into(), ms);
        }
        if let Some(a) = alone {
            outcome.metrics.insert("trial_one_device_step_ms".into(), a.rounds_ms);
            outcome.metrics.insert("trial_one_device_eager_step_ms".into(), a.eager_ms);
        }
        let differing = run.snapshots.iter().zip(single.snapshots).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        if differing > 0 || run.snapshots.len() != single.snapshots.len() {
            outcome.note = Some(format!("{differing} snapshot values differ from the single-device sync run's"));
        } else if let Some(&(k, _, n)) = tried.iter().find(|t| t.2 > 0).filter(|_| split == Split::Overlap) {
            outcome.note = Some(format!(
                "the trial on {} devices in rounds of {k} steps: {n} snapshot values differ from the single-device sync run's",
                contexts.len()
            ));
        }
        let baselines =
            [("single", single.total_ms), ("single_overlapped", single.overlapped_ms), ("single_best", single.best_ms)];
        for (name, ms) in baselines {
            if let Some(ms) = ms {
                outcome.metrics.insert(format!("{name}_ms"), ms);
                outcome.metrics.insert(format!("speedup_vs_{name}"), ms / run.total_ms);
            }
        }
        if env.clock.unavailable().is_none() && own {
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
    use super::{
        Alone, Band, Costs, Fallback, MAX_HALO_STEPS, Split, bands, declines, edges, halo_steps, interior, round_steps,
        rounds_to_try,
    };

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
        assert_eq!(halo_steps(128, 2), 16);
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

    #[test]
    fn a_launch_touches_its_rows_and_two_more_of_u() {
        let b = Band { begin: 40, end: 80, lo: 32, hi: 88 };
        let [out, u] = b.touched(&(48..72), 10);
        assert_eq!((out, u), (160..400, 140..420));
        let [out, u] = b.touched(&(32..88), 10);
        assert_eq!((out, u), (0..560, 0..560), "clipped to the held rows");
    }

    /// The round length trades rows computed twice against exchanges: a
    /// costly exchange makes rounds long, a cheap one short, and the
    /// choice always divides the snapshot interval and stays in the limit.
    #[test]
    fn rounds_are_chosen_from_the_measured_costs() {
        let costs = Costs { step_ms: 0.028, own_rows: 2048, halo_fixed_ms: 0.005, halo_row_ms: 1e-5 };
        let k = round_steps(costs, 64, 100);
        assert!((10..=50).contains(&k) && 100 % k == 0, "{k}");
        let cheap = Costs { halo_fixed_ms: 1e-6, halo_row_ms: 0.0, ..costs };
        assert_eq!(round_steps(cheap, 64, 100), 5, "the shortest that keeps the rotation");
        assert_eq!(round_steps(cheap, 4, 100), 1, "no multiple of five fits: any divisor");
        let dear = Costs { halo_fixed_ms: 1.0, ..costs };
        assert_eq!(round_steps(dear, 64, 100), 50);
        assert_eq!(round_steps(dear, 7, 30), 5, "a multiple of five dividing 30 within 7");
        assert_eq!(round_steps(dear, 4, 30), 3, "a divisor of 30 within 4");
        let unknown = Costs { step_ms: f64::NAN, ..costs };
        assert_eq!(round_steps(unknown, 64, 100), 5, "the longest candidate up to 8");
        assert_eq!(round_steps(unknown, 64, 30), 5);
        assert_eq!(round_steps(costs, 0, 1), 1);
    }

    /// The split declines only where the first device alone beat every
    /// round tried on all devices, and never without a trial.
    #[test]
    fn the_split_declines_only_where_one_device_was_faster() {
        let tried = [(5, 0.020, 0), (10, 0.018, 0), (20, f64::NAN, 0)];
        let alone = |rounds_ms| Some(Alone { k: 100, rounds_ms, eager_ms: f64::NAN, variant_ms: f64::NAN });
        assert!(declines(&tried, alone(0.017)));
        assert!(!declines(&tried, alone(0.018)), "a tie splits");
        assert!(!declines(&tried, alone(0.030)));
        assert!(!declines(&tried, None));
        assert!(!declines(&[(5, f64::NAN, 0)], alone(0.001)), "no round tried on all devices");
        let eager = Some(Alone { k: 100, rounds_ms: 0.030, eager_ms: 0.017, variant_ms: f64::NAN });
        assert_eq!(eager.map(Alone::fallback), Some(Fallback::Schedule(Split::Sync)), "the faster schedule");
        assert!(declines(&tried, eager), "eager launches on one device count as replayed rounds do");
        let variant = Some(Alone { k: 100, rounds_ms: 0.030, eager_ms: 0.025, variant_ms: 0.012 });
        assert_eq!(variant.map(Alone::fallback), Some(Fallback::Variant), "the single-device variant was faster");
        assert!(declines(&tried, variant), "a single-device variant faster than every round declines");
        let only_variant = Some(Alone { k: 100, rounds_ms: f64::NAN, eager_ms: f64::NAN, variant_ms: 0.012 });
        assert_eq!(only_variant.map(Alone::fallback), Some(Fallback::Variant));
        let slower = Some(Alone { k: 100, rounds_ms: 0.030, eager_ms: 0.025, variant_ms: 0.026 });
        assert_eq!(slower.map(Alone::fallback), Some(Fallback::Schedule(Split::Sync)));
    }

    /// The model's choice is run beside the next longer candidates, never
    /// shorter ones, and only candidates the model allows.
    #[test]
    fn the_rounds_tried_are_the_models_and_longer() {
        let dear = Costs { step_ms: 0.028, own_rows: 2048, halo_fixed_ms: 1.0, halo_row_ms: 1e-5 };
        assert_eq!(rounds_to_try(dear, 128, 100), vec![100], "nothing longer to try");
        assert_eq!(rounds_to_try(dear, 64, 100), vec![50]);
        let costs = Costs { halo_fixed_ms: 0.005, ..dear };
        let tried = rounds_to_try(costs, 128, 100);
        assert_eq!(tried[0], round_steps(costs, 128, 100));
        assert!(tried.windows(2).all(|w| w[0] < w[1]) && tried.len() <= 3 && tried.len() >= 2, "{tried:?}");
        let cheap = Costs { halo_fixed_ms: 1e-6, halo_row_ms: 0.0, ..dear };
        assert_eq!(rounds_to_try(cheap, 128, 100), vec![5, 10, 20]);
        assert_eq!(rounds_to_try(cheap, 4, 30), vec![1, 2, 3]);
    }
}
