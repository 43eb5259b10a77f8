//! Per-operation host cost: the median over rounds of (host time of a
//! round) / (operations in it), after warm-up rounds.
//!
//! Host clocks are the right tool here: what is measured is how long the
//! *host* spends to enqueue (or complete) an operation, not device time.

use std::time::Instant;

use crate::Op;

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

/// The cost of every operation through `path`.
pub fn measure(path: &mut impl Path, plan: Plan) -> Result<Vec<(Op, Cost)>, Fail> {
    let mut costs = Vec::new();
    for op in Op::ALL {
        let n = op.count();
        let mut samples = Vec::with_capacity(plan.rounds);
        for round in 0..plan.warmup + plan.rounds.max(1) {
            let start = Instant::now();
            for i in 0..n {
                path.run(op, i)?;
            }
            let us = start.elapsed().as_secs_f64() * 1e6 / n as f64;
            path.settle()?;
            if round >= plan.warmup {
                samples.push(us);
            }
        }
        samples.sort_by(f64::total_cmp);
        costs.push((op, Cost { median_us: samples[samples.len() / 2], min_us: samples[0] }));
    }
    Ok(costs)
}
