//! The JSON report (schema documented in `docs/report-schema.md`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::workloads::{Outcome, Size, Workload};

/// Version of the report layout; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything one `conform` invocation found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// hetero version that produced the report.
    pub hetero_version: String,
    /// Seed of the inputs.
    pub seed: u64,
    /// Size class of every result.
    pub size: Size,
    /// One entry per device run.
    pub runs: Vec<Run>,
    /// Backends that were asked for (or probed by `auto`) but could not run.
    pub unavailable: Vec<Unavailable>,
}

/// The results of one device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// Backend name: host, opencl, cuda or hip.
    pub backend: String,
    /// The device.
    pub device: DeviceReport,
    /// Device-to-device copy bandwidth in GB/s, bytes read plus written:
    /// the baseline of the workloads' `gbps` figures (`null` if not measured).
    #[serde(default)]
    pub d2d_gbps: Option<f64>,
    /// Why the device's own timer could not be used (`conform` then times
    /// with the host's clock, marks each result with the metric
    /// `host_wall_clock` and gives no overlap figures); absent when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_timing_unavailable: Option<String>,
    /// A vendor library's times on the same device and hetero's ratio to
    /// them (`conform --baseline`); absent without one or on another device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<crate::library::RunBaseline>,
    /// One entry per workload variant.
    pub results: Vec<ResultRecord>,
}

/// What was run on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceReport {
    /// Device name.
    pub name: String,
    /// Vendor.
    pub vendor: String,
    /// Platform or driver description.
    pub platform: String,
    /// Index within the backend.
    pub ordinal: usize,
    /// Global memory in bytes.
    pub total_memory_bytes: u64,
    /// Compute units / multiprocessors.
    pub compute_units: u32,
    /// Warp or wavefront width.
    pub warp_size: u32,
}

impl From<&hetero::DeviceInfo> for DeviceReport {
    fn from(info: &hetero::DeviceInfo) -> Self {
        Self {
            name: info.name.clone(),
            vendor: info.vendor.clone(),
            platform: info.platform.clone(),
            ordinal: info.ordinal,
            total_memory_bytes: info.total_memory,
            compute_units: info.compute_units,
            warp_size: info.warp_size,
        }
    }
}

/// One checked workload variant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultRecord {
    /// Workload.
    pub workload: Workload,
    /// Variant, e.g. `two-pass-192` or `event-sync`.
    pub variant: String,
    /// Size class.
    pub size: Size,
    /// Whether every check of the variant held.
    pub passed: bool,
    /// Worst observed error; `null` when not a finite number.
    pub error: Option<f64>,
    /// Tolerance the error was held to.
    pub tolerance: Option<f64>,
    /// Device time of the timed part in milliseconds, from events.
    pub device_ms: Option<f64>,
    /// Named figures: `gbps`, `speedup_vs_sync`, `hidden_copy_fraction`, ...
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
    /// Why it failed, beyond the numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// This result's output against the same variant on the run's first
    /// device (cross-backend comparison), where there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// Per-operation device intervals (written to `--trace`, not to the report).
    #[serde(skip)]
    pub intervals: Vec<crate::timeline::Interval>,
    /// Pictures of the output (written to `--html`, not to the report).
    #[serde(skip)]
    pub images: Vec<crate::html::Image>,
}

/// How far one backend's output is from another's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    /// The run compared against, as `backend (device)`.
    pub against: String,
    /// Largest absolute element difference (`null` if not finite).
    pub max_abs: Option<f64>,
    /// Largest relative element difference (`null` if not finite).
    pub max_rel: Option<f64>,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

impl ResultRecord {
    /// The record of a workload outcome.
    pub fn from_outcome(workload: Workload, size: Size, outcome: &Outcome) -> Self {
        Self {
            workload,
            variant: outcome.variant.clone(),
            size,
            passed: outcome.passed(),
            error: finite(outcome.verdict.error),
            tolerance: finite(outcome.verdict.tolerance),
            device_ms: outcome.device_ms.and_then(finite),
            metrics: outcome.metrics.iter().filter(|(_, v)| v.is_finite()).map(|(k, v)| (k.clone(), *v)).collect(),
            note: outcome.note.clone(),
            comparison: None,
            intervals: outcome.intervals.clone(),
            images: outcome.images.clone(),
        }
    }

    /// A workload that could not finish: one failed record carrying the reason.
    pub fn failure(workload: Workload, size: Size, reason: String) -> Self {
        Self {
            workload,
            variant: "-".to_string(),
            size,
            passed: false,
            error: None,
            tolerance: None,
            device_ms: None,
            metrics: BTreeMap::new(),
            note: Some(reason),
            comparison: None,
            intervals: Vec::new(),
            images: Vec::new(),
        }
    }
}

/// A backend that could not run, and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Unavailable {
    /// Backend name.
    pub backend: String,
    /// The reason, including what was searched and how to get it.
    pub reason: String,
}

impl Run {
    /// `device timing unavailable on <device>: <why>; ...` when the run was
    /// timed with the host's clock: what every report format says about it.
    pub fn timing_note(&self) -> Option<String> {
        self.device_timing_unavailable.as_ref().map(|why| {
            format!(
                "device timing unavailable on {} ({}): {why}; its times are host wall-clock and its overlap is not measured",
                self.device.name, self.backend
            )
        })
    }
}

impl Report {
    /// `true` when at least one result exists and all passed.
    pub fn passed(&self) -> bool {
        let mut results = self.runs.iter().flat_map(|r| &r.results).peekable();
        results.peek().is_some() && results.all(|r| r.passed)
    }
}

#[cfg(test)]
mod tests {
    use super::Report;

    /// A run timed with the host's clock says so in every report format
    /// (rusticl's timer printed `inf GB/s` and 0.000 ms for every result).
    #[test]
    fn every_format_says_when_device_timing_is_unavailable() {
        let json = r#"{
            "schema_version": 1, "hetero_version": "0", "seed": 1, "size": "small", "unavailable": [],
            "runs": [{
                "backend": "opencl",
                "device": { "name": "llvmpipe", "vendor": "Mesa", "platform": "rusticl", "ordinal": 0,
                            "total_memory_bytes": 1, "compute_units": 2, "warp_size": 1 },
                "d2d_gbps": 11.0,
                "device_timing_unavailable": "the device timer gave zero or negative intervals",
                "results": [{ "workload": "reduce", "variant": "two-pass-256", "size": "small", "passed": true,
                              "error": 0.0, "tolerance": 1.0, "device_ms": 9.0,
                              "metrics": { "gbps": 0.5, "host_wall_clock": 1.0, "block": 32.0 } }]
            }]
        }"#;
        let report: Report = serde_json::from_str(json).unwrap();
        let note = "device timing unavailable on llvmpipe (opencl): the device timer gave zero or negative intervals";
        let html = crate::html::render(&report);
        let junit = crate::junit::render(&report).unwrap();
        for (format, text) in [
            ("table", crate::table::render(&report)),
            ("markdown", crate::markdown::render(&report)),
            ("html", html),
            ("junit", junit.clone()),
        ] {
            assert!(text.contains(note), "{format}: {text}");
            assert!(!text.contains(" inf") && !text.contains("NaN"), "{format}: {text}");
        }
        assert!(junit.contains("host wall-clock time 9.000 ms"), "{junit}");
        assert!(crate::table::render(&report).contains("(read + write, host clock)"));
    }
}
