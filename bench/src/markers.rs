//! What a profiler range costs when no profiler is attached, against the
//! typed layer's cheapest enqueue measured in the same run (every typed
//! operation opens one range: `hetero::markers`).

use std::hint::black_box;
use std::time::Instant;

use crate::measure::median;
use crate::{Op, PathResult};

/// Ranges per timed round.
const RANGES: u32 = 200_000;

/// A range's cost and its share of an operation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MarkerCost {
    /// The profiler the ranges reach (`none` when nothing is attached).
    pub profiler: String,
    /// Nanoseconds to open and close one range (median of the rounds).
    pub ns_per_range: f64,
    /// The cheapest of the `hetero-untimed` path's operations that open a
    /// range (launch, copies), and its cost.
    pub cheapest_op: String,
    pub cheapest_us: f64,
    /// `ns_per_range` as a fraction of `cheapest_us`.
    pub share: f64,
}

/// Times `rounds` rounds of opening and closing a range, after one untimed.
pub fn measure(rounds: usize, paths: &[PathResult]) -> Option<MarkerCost> {
    let profiler = match hetero::markers::profiler() {
        Ok(p) => p.to_string(),
        Err(e) => format!("none ({e})"),
    };
    let round = || {
        let start = Instant::now();
        for _ in 0..RANGES {
            drop(black_box(hetero::markers::range(black_box(c"hetero bench"))));
        }
        start.elapsed().as_secs_f64() * 1e9 / f64::from(RANGES)
    };
    round();
    let ns_per_range = median(&(0..rounds.max(1)).map(|_| round()).collect::<Vec<_>>());
    let untimed = paths.iter().find(|p| p.path == "hetero-untimed")?;
    let (op, cost) = untimed
        .costs
        .iter()
        .filter(|(op, c)| matches!(op, Op::Launch | Op::CopyH2d | Op::CopyD2h) && c.median_us > 0.0)
        .min_by(|a, b| a.1.median_us.total_cmp(&b.1.median_us))?;
    Some(MarkerCost {
        profiler,
        ns_per_range,
        cheapest_op: op.name().to_string(),
        cheapest_us: cost.median_us,
        share: ns_per_range / (cost.median_us * 1e3),
    })
}
