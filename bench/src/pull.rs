//! The conformance suite's pull workload on this device: device time per
//! batch, measured (lanes without timing or per-operation events) and
//! instrumented (events around every operation), for one and four streams.

use conformance::workloads::{Env, Size, Tuning, pull};
use hetero::Context;

use crate::measure::Fail;

/// One pull variant's time per batch.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PullCost {
    /// Variant, e.g. `streams-4`.
    pub variant: String,
    /// Batches in the run.
    pub batches: f64,
    /// Device milliseconds of the measured run (the median run where
    /// there were several); host wall-clock milliseconds where
    /// `host_wall_clock` (the framework-style variants).
    pub device_ms: f64,
    /// The time is host wall-clock time, not device time.
    pub host_wall_clock: bool,
    /// Device milliseconds of every run, in order.
    pub runs_ms: Vec<f64>,
    /// Device microseconds per batch of the measured run.
    pub us_per_batch: f64,
    /// Device microseconds per batch with per-operation events, for the
    /// variants that run instrumented.
    pub instrumented_us_per_batch: Option<f64>,
}

/// Runs pull at `size` (checked against its reference like in `conform`).
pub fn run(ctx: &Context, size: Size) -> Result<Vec<PullCost>, Fail> {
    let tuning = Tuning { pull_streams: vec![1, 4], pull_threads: Vec::new(), ..Tuning::default() };
    let clock = conformance::clock::probe(ctx);
    let env = Env { ctx, size, seed: 1, dump: None, tuning: &tuning, clock: &clock, peers: &[] };
    let outcomes = pull::run(&env).map_err(|e| format!("pull: {e}"))?;
    outcomes
        .into_iter()
        .map(|o| {
            if !o.passed() {
                return Err(format!("pull {} failed its check", o.variant).into());
            }
            let batches = o.metrics.get("batches").copied().unwrap_or(0.0).max(1.0);
            let device_ms = o.device_ms.ok_or("pull reported no time")?;
            let instrumented = o.metrics.get("instrumented_ms").copied();
            let host_wall_clock = o.metrics.contains_key("host_wall_clock") || clock.unavailable().is_some();
            Ok(PullCost {
                variant: o.variant,
                batches,
                device_ms,
                host_wall_clock,
                runs_ms: vec![device_ms],
                us_per_batch: device_ms * 1e3 / batches,
                instrumented_us_per_batch: instrumented.map(|ms| ms * 1e3 / batches),
            })
        })
        .collect()
}

/// One result per variant from several runs of [`run`]: the run with the
/// median device time stands for each variant, and every run's time is kept.
pub fn median(runs: Vec<Vec<PullCost>>) -> Vec<PullCost> {
    let Some(first) = runs.first() else { return Vec::new() };
    first
        .iter()
        .map(|v| {
            let mut same: Vec<&PullCost> =
                runs.iter().filter_map(|r| r.iter().find(|p| p.variant == v.variant)).collect();
            let runs_ms = same.iter().map(|p| p.device_ms).collect();
            same.sort_by(|a, b| a.device_ms.total_cmp(&b.device_ms));
            PullCost { runs_ms, ..same[same.len() / 2].clone() }
        })
        .collect()
}
