//! Per-operation host cost: the median over rounds of (host time of a
//! round) / (operations in it), after warm-up rounds.
//!
//! Host clocks are the right tool here: what is measured is how long the
//! *host* spends to enqueue (or complete) an operation, not device time.

use std::time::Instant;

/// Rounds and operations per round.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Untimed rounds first.
    pub warmup: usize,
    /// Timed rounds.
    pub rounds: usize,
}

/// The median and the fastest round, in microseconds per operation.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Cost {
    /// Median over the timed rounds.
    pub median_us: f64,
    /// Fastest timed round.
    pub min_us: f64,
}

/// Runs `round(n)` (which must do `n` operations, each to the point the
/// measurement is about, and leave the device idle afterwards only if
/// `settle` says so) and returns the cost per operation.
pub fn per_op<E>(
    plan: Plan,
    n: usize,
    mut round: impl FnMut(usize) -> Result<(), E>,
    mut settle: impl FnMut() -> Result<(), E>,
) -> Result<Cost, E> {
    for _ in 0..plan.warmup {
        round(n)?;
        settle()?;
    }
    let mut samples = Vec::with_capacity(plan.rounds);
    for _ in 0..plan.rounds.max(1) {
        let start = Instant::now();
        round(n)?;
        samples.push(start.elapsed().as_secs_f64() * 1e6 / n as f64);
        settle()?;
    }
    samples.sort_by(f64::total_cmp);
    Ok(Cost { median_us: samples[samples.len() / 2], min_us: samples[0] })
}
