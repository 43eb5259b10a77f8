//! The report formats, each a leaf over the report model: what they show
//! and what no content can do to them.

#![allow(clippy::unwrap_used)] // tests fail loudly

use conformance::document::{Block, Cell};
use conformance::html::to_html;
use conformance::markdown::to_markdown;
use conformance::report::Report;

fn sample(name: &str) -> Vec<Block> {
    vec![
        Block::Title("t".into()),
        Block::Table {
            header: vec!["run".into(), name.into()],
            rows: vec![vec![Cell::plain(name), Cell { failed: true, text: "1.0e-3".into() }]],
        },
        Block::List(vec![name.into()]),
    ]
}

/// Report content is text in either format, never markup.
#[test]
fn content_cannot_add_markup() {
    let hostile = "<script>alert(1)</script> | a&b \"q\"";
    let html = to_html(&sample(hostile));
    assert!(!html.contains("<script>") && html.contains("&lt;script&gt;") && html.contains("a&amp;b"));
    assert!(html.contains("<td><b class=\"fail\">FAIL</b> 1.0e-3</td>"));
    let md = to_markdown(&sample(hostile));
    assert!(md.contains("\\| a&b") && md.contains("| **FAIL** 1.0e-3 |"), "{md}");
}

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
    let html = conformance::html::render(&report);
    let junit = conformance::junit::render(&report).unwrap();
    for (format, text) in [
        ("table", conformance::table::render(&report)),
        ("markdown", conformance::markdown::render(&report)),
        ("html", html),
        ("junit", junit.clone()),
    ] {
        assert!(text.contains(note), "{format}: {text}");
        assert!(!text.contains(" inf") && !text.contains("NaN"), "{format}: {text}");
    }
    assert!(junit.contains("host wall-clock time 9.000 ms"), "{junit}");
    assert!(conformance::table::render(&report).contains("(read + write, host clock)"));
}

/// A result that was not compared with the run's first device says why in
/// every report format (balanced wave variants of different snapshot
/// intervals were once reported as disagreeing, then silently left out).
#[test]
fn every_format_says_why_a_result_was_not_compared() {
    let json = r#"{
        "schema_version": 1, "hetero_version": "0", "seed": 1, "size": "medium", "unavailable": [],
        "runs": [{
            "backend": "hip",
            "device": { "name": "H100", "vendor": "NVIDIA", "platform": "HIP", "ordinal": 0,
                        "total_memory_bytes": 1, "compute_units": 132, "warp_size": 32 },
            "d2d_gbps": 3000.0,
            "results": [
              { "workload": "wave", "variant": "balanced-sync", "size": "medium", "passed": true,
                "error": 0.0, "tolerance": 1.0, "device_ms": 9.0, "metrics": { "snapshot_every": 9.0 },
                "not_compared": "not compared with cuda (H100): it ran balanced-sync with a snapshot every 8 steps, this run with a snapshot every 9 steps" },
              { "workload": "reduce", "variant": "two-pass-256", "size": "medium", "passed": true,
                "error": 0.0, "tolerance": 1.0, "device_ms": 1.0, "metrics": {},
                "comparison": { "against": "cuda (H100)", "max_abs": 0.0, "max_rel": 0.0 } }]
        }]
    }"#;
    let report: Report = serde_json::from_str(json).unwrap();
    let why = "it ran balanced-sync with a snapshot every 8 steps, this run with a snapshot every 9 steps";
    for (format, text) in [
        ("table", conformance::table::render(&report)),
        ("markdown", conformance::markdown::render(&report)),
        ("html", conformance::html::render(&report)),
        ("junit", conformance::junit::render(&report).unwrap()),
        ("json", serde_json::to_string(&report).unwrap()),
    ] {
        assert!(text.contains(why), "{format}: {text}");
    }
    assert!(conformance::markdown::render(&report).contains("not compared (see notes)"));
}

/// A device at least the threshold slower than the median of its peers
/// (same backend and model) is flagged with the figure in every format;
/// its peers and a device of another model are not. Devices the driver
/// identified are named with their PCI address and UUID.
#[test]
fn a_slow_device_is_flagged_against_its_peers() {
    let run = |name: &str, ordinal: u32, ms: f64| {
        serde_json::json!({
            "backend": "cuda",
            "device": { "name": name, "vendor": "", "platform": "", "ordinal": ordinal,
                        "total_memory_bytes": 1, "compute_units": 1, "warp_size": 32 },
            "results": [{ "workload": "reduce", "variant": "two-pass-256", "size": "small", "passed": true,
                          "error": 0.0, "tolerance": 1.0, "device_ms": ms }]
        })
    };
    let json = serde_json::json!({
        "schema_version": 1, "hetero_version": "0", "seed": 1, "size": "small", "unavailable": [],
        "runs": [run("H100", 0, 1.0), run("H100", 1, 1.02), run("H100", 2, 1.3), run("A100", 3, 2.0)]
    });
    let mut report: Report = serde_json::from_value(json).unwrap();
    report.runs[0].device.pci_bus_id = Some("0000:65:00.0".into());
    report.runs[0].device.uuid = Some("12345678-9abc-def0-0001-0203040506ff".into());
    report.flag_slow_devices(0.15);
    let flags: Vec<Option<f64>> = report.runs.iter().map(|r| r.results[0].slower_than_peers).collect();
    assert_eq!(flags[..2], [None, None]);
    assert!(flags[2].is_some_and(|r| (r - 1.3 / 1.01).abs() < 1e-9), "{flags:?}");
    assert_eq!(flags[3], None, "no peer of its model");
    let note = "slow: cuda H100 #2 reduce two-pass-256: 1.29x its peers";
    for (format, text) in [
        ("table", conformance::table::render(&report)),
        ("markdown", conformance::markdown::render(&report)),
        ("html", conformance::html::render(&report)),
        ("json", serde_json::to_string(&report).unwrap()),
    ] {
        let expected = if format == "json" { "\"slower_than_peers\":1.287" } else { note };
        assert!(text.contains(expected), "{format}: {text}");
    }
    let junit = conformance::junit::render(&report).unwrap();
    assert!(junit.contains("slow: 1.29x its peers"));
    // Each device the driver identified is named by its PCI address and UUID.
    let identity = "device: cuda H100 #0: PCI 0000:65:00.0, UUID 12345678-9abc-def0-0001-0203040506ff";
    for text in [conformance::table::render(&report), conformance::markdown::render(&report)] {
        assert!(text.contains(identity), "{text}");
    }
    assert!(junit.contains("PCI 0000:65:00.0, UUID 12345678-9abc-def0-0001-0203040506ff"), "{junit}");
    assert!(serde_json::to_string(&report).unwrap().contains("\"pci_bus_id\":\"0000:65:00.0\""));
}

/// Guards against flagging a healthy device: one variant of a device
/// 2x slower, once (a host-bound variant measured once varies that much;
/// two H200s of one node were flagged so), while its other variants match
/// its peer's, is not a slow device; the same device slower on most of
/// its variants is, with only the variants past the threshold flagged.
#[test]
fn a_device_slow_on_one_variant_only_is_not_flagged() {
    let run = |ordinal: u32, ms: [f64; 4]| {
        let results: Vec<_> = ms
            .iter()
            .enumerate()
            .map(|(k, ms)| {
                serde_json::json!({ "workload": "pull", "variant": format!("v{k}"), "size": "small", "passed": true,
                                    "error": 0.0, "tolerance": 1.0, "device_ms": ms })
            })
            .collect();
        serde_json::json!({
            "backend": "cuda",
            "device": { "name": "H200", "vendor": "", "platform": "", "ordinal": ordinal,
                        "total_memory_bytes": 1, "compute_units": 1, "warp_size": 32 },
            "results": results
        })
    };
    let report_of = |first: [f64; 4]| -> Report {
        let json = serde_json::json!({
            "schema_version": 1, "hetero_version": "0", "seed": 1, "size": "small", "unavailable": [],
            "runs": [run(0, first), run(1, [1.0, 1.0, 1.0, 1.0])]
        });
        serde_json::from_value(json).unwrap()
    };
    let mut healthy = report_of([2.06, 1.02, 0.98, 1.0]);
    healthy.flag_slow_devices(0.15);
    assert!(healthy.slow_notes().is_empty(), "{:?}", healthy.slow_notes());
    let mut slow = report_of([2.06, 1.4, 1.3, 1.1]);
    slow.flag_slow_devices(0.15);
    let flags: Vec<Option<f64>> = slow.runs[0].results.iter().map(|r| r.slower_than_peers).collect();
    assert_eq!(flags, [Some(2.06), Some(1.4), Some(1.3), None]);
    assert!(slow.runs[1].results.iter().all(|r| r.slower_than_peers.is_none()));
}
