//! Per-operation host cost: the median over rounds of (host time of a
//! round) / (operations in it), after warm-up rounds.
//!
//! Host clocks are the right tool here: what is measured is how long the
//! *host* spends to enqueue (or complete) an operation, not device time.
//!
//! Every path of every device is measured **interleaved**: each round of
//! an operation runs once through each path, in an order that rotates
//! from round to round. A noisy stretch of the machine (another tenant, a
//! frequency change) then lands on every path alike instead of on
//! whichever backend happened to be measured during it, so the ratios
//! between paths and between backends come from the same moments.

use std::time::Instant;

use crate::Op;

/// Rounds and operations per round.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Untimed rounds first.
    pub warmup: usize,
    /// Timed rounds.
    pub rounds: usize,
    /// Operations per round of the enqueue-only operations ([`Op::count`]).
    pub enqueues: usize,
}

/// The median and the fastest round, in microseconds per operation.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Cost {
    /// Median over the timed rounds.
    pub median_us: f64,
    /// Fastest timed round.
    pub min_us: f64,
}

/// The median of `values` (the upper one of an even count; NaN if empty).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Why a path could not run.
pub type Fail = Box<dyn std::error::Error>;

/// One way of doing the operations of [`Op::ALL`] on one device.
pub trait Path {
    /// Does operation number `i` of a round of `op` (to the point the
    /// measurement is about: enqueued, or waited for where the op says so).
    fn run(&mut self, op: Op, i: usize) -> Result<(), Fail>;
    /// Waits until the device is idle (untimed, after each round).
    fn settle(&mut self) -> Result<(), Fail>;
}

/// A named path of one device, and what measuring it gave.
pub struct Entry<'a> {
    /// Index of the device the path belongs to.
    pub device: usize,
    /// The path's name (`hetero`, `raw`, ...).
    pub name: &'static str,
    /// The hetero path it is compared with.
    pub against: &'static str,
    /// The path itself.
    pub path: Box<dyn Path + 'a>,
    /// Cost per operation measured so far.
    pub costs: Vec<(Op, Cost)>,
    /// Why the path stopped, if it failed (it is then measured no further).
    pub error: Option<String>,
}

impl<'a> Entry<'a> {
    /// A path of device `device` not measured yet.
    pub fn new(device: usize, name: &'static str, against: &'static str, path: Box<dyn Path + 'a>) -> Self {
        Entry { device, name, against, path, costs: Vec::new(), error: None }
    }
}

/// One round of `op` through `path`: microseconds per operation.
fn round(path: &mut dyn Path, op: Op, enqueues: usize) -> Result<f64, Fail> {
    let n = op.count(enqueues);
    let start = Instant::now();
    for i in 0..n {
        path.run(op, i)?;
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    path.settle()?;
    Ok(us)
}

/// Measures every operation through every path, interleaved (module doc).
/// A path that fails keeps its error and is skipped from then on.
pub fn measure(entries: &mut [Entry<'_>], plan: Plan) {
    let count = entries.len();
    for op in Op::ALL {
        let mut samples = vec![Vec::with_capacity(plan.rounds); count];
        for r in 0..plan.warmup + plan.rounds.max(1) {
            for k in 0..count {
                let at = (k + r) % count;
                let entry = &mut entries[at];
                if entry.error.is_some() || (op.hetero_only() && entry.name != entry.against) {
                    continue;
                }
                match round(&mut *entry.path, op, plan.enqueues) {
                    Ok(us) if r >= plan.warmup => samples[at].push(us),
                    Ok(_) => {}
                    Err(e) => entry.error = Some(format!("{op:?}: {e}")),
                }
            }
        }
        for (entry, mut s) in entries.iter_mut().zip(samples) {
            if entry.error.is_some() || s.is_empty() {
                continue;
            }
            s.sort_by(f64::total_cmp);
            entry.costs.push((op, Cost { median_us: s[s.len() / 2], min_us: s[0] }));
        }
    }
}

/// The median of the host times of `rounds` runs of `round`, after one untimed.
pub fn median_us(rounds: usize, round: &mut dyn FnMut() -> Result<(), Fail>) -> Result<f64, Fail> {
    round()?;
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        let start = Instant::now();
        round()?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(&times))
}
