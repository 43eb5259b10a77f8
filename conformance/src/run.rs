//! Running the selected workloads on one device.

use hetero::Context;

use std::collections::HashMap;

use crate::dump::Dump;
use crate::report::{Comparison, DeviceReport, ResultRecord, Run};
use crate::workloads::{self, Env, Output, Size, Workload};

/// What to run.
#[derive(Debug, Clone)]
pub struct Selection {
    /// Workloads, in order.
    pub workloads: Vec<Workload>,
    /// Size class.
    pub size: Size,
    /// Seed of the inputs.
    pub seed: u64,
    /// Where to dump arrays.
    pub dump: Option<Dump>,
    /// Workload parameters beyond the size class.
    pub tuning: workloads::Tuning,
}

/// The first device's outputs, which later devices are compared with.
#[derive(Debug, Default)]
pub struct Baseline {
    label: Option<String>,
    outputs: HashMap<(Workload, String), Output>,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Runs every selected workload on `ctx`; `on_result` sees each record as it is made.
///
/// First it finds out whether the device's timer works ([`crate::clock`]);
/// then it measures the device's own copy bandwidth (device to device,
/// bytes read plus written), the baseline that every `gbps` figure is also
/// given as a fraction of (`of_d2d`). The first device run with a
/// `baseline` keeps its outputs there; results of later devices carry a
/// comparison with them.
pub fn run_device(
    ctx: &Context,
    selection: &Selection,
    baseline: &mut Baseline,
    mut on_result: impl FnMut(&ResultRecord),
) -> Run {
    let clock = crate::clock::probe(ctx);
    let env = Env {
        ctx,
        size: selection.size,
        seed: selection.seed,
        dump: selection.dump.as_ref(),
        tuning: &selection.tuning,
        clock: &clock,
    };
    let d2d_gbps = workloads::copy_bandwidth(ctx, &clock, selection.size).ok().filter(|g| g.is_finite() && *g > 0.0);
    let first = baseline.label.is_none();
    let mut results = Vec::new();
    for &workload in &selection.workloads {
        let outcome = match workload {
            Workload::Reduce => workloads::reduce::run(&env),
            Workload::Scan => workloads::scan::run(&env),
            Workload::Pull => workloads::pull::run(&env),
            Workload::Wave => workloads::wave::run(&env),
        };
        let records = match outcome {
            Ok(mut outcomes) => {
                if clock.unavailable().is_some() {
                    for o in &mut outcomes {
                        o.metrics.insert("host_wall_clock".into(), 1.0);
                    }
                }
                outcomes.into_iter().map(|o| record(workload, selection.size, o, d2d_gbps, first, baseline)).collect()
            }
            Err(failure) => vec![ResultRecord::failure(workload, selection.size, failure.to_string())],
        };
        for record in records {
            on_result(&record);
            results.push(record);
        }
    }
    if first {
        let info = ctx.info();
        baseline.label = Some(format!("{} ({} #{})", info.backend, info.name, info.ordinal));
    }
    Run {
        backend: ctx.info().backend.name().to_string(),
        device: DeviceReport::from(ctx.info()),
        d2d_gbps,
        device_timing_unavailable: clock.unavailable().map(str::to_string),
        baseline: None,
        results,
    }
}

/// The record of one outcome, with its bandwidth ratio and its comparison
/// with the baseline (or its output kept as the baseline).
fn record(
    workload: Workload,
    size: Size,
    mut outcome: workloads::Outcome,
    d2d_gbps: Option<f64>,
    first: bool,
    baseline: &mut Baseline,
) -> ResultRecord {
    if let (Some(gbps), Some(base)) = (outcome.metrics.get("gbps").copied(), d2d_gbps) {
        outcome.metrics.insert("of_d2d".to_string(), gbps / base);
    }
    let mut record = ResultRecord::from_outcome(workload, size, &outcome);
    let key = (workload, outcome.variant.clone());
    match outcome.output.take() {
        Some(output) if first => {
            baseline.outputs.insert(key, output);
        }
        Some(output) => {
            if let (Some(against), Some(reference)) = (&baseline.label, baseline.outputs.get(&key)) {
                record.comparison = output.difference(reference).map(|(abs, rel)| Comparison {
                    against: against.clone(),
                    max_abs: finite(abs),
                    max_rel: finite(rel),
                });
            }
        }
        None => {}
    }
    record
}
