//! The `conform` command line: exit codes, messages, reports, dumps.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rstest::rstest;

fn conform(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_conform")).args(args).output().expect("conform starts")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hetero-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[rstest]
#[case::unknown_backend(&["--backend", "metal"], "metal")]
#[case::unknown_workload(&["--workload", "reduce,fft"], "fft")]
#[case::unknown_size(&["--size", "huge"], "huge")]
#[case::bad_seed(&["--seed", "-x"], "-x")]
fn bad_arguments_exit_2_naming_the_value(#[case] args: &[&str], #[case] named: &str) {
    let out = conform(args);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(named), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"));
}

/// A backend that cannot run exits 2 with one line saying why, in words a
/// user can act on: what was looked for and where, or (AMD's runtime
/// installed without an AMD GPU) the runtime's own reason and the library
/// that gave it.
#[rstest]
#[case::cuda("cuda", &[&["libcuda", "searched"][..]])]
#[case::hip("hip", &[&["libamdhip64", "ROCM_PATH"][..], &["libamdhip64", "hipErrorNoDevice"]])]
fn backend_without_runtime_exits_2_with_one_line(#[case] backend: &str, #[case] named: &[&[&str]]) {
    if hetero::backend_devices(backend.parse().unwrap()).is_ok() {
        println!("skipped: the {backend} backend is usable on this machine");
        return;
    }
    let out = conform(&["--backend", backend, "--workload", "scan"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(backend) && !err.contains("panicked"), "{err}");
    if hetero::is_compiled(backend.parse().unwrap()) {
        // The reason says what was looked for, so a user knows what to install.
        assert!(named.iter().any(|words| words.iter().all(|w| err.contains(w))), "none of {named:?} in: {err}");
    }
}

/// A GPU node compares its GPU backends without the host run: `--backend`
/// takes a list, every backend named is required, and when some are
/// missing the error names each with its reason and nothing is written,
/// not even to standard output.
#[test]
fn backend_list_requires_each_and_names_every_missing_one() {
    let missing: Vec<&str> =
        ["cuda", "hip"].into_iter().filter(|b| hetero::backend_devices(b.parse().unwrap()).is_err()).collect();
    if missing.len() < 2 {
        println!("skipped: cuda or hip is usable on this machine");
        return;
    }
    let dir = scratch("backend-list");
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_conform"))
        .args(["--backend", "cuda,hip", "--json", "-"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("cuda backend") && err.contains("hip backend"), "both reasons: {err}");
    assert!(out.stdout.is_empty(), "nothing on standard output");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "no file named `-` or otherwise");
    std::fs::remove_dir_all(dir).unwrap();

    let out = conform(&["--backend", "host,opencl,host", "--workload", "scan"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("scan on host,opencl,"), "each backend once, in order: {text}");
}

/// `-` as a report path writes the report to standard output, which then
/// holds nothing else (the table moves to standard error).
#[test]
fn dash_writes_the_report_to_standard_output() {
    let out = conform(&["--backend", "host", "--workload", "scan", "--json", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("standard output is the JSON report");
    assert_eq!(report["runs"][0]["backend"], "host");
    assert!(stderr(&out).contains("PASS:"), "the table and verdict go to standard error");
    let out = conform(&["--backend", "host", "--workload", "scan", "--json", "-", "--markdown", "-"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("standard output"), "{}", stderr(&out));
}

#[test]
fn unwritable_dump_directory_exits_2() {
    let file = scratch("not-a-dir");
    std::fs::write(&file, b"a file").unwrap();
    let out = conform(&["--backend", "host", "--workload", "scan", "--dump", file.join("sub").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--dump") && stderr(&out).contains("not-a-dir"), "{}", stderr(&out));
    std::fs::remove_file(file).unwrap();
}

#[test]
fn unwritable_json_path_exits_2_before_running() {
    let out = conform(&["--backend", "host", "--json", "/nonexistent-dir/report.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--json"), "{}", stderr(&out));
}

#[test]
fn host_run_writes_report_and_dump() {
    let dir = scratch("run");
    let json = dir.join("report.json");
    std::fs::create_dir_all(&dir).unwrap();
    let dump = dir.join("dump");
    let out = conform(&[
        "--backend",
        "host",
        "--workload",
        "scan,reduce",
        "--json",
        json.to_str().unwrap(),
        "--dump",
        dump.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("PASS: 7 of 7 checks passed"), "{table}");

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["schema_version"], 1);
    let run = &report["runs"][0];
    assert_eq!(run["backend"], "host");
    assert!(run["device"]["name"].is_string());
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 7);
    for r in results {
        assert_eq!(r["size"], "small");
        assert_eq!(r["passed"], true);
        assert!(r["workload"] == "scan" || r["workload"] == "reduce");
        assert!(r["device_ms"].as_f64().unwrap() >= 0.0);
    }

    for file in ["README.md", "host/scan/input.npy", "host/scan/block-192_offsets.npy", "host/reduce/sum_ref.npy"] {
        assert!(dump.join(file).is_file(), "{file} missing");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

fn report_tool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_report")).args(args).output().expect("report starts")
}

/// JUnit, Markdown and JSON of one run, then a merge of two runs into one
/// comparison table.
#[test]
fn junit_markdown_and_merge() {
    let dir = scratch("outputs");
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let out = conform(&[
        "--backend",
        "host",
        "--workload",
        "scan",
        "--json",
        &path("a.json"),
        "--junit",
        &path("a.xml"),
        "--markdown",
        &path("a.md"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let junit = quick_junit::Report::deserialize_from_str(&std::fs::read_to_string(path("a.xml")).unwrap()).unwrap();
    assert_eq!(junit.tests, 3);
    assert_eq!(junit.failures, 0);
    assert_eq!(junit.test_suites[0].test_cases[0].name.as_str(), "scan/block-256/small");
    let md = std::fs::read_to_string(path("a.md")).unwrap();
    assert!(md.contains("| scan | block-192 | small | pass"), "{md}");

    // A second "node": the same report with its failing twin.
    let mut other: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path("a.json")).unwrap()).unwrap();
    other["runs"][0]["backend"] = "opencl".into();
    other["runs"][0]["results"][1]["passed"] = false.into();
    std::fs::write(path("b.json"), other.to_string()).unwrap();
    let merged = report_tool(&[
        "merge",
        &path("a.json"),
        &path("b.json"),
        "--markdown",
        &path("m.md"),
        "--junit",
        &path("m.xml"),
        "--html",
        &path("m.html"),
    ]);
    assert_eq!(merged.status.code(), Some(1), "a failed check in any input fails the merge");
    let html = std::fs::read_to_string(path("m.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("class=\"fail\""), "{html}");
    let md = std::fs::read_to_string(path("m.md")).unwrap();
    assert!(md.contains("| workload | variant | size | host (") && md.contains(" | opencl ("), "{md}");
    assert!(md.contains("| scan | block-192 | small | pass") && md.contains("**FAIL**"), "{md}");
    let junit = quick_junit::Report::deserialize_from_str(&std::fs::read_to_string(path("m.xml")).unwrap()).unwrap();
    assert_eq!((junit.tests, junit.failures), (6, 1));

    // The same run compared with its twin (one verdict changed), in every format.
    let compared = report_tool(&[
        "compare",
        &path("a.json"),
        &path("a.json"),
        "--html",
        &path("same.html"),
        "--markdown",
        &path("same.md"),
    ]);
    assert_eq!(compared.status.code(), Some(0), "{}", String::from_utf8_lossy(&compared.stderr));
    assert!(std::fs::read_to_string(path("same.html")).unwrap().contains("3 results paired; 0 flagged"));
    let mut changed =
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(path("a.json")).unwrap()).unwrap();
    changed["runs"][0]["results"][1]["passed"] = false.into();
    std::fs::write(path("changed.json"), changed.to_string()).unwrap();
    let flagged = report_tool(&[
        "compare",
        &path("a.json"),
        &path("changed.json"),
        "--html",
        &path("c.html"),
        "--fail-on-regression",
    ]);
    assert_eq!(flagged.status.code(), Some(1));
    let html = std::fs::read_to_string(path("c.html")).unwrap();
    assert!(html.contains("<td>scan/block-192") || html.contains("block-192"), "{html}");
    assert!(html.contains("1 flagged"), "{html}");

    other["schema_version"] = 99.into();
    std::fs::write(path("c.json"), other.to_string()).unwrap();
    let refused = report_tool(&["merge", &path("a.json"), &path("c.json")]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("schema version 99"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn unwritable_junit_path_exits_2() {
    let out = conform(&["--backend", "host", "--junit", "/nonexistent-dir/r.xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--junit"), "{}", stderr(&out));
}

/// `--backend all` compares every later backend with the first; exact
/// workloads must agree exactly. Needs two backends (host + OpenCL in CI).
#[test]
fn backends_are_compared_with_each_other() {
    let dir = scratch("compare");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("all.json");
    let out = conform(&["--backend", "all", "--workload", "scan,reduce", "--json", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let runs = report["runs"].as_array().unwrap();
    if runs.len() < 2 {
        println!("skipped: only one backend can run here");
        return;
    }
    assert!(runs[0]["results"].as_array().unwrap().iter().all(|r| r.get("comparison").is_none()));
    for r in runs[1]["results"].as_array().unwrap() {
        let c = &r["comparison"];
        assert!(c["against"].as_str().unwrap().starts_with("host"), "{r}");
        if r["workload"] == "scan" {
            assert_eq!(c["max_abs"], 0.0, "integer scans must agree exactly: {r}");
        }
        assert!(c["max_rel"].as_f64().unwrap() < 1e-4, "{r}");
    }
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("compare: "), "{table}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `--trace` writes valid Chrome trace-event JSON: named tracks, complete
/// events for kernels and copies with non-negative times.
#[test]
fn trace_is_trace_event_json() {
    let dir = scratch("trace");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.json");
    let out = conform(&["--backend", "host", "--workload", "pull,wave", "--trace", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let complete: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
    for cat in ["kernel", "copy"] {
        assert!(complete.iter().any(|e| e["cat"] == cat), "no {cat} events");
    }
    for e in &complete {
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        assert!(e["ts"].as_f64().unwrap() >= 0.0 && e["dur"].as_f64().unwrap() >= 0.0, "{e}");
    }
    let names: Vec<&str> =
        events.iter().filter(|e| e["name"] == "thread_name").filter_map(|e| e["args"]["name"].as_str()).collect();
    assert!(names.contains(&"wave event-sync / copy") && names.contains(&"pull streams-4 / stream 3"), "{names:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `--html` writes one self-contained page with the table, a timeline per
/// run and the wavefield snapshots.
#[test]
fn html_page_has_table_timelines_and_wavefields() {
    let dir = scratch("html");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("r.html");
    let out = conform(&["--backend", "host", "--workload", "pull,wave", "--html", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = std::fs::read_to_string(&path).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    assert!(page.contains("<table>") && page.contains("<td>wave</td>"), "comparison table");
    assert!(
        page.contains("<h2>Device timelines</h2>")
            && page.contains("<svg")
            && page.contains("<image x=\"230\" y=\"0\" width=\"900\"")
            && page.contains("href=\"data:image/png;base64,"),
        "timeline: bars as an embedded PNG under the SVG labels"
    );
    assert!(page.contains("<title>ideal: "), "the overlapped wave variants' ideal is marked");
    assert!(
        page.contains("<h2>Wavefield snapshots</h2>")
            && page.contains("<figcaption>step 300</figcaption>")
            && page.contains("<img alt=\"step 300\""),
        "images, as embedded PNG files"
    );
    assert!(!page.contains("src=\"http") && !page.contains("<script"), "self-contained, no scripts");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Pull's stream counts and pageable staging, and wave's grid and snapshot
/// interval, are chosen on the command line; bad values exit 2.
#[test]
fn workload_options() {
    let dir = scratch("options");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("o.json");
    let out = conform(&[
        "--backend",
        "host",
        "--workload",
        "pull,wave",
        "--pull-streams",
        "2,3",
        "--pull-threads",
        "2,0",
        "--pull-framework",
        "0,2",
        "--pull-graphs",
        "0,3",
        "--pull-pageable",
        "--wave-grid",
        "40",
        "--snapshot-every",
        "100",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let variants: Vec<&str> =
        report["runs"][0]["results"].as_array().unwrap().iter().map(|r| r["variant"].as_str().unwrap()).collect();
    assert_eq!(
        variants,
        [
            "streams-2",
            "streams-3",
            "threads-2",
            "pageable-streams-2",
            "pageable-streams-3",
            "graph-3",
            "framework-2",
            "library",
            "sync",
            "stream-sync",
            "event-sync",
            "graph",
            "balanced-sync",
            "balanced-stream-sync",
            "balanced-event-sync",
            "balanced-graph"
        ]
    );
    for bad in [
        &["--pull-streams", "0"][..],
        &["--pull-threads", "65"],
        &["--pull-threads", "x"],
        &["--pull-framework", "65"],
        &["--pull-framework", "-1"],
        &["--wave-grid", "3"],
        &["--snapshot-every", "0"],
    ] {
        assert_eq!(conform(bad).status.code(), Some(2), "{bad:?}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A request that exits 2 leaves an existing report untouched (it was
/// truncated to 0 bytes because outputs were opened before device selection).
#[test]
fn request_that_cannot_run_keeps_existing_reports() {
    let dir = scratch("keep-report");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("report.json");
    std::fs::write(&json, "precious").unwrap();
    let json_arg = json.to_str().unwrap();
    for args in [
        vec!["--backend", "cuda", "--workload", "scan", "--json", json_arg],
        vec!["--backend", "host", "--device", "99", "--json", json_arg],
        vec!["--backend", "host", "--snapshot-every", "301", "--json", json_arg],
    ] {
        if args[1] == "cuda" && hetero::backend_devices(hetero::Backend::Cuda).is_ok() {
            continue;
        }
        let out = conform(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert_eq!(std::fs::read_to_string(&json).unwrap(), "precious", "{args:?} touched the report");
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file is left behind");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fresh folder of `case` holding `name`, a host run's scan report, and
/// the report as JSON.
fn scan_report(case: &str, name: &str) -> (PathBuf, serde_json::Value) {
    let dir = scratch(case);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let out = conform(&["--backend", "host", "--workload", "scan", "--json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (dir, report)
}

/// `--against` a report with no results (no runs, or a run that checked
/// nothing) is refused before anything runs, with the old outputs left as
/// they were. It was found out after the whole run, which then exited 2
/// and wrote none of its reports: a large run on a GPU node was lost.
#[test]
fn against_a_report_without_results_is_refused_before_the_run() {
    let (dir, old) = scan_report("against-empty", "old.json");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let mut no_runs = old.clone();
    no_runs["runs"] = serde_json::json!([]);
    let mut no_results = old.clone();
    no_results["runs"][0]["results"] = serde_json::json!([]);
    std::fs::write(path("out.json"), "precious").unwrap();
    for (name, report) in [("noruns.json", no_runs), ("noresults.json", no_results)] {
        std::fs::write(path(name), report.to_string()).unwrap();
        let started = std::time::Instant::now();
        let out = conform(&[
            "--backend",
            "host",
            "--workload",
            "scan",
            "--against",
            &path(name),
            "--json",
            &path("out.json"),
        ]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        assert!(stderr(&out).contains("no results"), "{name}: {}", stderr(&out));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(!said.contains("PASS") && !said.contains("checks"), "{name}: it ran before refusing: {said}");
        assert_eq!(std::fs::read_to_string(path("out.json")).unwrap(), "precious", "{name}");
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
    }
    // A comparable report: the run is compared and its report written.
    let out = conform(&[
        "--backend",
        "host",
        "--workload",
        "scan",
        "--against",
        &path("old.json"),
        "--json",
        &path("out.json"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("results paired"));
    assert!(std::fs::read_to_string(path("out.json")).unwrap().contains("\"runs\""));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Reports of different sizes are not merged: the merge labelled the
/// result with the first one's size, and `report compare` then paired
/// large results with small ones (false +9900% regressions).
#[test]
fn reports_of_different_sizes_are_not_merged() {
    let (dir, mut large) = scan_report("merge-sizes", "small.json");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    large["size"] = "large".into();
    std::fs::write(path("large.json"), large.to_string()).unwrap();
    let refused = report_tool(&["merge", &path("small.json"), &path("large.json"), "--json", &path("merged.json")]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("size large") && err.contains("size small"), "{err}");
    assert!(!Path::new(&path("merged.json")).exists(), "nothing written");
    let refused = report_tool(&["compare", &path("small.json"), &path("large.json")]);
    assert_eq!(refused.status.code(), Some(2), "{}", String::from_utf8_lossy(&refused.stdout));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two outputs naming one file are refused (they gave a corrupt file and exit 0).
#[test]
fn same_path_for_two_outputs_exits_2() {
    let dir = scratch("same-path");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("out");
    let p = path.to_str().unwrap();
    let out = conform(&["--backend", "host", "--workload", "scan", "--json", p, "--junit", p]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--json") && stderr(&out).contains("--junit"), "{}", stderr(&out));
    assert!(!path.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Options are validated before anything runs: an out-of-range snapshot
/// interval exits 2 naming the range (it ran, then failed a check: exit 1).
#[test]
fn snapshot_interval_beyond_the_steps_exits_2() {
    let out = conform(&["--backend", "host", "--workload", "wave", "--snapshot-every", "301"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("301") && stderr(&out).contains("1..=300"), "{}", stderr(&out));
}

/// A device index that no backend has keeps each backend's reason (it said
/// only "no backend is available").
#[test]
fn missing_device_index_names_each_backend() {
    let out = conform(&["--device", "99", "--workload", "scan"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--device 99: host has no device 99; its devices are 0: "), "{}", stderr(&out));
}

/// A device chosen by a piece of its name or platform runs; one that
/// matches nothing exits 2 listing the devices there are.
#[test]
fn devices_are_chosen_by_name() {
    let out = conform(&["--backend", "host", "--device", "HETERO HOST", "--workload", "reduce"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = conform(&["--backend", "host", "--device", "no such device", "--workload", "reduce"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(message.contains("no device whose name or platform contains \"no such device\""), "{message}");
    assert!(message.contains("its devices are 0: "), "{message}");
}

/// A wave grid that does not fit in memory exits 2 with the numbers (a
/// 65536-cell grid aborted the process allocating its float64 reference).
#[test]
fn wave_grid_beyond_memory_exits_2_with_the_numbers() {
    let out = conform(&["--backend", "host", "--workload", "wave", "--wave-grid", "65536"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("65536x65536") && err.contains("GiB"), "{err}");
    assert!(!err.contains("panicked") && !err.contains("memory allocation"), "{err}");
}

/// `--dump` refuses a folder that already holds files (it overwrote README.md).
#[test]
fn dump_into_a_folder_with_files_exits_2() {
    let dir = scratch("dump-full");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("README.md"), "mine").unwrap();
    let out = conform(&["--backend", "host", "--workload", "scan", "--dump", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(dir.join("README.md")).unwrap(), "mine");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_library_baseline_is_attached_to_its_device_and_size_only() {
    let dir = scratch("baseline");
    std::fs::create_dir_all(&dir).unwrap();
    let (json, file) = (dir.join("report.json"), dir.join("baseline.json"));
    let args = ["--backend", "host", "--workload", "reduce", "--json", json.to_str().unwrap()];
    assert_eq!(conform(&args).status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let device = report["runs"][0]["device"]["name"].as_str().unwrap().to_string();
    let baseline = |device: &str, elements: u64| {
        let text = serde_json::json!({
            "device": device, "elements": elements, "warmup": 1, "repeats": 3,
            "entries": [{ "workload": "reduce", "library": "lib.sum", "ms": 0.25, "gbps": 16.8 }]
        });
        std::fs::write(&file, text.to_string()).unwrap();
    };
    let with = |extra: &[&str]| conform(&[&args[..], &["--baseline", file.to_str().unwrap()], extra].concat());

    baseline(&device, 1 << 20);
    let out = with(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("vs lib.sum 0.250 ms"));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ratios = report["runs"][0]["baseline"]["ratios"].as_array().unwrap();
    assert_eq!(ratios.len(), 4, "one per reduce variant");
    for r in ratios {
        let (hetero, library) = (r["hetero_ms"].as_f64().unwrap(), r["library_ms"].as_f64().unwrap());
        assert_eq!(library, 0.25);
        assert!((r["ratio"].as_f64().unwrap() - hetero / library).abs() < 1e-12);
    }

    baseline("some other device", 1 << 20);
    let out = with(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("no library baseline"), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(report["runs"][0].get("baseline").is_none());

    baseline(&device, 1 << 28);
    let out = with(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--size large"), "{}", stderr(&out));
    std::fs::remove_dir_all(dir).unwrap();
}

/// `cargo xtask conform --help` (and `stress --help`) answer from copies
/// of the tools' help kept in xtask, so that they need no build; the copies
/// must stay what the tools print.
#[rstest]
#[case::conform(env!("CARGO_BIN_EXE_conform"), "conform")]
#[case::stress(env!("CARGO_BIN_EXE_stress"), "stress")]
fn xtask_keeps_the_tools_help(#[case] exe: &str, #[case] name: &str) {
    let out = Command::new(exe).arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../xtask/help/{name}.txt"));
    let kept = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        kept,
        "regenerate with `cargo run --release -p conformance --bin {name} -- --help > xtask/help/{name}.txt`"
    );
}

/// `conform` on the host's scan alone, writing each `(flag, path)` output.
fn scan_writing(outputs: &[(&str, &Path)]) -> Output {
    let mut args = vec!["--backend", "host", "--workload", "scan"];
    for (flag, path) in outputs {
        args.extend([*flag, path.to_str().unwrap()]);
    }
    conform(&args)
}

/// Whether this process runs as root (who could replace `/dev/full`).
fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Regression (data loss): a FIFO given as an output became a regular
/// file holding the report, and its reader never got it.
#[cfg(unix)]
#[test]
fn a_fifo_output_is_written_in_place_to_its_reader() {
    let dir = scratch("fifo");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("report.json");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        println!("skipped: mkfifo is not available");
        return;
    }
    // A second name for the FIFO, through which the test can reach it
    // should conform have replaced the first.
    let keep = dir.join("keep");
    std::fs::hard_link(&fifo, &keep).unwrap();
    // The reader opens the FIFO after conform has started, and reads to its end.
    let path = fifo.clone();
    let reader = std::thread::spawn(move || std::fs::read_to_string(path).unwrap());
    let out = scan_writing(&[("--json", &fifo)]);
    // Should conform not have written the FIFO, the reader still waits for
    // a writer: this one ends its wait with nothing, so the test fails
    // instead of hanging.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !reader.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if !reader.is_finished() {
        drop(std::fs::OpenOptions::new().write(true).open(&keep));
    }
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = reader.join().unwrap();
    let report: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("the reader did not get the report ({e}): {text:?}"));
    assert!(report["runs"].is_array(), "{report}");
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO stays a FIFO");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Regression (data loss): a symbolic link given as an output was
/// replaced by a regular file, and its target kept its old content.
#[cfg(unix)]
#[test]
fn a_symlink_output_writes_its_target_and_stays_a_link() {
    let dir = scratch("symlink");
    std::fs::create_dir_all(dir.join("d")).unwrap();
    let (real, link) = (dir.join("d/real.json"), dir.join("link.json"));
    std::fs::write(&real, "old").unwrap();
    std::os::unix::fs::symlink("d/real.json", &link).unwrap();
    let out = scan_writing(&[("--json", &link)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link stays a link");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
    assert!(report["runs"].is_array(), "the target holds the report");
    assert_eq!(std::fs::read_dir(dir.join("d")).unwrap().count(), 1, "no temporary file is left beside the target");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Regression: two outputs naming one file through a symbolic link were
/// not refused (the check compared paths as written).
#[cfg(unix)]
#[test]
fn outputs_aliased_by_a_symlink_exit_2() {
    let dir = scratch("alias");
    std::fs::create_dir_all(&dir).unwrap();
    let (same, alias) = (dir.join("same"), dir.join("alias"));
    std::fs::write(&same, "keep").unwrap();
    std::os::unix::fs::symlink(&same, &alias).unwrap();
    let out = scan_writing(&[("--json", &same), ("--html", &alias)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--json") && stderr(&out).contains("--html"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&same).unwrap(), "keep");
    // A new file named two ways (through `..`) is refused as well.
    let twice = [dir.join("new.json"), dir.join("sub/../new.json")];
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let out = scan_writing(&[("--json", &twice[0]), ("--markdown", &twice[1])]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Regression (data loss): `--json /dev/full` exited 0 and, as root,
/// replaced the device node with a file. A device is written in place, so
/// its write error (ENOSPC) is exit 2. Reached through a link in a scratch
/// folder, so that even a regression replaces only the link; `/dev/full`
/// itself only when the test cannot replace it (unprivileged).
#[cfg(unix)]
#[test]
fn a_device_output_is_written_in_place_and_its_error_exits_2() {
    if !Path::new("/dev/full").exists() {
        println!("skipped: this machine has no /dev/full");
        return;
    }
    let dir = scratch("devfull");
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("full.json");
    std::os::unix::fs::symlink("/dev/full", &link).unwrap();
    let mut paths = vec![link.clone()];
    if is_root() {
        println!("skipped: `--json /dev/full` itself, since this test runs as root");
    } else {
        paths.push(PathBuf::from("/dev/full"));
    }
    for path in &paths {
        for flag in ["--json", "--markdown", "--trace", "--html"] {
            let out = scan_writing(&[(flag, path)]);
            assert_eq!(out.status.code(), Some(2), "{flag} {}: {}", path.display(), stderr(&out));
            assert!(stderr(&out).contains(flag), "{}", stderr(&out));
            assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link stays");
        }
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/full").unwrap().file_type().is_char_device());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Regression: an allocator setting that is not understood ran the suite
/// and failed every check (exit 1) instead of refusing to run (exit 2);
/// an empty one failed every allocation; a repeated key was accepted.
#[rstest]
#[case::garbage("garbage", Some(2), "garbage")]
#[case::repeated("device=direct,device=caching", Some(2), "twice")]
#[case::empty("", Some(0), "")]
fn allocator_settings_are_checked_before_running(#[case] value: &str, #[case] code: Option<i32>, #[case] named: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_conform"))
        .args(["--backend", "host", "--workload", "scan"])
        .env("HETERO_ALLOCATOR", value)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), code, "{}", stderr(&out));
    assert!(stderr(&out).contains(named) && !stderr(&out).contains("panicked"), "{}", stderr(&out));
}

fn conform_with_host_devices(devices: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_conform"))
        .env("HETERO_HOST_DEVICES", devices)
        .args(args)
        .output()
        .expect("conform starts")
}

/// Several devices of a backend in one run: `--device all` and a list run
/// each, the report names each device's index, and later devices are
/// compared with the first.
#[test]
fn every_device_of_a_backend_runs() {
    let dir = scratch("all-devices");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let args = ["--backend", "host", "--device", "all", "--workload", "reduce", "--json", json.to_str().unwrap()];
    let out = conform_with_host_devices("2", &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ordinals: Vec<u64> =
        report["runs"].as_array().unwrap().iter().map(|r| r["device"]["ordinal"].as_u64().unwrap()).collect();
    assert_eq!(ordinals, [0, 1]);
    let compared = &report["runs"][1]["results"][0]["comparison"];
    assert_eq!(compared["max_abs"], 0.0, "two-pass sums agree exactly across devices: {compared}");
    // Node health as data: device 1 against its peer, device 0, per output
    // and in sum.
    let peer = &report["runs"][1]["results"][0]["peer"];
    assert_eq!(peer["agree"], true, "{peer}");
    assert!(peer["against"].as_str().is_some_and(|a| a.contains("#0")), "{peer}");
    assert!(report["runs"][0]["results"][0].get("peer").is_none(), "the peer itself has none");
    let health = report["node_health"].as_array().expect("node_health in the JSON report");
    assert_eq!(health.len(), 1, "{health:?}");
    assert_eq!(health[0]["device"], 1);
    assert!(health[0]["compared"].as_u64().is_some_and(|n| n > 0), "{health:?}");
    assert_eq!(health[0]["disagree"], serde_json::json!([]));
    assert!(health[0]["time_ratio"].as_f64().is_some_and(|r| r > 0.0), "{health:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("#1  reduce"), "{}", String::from_utf8_lossy(&out.stdout));
    let out = conform_with_host_devices("3", &["--backend", "host", "--device", "2,0", "--workload", "reduce"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `--wave-variants` runs the variants named, and `sync` (the others'
/// baseline), on every device, so that a run at size large on many devices
/// fits a time limit; a name it does not know exits 2, naming it.
#[test]
fn wave_variants_choose_what_runs() {
    let dir = scratch("wave-variants");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let args = [
        "--backend",
        "host",
        "--device",
        "all",
        "--workload",
        "wave",
        "--wave-variants",
        "graph,split-overlap",
        "--json",
        json.to_str().unwrap(),
    ];
    let out = conform_with_host_devices("2", &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let variants = |run: usize| -> Vec<String> {
        report["runs"][run]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["variant"].as_str().unwrap().into())
            .collect()
    };
    assert_eq!(variants(0), ["sync", "graph", "split-overlap"]);
    assert_eq!(variants(1), ["sync", "graph"]);
    let out = conform(&["--backend", "host", "--workload", "wave", "--wave-variants", "graph,nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("nope"), "{}", stderr(&out));
}

/// Bad device lists and host-device counts exit 2 naming the value and the
/// devices there are; existing reports stay as they were.
#[rstest::rstest]
#[case::beyond("2", &["--device", "5"], "no device 5; its devices are 0: ")]
#[case::repeated("2", &["--device", "1,1"], "device 1 (")]
#[case::empty_list("2", &["--device", ""], "is not a list of devices")]
#[case::empty_member("2", &["--device", "0,,1"], "is not a list of devices")]
#[case::zero_devices("0", &["--device", "all"], "HETERO_HOST_DEVICES=\"0\"")]
#[case::garbage("many", &[], "HETERO_HOST_DEVICES=\"many\"")]
#[case::huge("100000", &[], "from 1 to 64")]
fn bad_device_choices_exit_2(#[case] devices: &str, #[case] args: &[&str], #[case] named: &str) {
    let dir = scratch(&format!("bad-devices-{devices}-{}", args.join("_").replace(',', ".")));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    std::fs::write(&json, "keep").unwrap();
    let mut all = vec!["--backend", "host", "--workload", "reduce", "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = conform_with_host_devices(devices, &all);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(named), "`{named}` missing from: {}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "keep");
}
