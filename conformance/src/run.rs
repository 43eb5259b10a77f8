//! Running the selected workloads on one device.

use hetero::Context;

use crate::dump::Dump;
use crate::report::{DeviceReport, ResultRecord, Run};
use crate::workloads::{self, Env, Size, Workload};

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
}

/// Runs every selected workload on `ctx`; `on_result` sees each record as it is made.
///
/// First it measures the device's own copy bandwidth (device to device,
/// bytes read plus written), the baseline that every `gbps` figure is also
/// given as a fraction of (`of_d2d`).
pub fn run_device(ctx: &Context, selection: &Selection, mut on_result: impl FnMut(&ResultRecord)) -> Run {
    let env = Env { ctx, size: selection.size, seed: selection.seed, dump: selection.dump.as_ref() };
    let d2d_gbps = workloads::copy_bandwidth(ctx, selection.size).ok();
    let mut results = Vec::new();
    for &workload in &selection.workloads {
        let outcome = match workload {
            Workload::Reduce => workloads::reduce::run(&env),
            Workload::Scan => workloads::scan::run(&env),
            Workload::Pull => workloads::pull::run(&env),
            Workload::Wave => workloads::wave::run(&env),
        };
        let records = match outcome {
            Ok(outcomes) => outcomes.iter().map(|o| ResultRecord::from_outcome(workload, selection.size, o)).collect(),
            Err(failure) => vec![ResultRecord::failure(workload, selection.size, failure.to_string())],
        };
        for record in records {
            on_result(&record);
            results.push(record);
        }
    }
    Run { backend: ctx.info().backend.name().to_string(), device: DeviceReport::from(ctx.info()), d2d_gbps, results }
}
