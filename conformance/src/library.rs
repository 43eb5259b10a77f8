//! Vendor-library times of the same work on the same device, and hetero's
//! ratio to them: the `baseline` section of a run (`conform --baseline FILE`).
//!
//! The file is what `ci/gpu/baseline.py` writes on a GPU node (torch and
//! CuPy, event-timed medians after warm-up). A run gets a `baseline` only
//! when its device has the file's device name and the file was measured at
//! the run's element count, so every ratio compares the same work on the
//! same hardware.

use std::path::Path;

use crate::report::{LibraryTime, Measured, Ratio, Run, RunBaseline};
use crate::workloads::{self, Size};

/// Reads a baseline file for a run at `size`; the message says what to fix.
pub fn load(path: &Path, size: Size) -> Result<Measured, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("--baseline {}: {e}", path.display()))?;
    let measured: Measured = serde_json::from_str(&text).map_err(|e| {
        format!("--baseline {}: not a baseline file ({e}); make one with ci/gpu/baseline.py", path.display())
    })?;
    let want = workloads::elements(size) as u64;
    if measured.elements != want {
        let matching = [Size::Small, Size::Medium, Size::Large]
            .into_iter()
            .find(|s| workloads::elements(*s) as u64 == measured.elements)
            .map_or(String::new(), |s| format!(" or run conform with --size {}", s.name()));
        return Err(format!(
            "--baseline {}: measured at {} elements, but size {} runs {want}; \
             rerun `ci/gpu/baseline.py --size {}`{matching}",
            path.display(),
            measured.elements,
            size.name(),
            size.name()
        ));
    }
    if let Some(bad) = measured.entries.iter().find(|e| !(e.ms.is_finite() && e.ms > 0.0)) {
        return Err(format!(
            "--baseline {}: {} {} has time {} ms; times must be positive",
            path.display(),
            bad.workload,
            bad.library,
            bad.ms
        ));
    }
    Ok(measured)
}

/// The `baseline` section of `run`, or `None` when the run is on another device.
pub fn compare(measured: &Measured, run: &Run) -> Option<RunBaseline> {
    if run.device.name != measured.device {
        return None;
    }
    let mut ratios = Vec::new();
    for entry in &measured.entries {
        if entry.workload == "copy" {
            if let Some(gbps) = run.d2d_gbps.filter(|g| *g > 0.0) {
                let hetero_ms = 8.0 * measured.elements as f64 / (gbps * 1e6);
                ratios.push(ratio(entry, "d2d", hetero_ms));
            }
            continue;
        }
        if let Some(variant) = &entry.variant {
            // The same bytes at hetero's rate: a time ratio like the others.
            let bytes_ms = entry.gbps * entry.ms;
            for result in run.results.iter().filter(|r| r.workload.name() == entry.workload && &r.variant == variant) {
                if let Some(gbps) = result.metrics.get("gbps").filter(|g| **g > 0.0) {
                    ratios.push(ratio(entry, variant, bytes_ms / gbps));
                }
            }
            continue;
        }
        for result in run.results.iter().filter(|r| r.workload.name() == entry.workload) {
            if let Some(ms) = result.device_ms {
                ratios.push(ratio(entry, &result.variant, ms));
            }
        }
    }
    Some(RunBaseline { measured: measured.clone(), ratios })
}

fn ratio(entry: &LibraryTime, variant: &str, hetero_ms: f64) -> Ratio {
    Ratio {
        workload: entry.workload.clone(),
        variant: variant.to_string(),
        library: entry.library.clone(),
        hetero_ms,
        library_ms: entry.ms,
        ratio: hetero_ms / entry.ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::report::{DeviceReport, ResultRecord};
    use crate::workloads::Workload;

    fn measured(device: &str, elements: u64) -> Measured {
        let entry = |workload: &str, library: &str, ms: f64| LibraryTime {
            workload: workload.into(),
            library: library.into(),
            ms,
            gbps: 1.0,
            variant: None,
        };
        Measured {
            device: device.into(),
            elements,
            warmup: 3,
            repeats: 11,
            versions: BTreeMap::new(),
            entries: vec![entry("copy", "torch copy_", 0.5), entry("reduce", "torch.sum", 0.4)],
        }
    }

    fn run(device: &str) -> Run {
        let mut result = ResultRecord::failure(Workload::Reduce, Size::Small, String::new());
        result.variant = "two-pass-256".into();
        result.device_ms = Some(0.2);
        let mut scan = result.clone();
        scan.workload = Workload::Scan;
        Run {
            backend: "cuda".into(),
            device: DeviceReport::named(device),
            d2d_gbps: Some(16.0),
            device_timing_unavailable: None,
            baseline: None,
            results: vec![result, scan],
        }
    }

    #[test]
    fn ratios_pair_each_library_with_the_same_workload_only() {
        let section = compare(&measured("GPU", 1_000_000), &run("GPU")).expect("same device");
        let got: Vec<(&str, &str, f64)> =
            section.ratios.iter().map(|r| (r.workload.as_str(), r.variant.as_str(), r.ratio)).collect();
        // The copy: 8e6 bytes at 16 GB/s is 0.5 ms, the library's time.
        assert_eq!(got, vec![("copy", "d2d", 1.0), ("reduce", "two-pass-256", 0.5)]);
    }

    #[test]
    fn bandwidth_is_set_against_its_own_variant_by_rate() {
        let mut file = measured("GPU", 1_000_000);
        // The library moved 2 GB in 1 ms (2000 GB/s) on a pinned copy.
        file.entries = vec![LibraryTime {
            workload: "bandwidth".into(),
            library: "torch copy_ pinned".into(),
            ms: 1.0,
            gbps: 2000.0,
            variant: Some("h2d".into()),
        }];
        let mut run = run("GPU");
        for (variant, gbps) in [("h2d", 1000.0), ("d2h", 4000.0)] {
            let mut result = ResultRecord::failure(Workload::Bandwidth, Size::Small, String::new());
            result.variant = variant.into();
            result.device_ms = Some(7.0);
            result.metrics.insert("gbps".into(), gbps);
            run.results.push(result);
        }
        let section = compare(&file, &run).expect("same device");
        let got: Vec<(&str, f64, f64)> =
            section.ratios.iter().map(|r| (r.variant.as_str(), r.hetero_ms, r.ratio)).collect();
        // Half the library's rate: the same bytes take twice its time.
        assert_eq!(got, vec![("h2d", 2.0, 2.0)]);
    }

    #[test]
    fn another_device_gets_no_baseline() {
        assert!(compare(&measured("GPU", 1_000_000), &run("CPU")).is_none());
    }

    #[test]
    fn a_file_of_another_size_is_refused_with_the_fix() {
        let dir = std::env::temp_dir().join(format!("hetero-baseline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("baseline.json");
        let text = serde_json::to_string(&measured("GPU", 1 << 28)).expect("serialises");
        std::fs::write(&path, text).expect("write");
        let err = load(&path, Size::Small).expect_err("small is 2^20 elements");
        assert!(err.contains("--size small"), "{err}");
        assert_eq!(load(&path, Size::Large), Ok(measured("GPU", 1 << 28)));
        std::fs::write(&path, "{}").expect("write");
        assert!(load(&path, Size::Large).expect_err("not a baseline").contains("baseline.py"));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
