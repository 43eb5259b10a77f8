//! The JSON report (schema documented in `docs/report-schema.md`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::workloads::{Outcome, Size, Workload, median};

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
    /// Whether the run was in the deterministic mode (`--deterministic`):
    /// its outputs are compared by digest, exactly.
    #[serde(default)]
    pub deterministic: bool,
    /// One entry per device run.
    pub runs: Vec<Run>,
    /// Backends that were asked for (or probed by `auto`) but could not run.
    pub unavailable: Vec<Unavailable>,
    /// Node health: each device against its peer, the first device of its
    /// backend and model ([`Report::health`]); empty with one device a model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_health: Vec<NodeHealth>,
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
    pub baseline: Option<RunBaseline>,
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
    /// PCI address, where the driver gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    /// UUID, where the driver gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// GPU target (`sm_90`, `gfx90a:sramecc+:xnack-`), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
}

#[cfg(test)]
impl DeviceReport {
    /// A device of `name` with nothing else known, for tests.
    pub(crate) fn named(name: &str) -> Self {
        DeviceReport {
            name: name.into(),
            vendor: String::new(),
            platform: String::new(),
            ordinal: 0,
            total_memory_bytes: 0,
            compute_units: 1,
            warp_size: 32,
            pci_bus_id: None,
            uuid: None,
            arch: None,
        }
    }
}

impl DeviceReport {
    /// `PCI <address>, UUID <uuid>, target <arch>` (what the driver gave
    /// of them), or `None` when it gave none.
    pub fn identity(&self) -> Option<String> {
        let parts: Vec<String> = [("PCI", &self.pci_bus_id), ("UUID", &self.uuid), ("target", &self.arch)]
            .into_iter()
            .filter_map(|(what, value)| value.as_ref().map(|v| format!("{what} {v}")))
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
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
            pci_bus_id: info.pci_bus_id.clone(),
            uuid: info.uuid.clone(),
            arch: info.arch.clone(),
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
    /// Hex SHA-256 of the output as compared (its elements' little-endian
    /// bytes), where the variant keeps one: equal digests, equal bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// This result's output against the same variant on the run's first
    /// device (cross-backend comparison), where there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// Why this result was not compared with the run's first device, or
    /// checked against its peer, where such a run of the variant was there
    /// (a balanced wave's snapshot interval, chosen per device, differs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_compared: Option<String>,
    /// This output and time against its peer's (the first device of its
    /// backend and model), where it has one (node health).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerCheck>,
    /// This device's time over the median of its peers' (devices of the
    /// same backend and model in the report), where it is at least the
    /// slowness threshold above 1 ([`Report::flag_slow_devices`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slower_than_peers: Option<f64>,
    /// Per-operation device intervals (written to `--trace`, not to the report).
    #[serde(skip)]
    pub intervals: Vec<crate::timeline::Interval>,
    /// Pictures of the output (written to `--html`, not to the report).
    #[serde(skip)]
    pub images: Vec<crate::image::Image>,
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

/// One output of a device against the same output of its peer, a device
/// of the same backend and model: they must agree (node health).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PeerCheck {
    /// The peer, as `backend (device #index)`.
    pub against: String,
    /// Largest absolute element difference (`null` if not finite, or when
    /// the shapes differ).
    pub max_abs: Option<f64>,
    /// Largest relative element difference (`null` if not finite).
    pub max_rel: Option<f64>,
    /// The largest absolute difference two correct outputs may have: 0
    /// for a deterministic variant, the spread of an atomic sum.
    pub allowed: f64,
    /// Whether the two agree (within `allowed`, of one shape).
    pub agree: bool,
    /// This device's time over the peer's, where both were timed.
    pub time_ratio: Option<f64>,
}

/// A device against its peer over every output they both gave: what a CI
/// job reads to judge a node (`conform` fails when `disagree` is not empty).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeHealth {
    /// Backend name.
    pub backend: String,
    /// The model both are.
    pub model: String,
    /// The device's index in its backend.
    pub device: usize,
    /// The peer, as `backend (device #index)`.
    pub against: String,
    /// Outputs compared.
    pub compared: usize,
    /// `workload/variant` of each output that differs from the peer's.
    pub disagree: Vec<String>,
    /// The median over its results of its time over the peer's.
    pub time_ratio: Option<f64>,
    /// Whether the device was flagged slower than its peers
    /// ([`Report::flag_slow_devices`]).
    pub slow: bool,
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
            digest: outcome.output.as_ref().map(crate::workloads::Output::digest),
            comparison: None,
            peer: None,
            not_compared: None,
            slower_than_peers: None,
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
            digest: None,
            comparison: None,
            peer: None,
            not_compared: None,
            slower_than_peers: None,
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

// The `baseline` section: a vendor library's times on the same device
// (read and compared in `crate::library`).

/// A vendor library's figures, as the baseline file holds them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Measured {
    /// Device name as the library reports it.
    pub device: String,
    /// Elements of the one-dimensional workloads (and f32 of the copy).
    pub elements: u64,
    /// Untimed runs before the timed ones.
    pub warmup: u32,
    /// Timed runs; each figure is their median.
    pub repeats: u32,
    /// Library name → version.
    #[serde(default)]
    pub versions: BTreeMap<String, String>,
    /// One entry per workload and library.
    pub entries: Vec<LibraryTime>,
}

/// One library's time for one workload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LibraryTime {
    /// `copy` (device to device), `reduce`, `scan` or `bandwidth`.
    pub workload: String,
    /// For `bandwidth`, the variant it is set against (`copy`, `triad`,
    /// `h2d`, ...): compared by bytes per second, as the arrays differ in
    /// size from the one-dimensional workloads'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The call, e.g. `torch.sum` or `cupy.cumsum int32`.
    pub library: String,
    /// Median device milliseconds.
    pub ms: f64,
    /// Bytes that must move over `ms`, in GB/s.
    pub gbps: f64,
}

/// The `baseline` section of a run: the library's figures and the ratios.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunBaseline {
    /// The figures the ratios are taken against.
    #[serde(flatten)]
    pub measured: Measured,
    /// hetero's time over the library's, per result and library.
    pub ratios: Vec<Ratio>,
}

/// hetero against one library on one workload variant.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Ratio {
    /// Workload (`copy` for the device-to-device copy).
    pub workload: String,
    /// hetero's variant (`d2d` for the copy).
    pub variant: String,
    /// The library call.
    pub library: String,
    /// hetero's median device milliseconds (for the copy: `elements` f32 at
    /// the run's measured copy bandwidth).
    pub hetero_ms: f64,
    /// The library's median device milliseconds.
    pub library_ms: f64,
    /// `hetero_ms / library_ms`: below 1, hetero is faster.
    pub ratio: f64,
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
    /// Flags a slow device: sets `slower_than_peers` on each result whose
    /// device took at least `1 + threshold` times the median time of its
    /// peers (the other runs of the same backend and device name) for the
    /// same variant, when that device's results are slower than its peers'
    /// by that much in the median over all its variants. A node's slow GPU
    /// is slow across the board, and shows up in every format, as a flag,
    /// not a failed check; a single variant run once is not evidence (a
    /// variant bound by host latency varies that much between two runs on
    /// one device), so a healthy device slow on one or two is not flagged.
    pub fn flag_slow_devices(&mut self, threshold: f64) {
        let times: Vec<Vec<(Workload, String, Option<f64>)>> = self
            .runs
            .iter()
            .map(|run| run.results.iter().map(|r| (r.workload, r.variant.clone(), r.device_ms)).collect())
            .collect();
        let models: Vec<(String, String)> =
            self.runs.iter().map(|r| (r.backend.clone(), r.device.name.clone())).collect();
        for (i, run) in self.runs.iter_mut().enumerate() {
            let ratios: Vec<Option<f64>> = run
                .results
                .iter()
                .map(|result| {
                    let ms = result.device_ms.filter(|ms| ms.is_finite() && *ms > 0.0)?;
                    let peers: Vec<f64> = (0..times.len())
                        .filter(|&j| j != i && models[j] == models[i])
                        .flat_map(|j| &times[j])
                        .filter(|(w, v, _)| *w == result.workload && *v == result.variant)
                        .filter_map(|(.., t)| t.filter(|t| t.is_finite() && *t > 0.0))
                        .collect();
                    Some(ms / median(peers)).filter(|r| r.is_finite())
                })
                .collect();
            let slow = median(ratios.iter().flatten().copied().collect()) >= 1.0 + threshold;
            for (result, ratio) in run.results.iter_mut().zip(ratios) {
                result.slower_than_peers = ratio.filter(|r| slow && *r >= 1.0 + threshold);
            }
        }
    }

    /// `device: <backend> <device>: PCI ..., UUID ...` for every run whose
    /// driver identified its device, as every format prints it.
    pub fn identity_notes(&self) -> Vec<String> {
        self.runs
            .iter()
            .filter_map(|run| {
                run.device.identity().map(|id| format!("device: {} {}: {id}", run.backend, self.device_label(run)))
            })
            .collect()
    }

    /// `slow: <backend> <device> <workload> <variant>: N x its peers' median time`
    /// for every flagged result, as every format prints it.
    pub fn slow_notes(&self) -> Vec<String> {
        self.runs
            .iter()
            .flat_map(|run| {
                run.results.iter().filter_map(move |r| {
                    r.slower_than_peers.map(|ratio| {
                        format!(
                            "slow: {} {} {} {}: {ratio:.2}x its peers' median time",
                            run.backend,
                            self.device_label(run),
                            r.workload.name(),
                            r.variant
                        )
                    })
                })
            })
            .collect()
    }

    /// The device's name as the formats show it: with ` #N`, its index in
    /// its backend, when the report holds several runs of that backend
    /// (`--device all`), so that identical devices stay apart.
    pub fn device_label(&self, run: &Run) -> String {
        let same = self.runs.iter().filter(|r| r.backend == run.backend).count();
        if same > 1 { format!("{} #{}", run.device.name, run.device.ordinal) } else { run.device.name.clone() }
    }

    /// Node health: for each run whose results were checked against a
    /// peer, what agreed, what did not, and how its times compare.
    pub fn health(&self) -> Vec<NodeHealth> {
        self.runs
            .iter()
            .filter_map(|run| {
                let checks: Vec<(&ResultRecord, &PeerCheck)> =
                    run.results.iter().filter_map(|r| r.peer.as_ref().map(|p| (r, p))).collect();
                let (_, first) = checks.first()?;
                let ratios = checks.iter().filter_map(|(_, p)| p.time_ratio).filter(|r| r.is_finite()).collect();
                Some(NodeHealth {
                    backend: run.backend.clone(),
                    model: run.device.name.clone(),
                    device: run.device.ordinal,
                    against: first.against.clone(),
                    compared: checks.len(),
                    disagree: checks
                        .iter()
                        .filter(|(_, p)| !p.agree)
                        .map(|(r, _)| format!("{}/{}", r.workload.name(), r.variant))
                        .collect(),
                    time_ratio: finite(median(ratios)),
                    slow: run.results.iter().any(|r| r.slower_than_peers.is_some()),
                })
            })
            .collect()
    }

    /// `true` when at least one result exists and all passed.
    pub fn passed(&self) -> bool {
        let mut results = self.runs.iter().flat_map(|r| &r.results).peekable();
        results.peek().is_some() && results.all(|r| r.passed)
    }
}

/// Combines reports of one schema version and size into one, runs side by
/// side (a report's size is that of all its results).
pub fn merge(reports: Vec<Report>) -> Result<Report, String> {
    let mut iter = reports.into_iter();
    let mut merged = iter.next().ok_or("no report to merge")?;
    for report in iter {
        if report.schema_version != merged.schema_version {
            return Err(format!(
                "cannot merge schema version {} into {}: rerun conform with one hetero version",
                report.schema_version, merged.schema_version
            ));
        }
        if report.size != merged.size {
            return Err(format!(
                "cannot merge a size {} report into size {}: results of different sizes are not comparable; \
                 merge the reports of each size apart",
                report.size.name(),
                merged.size.name()
            ));
        }
        if report.seed != merged.seed {
            merged.unavailable.push(Unavailable {
                backend: "-".to_string(),
                reason: format!("reports used different seeds ({} and {}): inputs differ", merged.seed, report.seed),
            });
        }
        merged.runs.extend(report.runs);
        merged.unavailable.extend(report.unavailable);
    }
    // Derived from the runs' results, so it covers every merged run.
    merged.node_health = merged.health();
    Ok(merged)
}
