//! Running the selected workloads on one device.

use hetero::Context;

use std::collections::HashMap;

use crate::dump::Dump;
use crate::report::{Comparison, DeviceReport, PeerCheck, ResultRecord, Run};
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

/// The first device of each backend and its outputs: the run's first
/// device is the one every later device is compared with; a backend's
/// first is the one later devices of that backend and model must agree
/// with (node health).
#[derive(Debug, Default)]
pub struct Baseline {
    /// By backend name.
    firsts: HashMap<String, Peer>,
    /// The backend of the run's first device.
    first_backend: Option<String>,
}

/// The first device of a backend, as later devices are checked against it.
#[derive(Debug)]
struct Peer {
    label: String,
    name: String,
    outputs: HashMap<(Workload, String), Output>,
    /// Device times of the same results, ms, where timed.
    times: HashMap<(Workload, String), f64>,
}

impl Peer {
    /// Why an output under `key` cannot be compared with this device's:
    /// it ran the variant on another schedule (a balanced wave's snapshot
    /// interval); `None` when it did not run the variant at all.
    fn other_schedule(&self, key: &(Workload, String)) -> Option<String> {
        let (variant, mine) = split_schedule(&key.1);
        let theirs = self.outputs.keys().find_map(|(workload, other)| {
            let (base, every) = split_schedule(other);
            (*workload == key.0 && base == variant).then_some(every)
        })?;
        let steps = |every: Option<&str>| {
            every.map_or("no snapshot interval".to_string(), |k| format!("a snapshot every {k} steps"))
        };
        Some(format!(
            "not compared with {}: it ran {variant} with {}, this run with {} (a balanced variant picks its interval per device, and outputs of different intervals differ)",
            self.label,
            steps(theirs),
            steps(mine)
        ))
    }
}

/// A comparison key's variant and snapshot interval (`balanced-sync every 8`).
fn split_schedule(key: &str) -> (&str, Option<&str>) {
    match key.split_once(" every ") {
        Some((variant, every)) => (variant, Some(every)),
        None => (key, None),
    }
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Runs every selected workload on `ctx`; `on_result` sees each record as it is made.
/// `peers` are the other selected devices of its backend when `ctx` is the
/// first of them (wave's split variants run across all), else empty.
///
/// First it finds out whether the device's timer works ([`crate::clock`]);
/// then it measures the device's own copy bandwidth (device to device,
/// bytes read plus written), the baseline that every `gbps` figure is also
/// given as a fraction of (`of_d2d`). The first device run with a
/// `baseline` keeps its outputs there; results of later devices carry a
/// comparison with them.
pub fn run_device(
    ctx: &Context,
    peers: &[Context],
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
        peers,
    };
    let info = ctx.info();
    let on = |phase: &str| format!("conform {phase} {} on {} #{}", selection.size.name(), info.backend, info.ordinal);
    let d2d_gbps = {
        let _phase = hetero::markers::range_named(|| on("copy bandwidth"));
        workloads::copy_bandwidth(ctx, &clock, selection.size).ok().filter(|g| g.is_finite() && *g > 0.0)
    };
    let backend = info.backend.name().to_string();
    let first = baseline.first_backend.is_none();
    let backend_first = !baseline.firsts.contains_key(&backend);
    if backend_first {
        let label = format!("{} ({} #{})", info.backend, info.name, info.ordinal);
        baseline.firsts.insert(
            backend.clone(),
            Peer { label, name: info.name.clone(), outputs: HashMap::new(), times: HashMap::new() },
        );
    }
    if first {
        baseline.first_backend = Some(backend.clone());
    }
    let mut results = Vec::new();
    for &workload in &selection.workloads {
        let phase = hetero::markers::range_named(|| on(workload.name()));
        let outcome = match workload {
            Workload::Reduce => workloads::reduce::run(&env),
            Workload::Scan => workloads::scan::run(&env),
            Workload::Pull => workloads::pull::run(&env),
            Workload::Wave => workloads::wave::run(&env),
            Workload::Bandwidth => workloads::bandwidth::run(&env),
            Workload::Sort => workloads::sort::run(&env),
        };
        drop(phase);
        let records = match outcome {
            Ok(mut outcomes) => {
                if clock.unavailable().is_some() {
                    for o in &mut outcomes {
                        o.metrics.insert("host_wall_clock".into(), 1.0);
                    }
                }
                let exact = selection.tuning.deterministic;
                let device = Device { backend: &backend, name: &info.name, first, backend_first, exact };
                outcomes.into_iter().map(|o| record(workload, selection.size, o, d2d_gbps, device, baseline)).collect()
            }
            Err(failure) => vec![ResultRecord::failure(workload, selection.size, failure.to_string())],
        };
        for record in records {
            on_result(&record);
            results.push(record);
        }
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

/// The device a record is made for, as the comparisons need it.
#[derive(Clone, Copy)]
struct Device<'a> {
    backend: &'a str,
    name: &'a str,
    /// The first device of the run: every later device is compared with it.
    first: bool,
    /// The first device of its backend: later ones must agree with it.
    backend_first: bool,
    /// The deterministic mode: every output must be the same bits as the
    /// run's first device's, whatever the backend or model.
    exact: bool,
}

/// The record of one outcome, with its bandwidth ratio and its comparison
/// with the baseline (or its output kept as the baseline). A device of the
/// same backend and model as the one its outputs are checked against must
/// agree with it: exactly, or within the outcome's `spread` where the
/// variant is not deterministic (atomic sums); otherwise the record fails.
fn record(
    workload: Workload,
    size: Size,
    mut outcome: workloads::Outcome,
    d2d_gbps: Option<f64>,
    device: Device<'_>,
    baseline: &mut Baseline,
) -> ResultRecord {
    if let (Some(gbps), Some(base)) = (outcome.metrics.get("gbps").copied(), d2d_gbps) {
        outcome.metrics.insert("of_d2d".to_string(), gbps / base);
    }
    let mut record = ResultRecord::from_outcome(workload, size, &outcome);
    // Outputs compare only between runs of one schedule: a balanced wave
    // run's snapshot interval is each device's own choice.
    let schedule = outcome.metrics.get("snapshot_every").map_or(String::new(), |k| format!(" every {k}"));
    let key = (workload, format!("{}{schedule}", outcome.variant));
    let Some(output) = outcome.output.take() else { return record };
    let mut skipped = Vec::new();
    let first_of_run = baseline.first_backend.as_ref().and_then(|b| baseline.firsts.get(b));
    if let Some(reference) = first_of_run.filter(|_| !device.first) {
        match reference.outputs.get(&key) {
            Some(outputs) => {
                record.comparison = output.difference(outputs).map(|(abs, rel)| Comparison {
                    against: reference.label.clone(),
                    max_abs: finite(abs),
                    max_rel: finite(rel),
                });
                if device.exact
                    && let Some(difference) = output.first_difference(outputs)
                {
                    record.passed = false;
                    record.note = Some(format!(
                        "output differs from {}'s: {difference} (the deterministic mode promises the same bits)",
                        reference.label
                    ));
                }
            }
            None => skipped.extend(reference.other_schedule(&key)),
        }
    }
    // Its peer: its backend's first device, where that is of its model.
    let peer_device = baseline.firsts.get(device.backend).filter(|p| !device.backend_first && p.name == device.name);
    let peer = peer_device.and_then(|p| {
        let time_ratio = p.times.get(&key).zip(record.device_ms).map(|(theirs, mine)| mine / theirs);
        p.outputs.get(&key).map(|o| (p.label.clone(), o.difference(&output), time_ratio.filter(|r| r.is_finite())))
    });
    if peer.is_none()
        && let Some(p) = peer_device
        && first_of_run.is_none_or(|f| f.label != p.label)
    {
        skipped.extend(p.other_schedule(&key));
    }
    if !skipped.is_empty() {
        record.not_compared = Some(skipped.join("; "));
    }
    if let Some((label, difference, time_ratio)) = peer {
        // Exactly, or as far as two correct outputs may differ.
        let allowed = outcome.spread;
        record.peer = Some(PeerCheck {
            against: label.clone(),
            max_abs: difference.and_then(|(abs, _)| finite(abs)),
            max_rel: difference.and_then(|(_, rel)| finite(rel)),
            allowed,
            agree: difference.is_some_and(|(abs, _)| abs <= allowed),
            time_ratio,
        });
        match difference {
            Some((abs, _)) if abs <= allowed => {}
            Some((abs, _)) => {
                record.passed = false;
                record.note = Some(format!(
                    "output differs from its peer {label} by up to {abs:e} (allowed {allowed:e}): devices of one model must agree"
                ));
            }
            None => {
                record.passed = false;
                record.note = Some(format!("output has another shape than its peer {label}'s"));
            }
        }
    }
    if device.backend_first
        && let Some(first) = baseline.firsts.get_mut(device.backend)
    {
        if let Some(ms) = record.device_ms {
            first.times.insert(key.clone(), ms);
        }
        first.outputs.insert(key, output);
    }
    record
}

#[cfg(test)]
mod tests {
    use super::{Baseline, Device, Peer, record};
    use crate::check::Verdict;
    use crate::workloads::{Outcome, Output, Size, Workload};

    fn outcome(variant: &str, value: f32, spread: f64) -> Outcome {
        let mut o = Outcome::new(variant, Verdict { error: 0.0, tolerance: 1e-4 }, Some(1.0))
            .with_output(Output::F32(vec![value]));
        o.spread = spread;
        o
    }

    /// Node health: a device whose output differs from its peer's (same
    /// backend and model) fails the check, exactly for a deterministic
    /// variant and beyond its spread for an atomic one; a device of another
    /// model is only compared, never failed. The spread is the compared
    /// output's own, not the verdict's tolerance (here 1e-4), which may come
    /// from another, smaller output of the variant: two H200s' atomic sums
    /// of 2^24 floats differed by 2e-3, within the full sum's spread, and
    /// were failed against a shorter sum's tolerance of 5e-4.
    #[test]
    fn devices_of_one_model_must_agree() {
        let mut baseline = Baseline { first_backend: Some("host".into()), ..Baseline::default() };
        let peer = Peer {
            label: "host (cpu #0)".into(),
            name: "cpu".into(),
            outputs: Default::default(),
            times: Default::default(),
        };
        baseline.firsts.insert("host".into(), peer);
        let first = Device { backend: "host", name: "cpu", first: true, backend_first: true, exact: false };
        let later = Device { first: false, backend_first: false, ..first };
        let other = Device { name: "other cpu", ..later };
        let size = Size::Small;
        for (variant, spread) in [("exact", 0.0), ("atomic", 2e-3)] {
            let r = record(Workload::Reduce, size, outcome(variant, 1.0, spread), None, first, &mut baseline);
            assert!(r.passed);
        }
        let same = record(Workload::Reduce, size, outcome("exact", 1.0, 0.0), None, later, &mut baseline);
        assert!(same.passed, "{:?}", same.note);
        let same_peer = same.peer.expect("compared with its peer, as data");
        assert!(same_peer.agree && same_peer.max_abs == Some(0.0) && same_peer.time_ratio == Some(1.0));
        let differs = record(Workload::Reduce, size, outcome("exact", 1.0001, 0.0), None, later, &mut baseline);
        let peer = differs.peer.clone().expect("compared with its peer");
        assert!(!peer.agree && peer.allowed == 0.0 && peer.max_abs.is_some_and(|d| d > 0.0), "{peer:?}");
        assert!(!differs.passed && differs.note.is_some_and(|n| n.contains("differs from its peer")));
        let close = record(Workload::Reduce, size, outcome("atomic", 1.001, 2e-3), None, later, &mut baseline);
        assert!(close.passed, "within the spread, beyond twice the verdict's tolerance: {:?}", close.note);
        let far = record(Workload::Reduce, size, outcome("atomic", 1.01, 2e-3), None, later, &mut baseline);
        assert!(!far.passed);
        let model = record(Workload::Reduce, size, outcome("exact", 2.0, 0.0), None, other, &mut baseline);
        assert!(model.passed && model.comparison.is_some_and(|c| c.max_abs == Some(1.0)));
    }

    /// Guards against failing two healthy devices that chose different
    /// schedules: two H200s of one node timed a snapshot copy at 20 and 21
    /// steps and ran their balanced wave with those intervals, whose
    /// snapshots are of different steps; they were failed as disagreeing.
    /// Runs of one schedule are still compared.
    #[test]
    fn devices_compare_only_runs_of_one_schedule() {
        let mut baseline = Baseline { first_backend: Some("cuda".into()), ..Baseline::default() };
        let peer = Peer {
            label: "cuda (H200 #0)".into(),
            name: "H200".into(),
            outputs: Default::default(),
            times: Default::default(),
        };
        baseline.firsts.insert("cuda".into(), peer);
        let first = Device { backend: "cuda", name: "H200", first: true, backend_first: true, exact: false };
        let later = Device { first: false, backend_first: false, ..first };
        let balanced = |value: f32, every: f64| {
            let mut o = outcome("balanced-sync", value, 0.0);
            o.metrics.insert("snapshot_every".into(), every);
            o
        };
        let size = Size::Large;
        assert!(record(Workload::Wave, size, balanced(1.0, 20.0), None, first, &mut baseline).passed);
        let other = record(Workload::Wave, size, balanced(0.5, 21.0), None, later, &mut baseline);
        assert!(other.passed && other.comparison.is_none(), "{:?}", other.note);
        let why = other.not_compared.unwrap_or_default();
        assert!(why.contains("every 20 steps") && why.contains("every 21 steps"), "{why}");
        let same = record(Workload::Wave, size, balanced(0.5, 20.0), None, later, &mut baseline);
        assert!(!same.passed, "one schedule, different snapshots");
    }

    /// The deterministic mode compares every backend and model with the
    /// run's first device bit for bit: a difference of one ulp on another
    /// backend fails, naming the element; the same bits pass and carry the
    /// same digest.
    #[test]
    fn the_deterministic_mode_wants_the_same_bits_everywhere() {
        let mut baseline = Baseline { first_backend: Some("host".into()), ..Baseline::default() };
        let peer = Peer {
            label: "host (cpu #0)".into(),
            name: "cpu".into(),
            outputs: Default::default(),
            times: Default::default(),
        };
        baseline.firsts.insert("host".into(), peer);
        let first = Device { backend: "host", name: "cpu", first: true, backend_first: true, exact: true };
        let gpu = Device { backend: "cuda", name: "H100", first: false, backend_first: true, exact: true };
        let size = Size::Small;
        let a = record(Workload::Reduce, size, outcome("fixed-256", 1.0, 0.0), None, first, &mut baseline);
        let b = record(Workload::Reduce, size, outcome("fixed-256", 1.0, 0.0), None, gpu, &mut baseline);
        assert!(a.passed && b.passed, "{:?}", b.note);
        assert_eq!(a.digest, b.digest);
        assert_eq!(a.digest.as_deref().map(str::len), Some(64));
        let next = f32::from_bits(1.0f32.to_bits() + 1);
        let c = record(Workload::Reduce, size, outcome("fixed-256", next, 0.0), None, gpu, &mut baseline);
        assert!(!c.passed);
        assert!(c.note.is_some_and(|n| n.contains("element 0")), "names the element");
        assert_ne!(a.digest, c.digest);
    }
}
