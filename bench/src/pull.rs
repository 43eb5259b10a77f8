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
    /// Device milliseconds of the measured run.
    pub device_ms: f64,
    /// Device microseconds per batch of the measured run.
    pub us_per_batch: f64,
    /// Device microseconds per batch with per-operation events.
    pub instrumented_us_per_batch: f64,
}

/// Runs pull at `size` (checked against its reference like in `conform`).
pub fn run(ctx: &Context, size: Size) -> Result<Vec<PullCost>, Fail> {
    let tuning = Tuning { pull_streams: vec![1, 4], ..Tuning::default() };
    let env = Env { ctx, size, seed: 1, dump: None, tuning: &tuning };
    let outcomes = pull::run(&env).map_err(|e| format!("pull: {e}"))?;
    outcomes
        .into_iter()
        .map(|o| {
            if !o.passed() {
                return Err(format!("pull {} failed its check", o.variant).into());
            }
            let batches = o.metrics.get("batches").copied().unwrap_or(0.0).max(1.0);
            let device_ms = o.device_ms.ok_or("pull reported no time")?;
            let instrumented = o.metrics.get("instrumented_ms").copied().unwrap_or(f64::NAN);
            Ok(PullCost {
                variant: o.variant,
                batches,
                device_ms,
                us_per_batch: device_ms * 1e3 / batches,
                instrumented_us_per_batch: instrumented * 1e3 / batches,
            })
        })
        .collect()
}
