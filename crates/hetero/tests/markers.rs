//! Profiler markers reach the profiler a program runs under: NVTX through
//! an injection library as Nsight tools load one, rocTX as a library.
//! Two probes written in C stand in for the profilers and log every call
//! (`tests/markers/*.c`); the NVTX probe implements the tool side of NVTX
//! 3's injection protocol, the same one NVIDIA's own header-only NVTX
//! drives. Which profiler is chosen once per process, so each case runs the
//! ignored `child_work` test in a child process with its own environment.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::path::{Path, PathBuf};
use std::process::Command;

use hetero::markers::{self, MARKERS_ENV, Profiler, ROCTX_LIBRARY_ENV};
use hetero::{BlockRequest, Context, ErrorKind, LaunchConfig, backend::host::HostDevice};

const LOG_ENV: &str = "HETERO_PROBE_LOG";

/// Builds a probe library from its C source with the system's C compiler
/// (the one Rust links with).
/// Each case builds its own copy: tests run in parallel.
fn probe(name: &str, case: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/markers").join(format!("{name}.c"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("lib{name}-{case}.so"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("{cc} (the C compiler Rust links with) could not run: {e}"));
    assert!(status.success(), "{cc} could not build {}", src.display());
    out
}

/// Runs `child_work` with `env` (and without the profilers' variables of
/// this process); returns its output and the probe's log.
fn child(case: &str, env: &[(&str, &std::ffi::OsStr)]) -> (String, String) {
    let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("markers-{case}.log"));
    let _ = std::fs::remove_file(&log);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_work", "--ignored", "--nocapture", "--test-threads=1"]);
    for var in [MARKERS_ENV, ROCTX_LIBRARY_ENV, "NVTX_INJECTION64_PATH", "ROCP_TOOL_LIBRARIES", "HSA_TOOLS_LIB"] {
        cmd.env_remove(var);
    }
    cmd.env(LOG_ENV, &log);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{case}: the child failed:\n{text}");
    assert!(text.contains("1 passed"), "{case}: child_work did not run:\n{text}");
    (text, std::fs::read_to_string(&log).unwrap_or_default())
}

/// The operations and phases the child runs, as their ranges are named.
const EXPECTED: [&str; 7] = [
    "push hetero build_module",
    "push hetero copy_from_host",
    "push hetero launch affine_u32",
    "push hetero fill",
    "push hetero copy_to_host",
    "push hetero synchronize",
    "push phase 7",
];

/// Every expected range is pushed, the mark is seen, and pushes and pops
/// pair up (never more pops than pushes at any point).
fn assert_ranges(case: &str, log: &str) {
    for want in EXPECTED {
        assert!(log.lines().any(|l| l == want), "{case}: no `{want}` in the probe's log:\n{log}");
    }
    assert!(log.lines().any(|l| l == "mark checkpoint"), "{case}: no mark:\n{log}");
    let mut depth = 0i64;
    for l in log.lines() {
        if l.starts_with("push ") {
            depth += 1;
        } else if l.starts_with("pop") {
            depth -= 1;
            assert!(depth >= 0, "{case}: a pop without a push:\n{log}");
        }
    }
    assert_eq!(depth, 0, "{case}: ranges left open:\n{log}");
}

/// Not run on its own: the cases below run it in a child process.
#[test]
#[ignore = "run in a child process by the other tests of this file"]
fn child_work() {
    let ctx = Context::new(HostDevice::new());
    match markers::profiler() {
        Err(e) if e.config => {
            let refused = ctx.stream().map(|_| ()).unwrap_err();
            assert_eq!(refused.kind, ErrorKind::Config);
            println!("stream refused: {refused}");
            return;
        }
        Err(e) => println!("profiler error: {e}"),
        Ok(p) => println!("profiler: {p}"),
    }
    let _phase = markers::range_named(|| format!("phase {}", 7));
    let module = ctx.build_module(hetero::kernels::UTIL).unwrap();
    let affine = module.kernel("affine_u32").unwrap();
    let stream = ctx.stream().unwrap();
    let mut x = ctx.alloc::<u32>(4).unwrap();
    stream.copy_from_host(&[1, 2, 3, 4], &mut x).unwrap();
    let n = 4u32;
    {
        let xs = x.slice_mut(..).unwrap();
        let config = LaunchConfig::covering([n, 1, 1], [affine.block_size(BlockRequest::new(64)), 1, 1], 0);
        // SAFETY: affine_u32(x, n, a, b) touches x[0..n), and x holds n elements.
        unsafe { stream.launch(&affine, config, &[(&xs).into(), n.into(), 3u32.into(), 1u32.into()]).unwrap() };
    }
    markers::mark(c"checkpoint");
    let mut y = ctx.alloc::<u32>(4).unwrap();
    stream.fill(&mut y, 9u32).unwrap();
    let mut out = [0u32; 4];
    stream.copy_to_host(&x, &mut out).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out, [4, 7, 10, 13]);
}

#[test]
fn nvtx_injection_library_receives_every_operation() {
    let lib = probe("nvtx_probe", "nvtx");
    let (out, log) = child("nvtx", &[("NVTX_INJECTION64_PATH", lib.as_os_str())]);
    assert!(out.contains(&format!("profiler: {}", Profiler::Nvtx)), "{out}");
    assert!(log.starts_with("attached version 3\n"), "the probe saw no NVTX 3 export table:\n{log}");
    assert_ranges("nvtx", &log);
}

#[test]
fn roctx_library_receives_every_operation() {
    let lib = probe("roctx_probe", "roctx");
    let (out, log) = child("roctx", &[(MARKERS_ENV, "roctx".as_ref()), (ROCTX_LIBRARY_ENV, lib.as_os_str())]);
    assert!(out.contains(&format!("profiler: {}", Profiler::Roctx)), "{out}");
    assert_ranges("roctx", &log);
}

/// rocprofv3 sets `ROCP_TOOL_LIBRARIES` in the program it starts: rocTX is
/// attached without being asked for.
#[test]
fn roctx_is_attached_under_a_rocm_profiler() {
    let lib = probe("roctx_probe", "roctx-auto");
    let env = [("ROCP_TOOL_LIBRARIES", "librocprofiler-sdk-tool.so".as_ref()), (ROCTX_LIBRARY_ENV, lib.as_os_str())];
    let (out, log) = child("roctx-auto", &env);
    assert!(out.contains("profiler: rocTX"), "{out}");
    assert_ranges("roctx-auto", &log);
}

#[test]
fn markers_off_reach_no_profiler() {
    let lib = probe("nvtx_probe", "off");
    let env = [(MARKERS_ENV, "off".as_ref()), ("NVTX_INJECTION64_PATH", lib.as_os_str())];
    let (out, log) = child("off", &env);
    assert!(out.contains("profiler: none"), "{out}");
    assert!(log.is_empty(), "the probe was called although markers are off:\n{log}");
}

/// A profiler's library that cannot be loaded, or is not what it should
/// be, is reported by `markers::profiler` with the path; the work runs.
#[test]
fn a_missing_or_wrong_profiler_library_is_reported_and_work_runs() {
    let (out, _) = child("missing", &[("NVTX_INJECTION64_PATH", "/nonexistent/libinjection.so".as_ref())]);
    assert!(
        out.contains("profiler error: NVTX_INJECTION64_PATH=/nonexistent/libinjection.so cannot be loaded"),
        "{out}"
    );
    let roctx = probe("roctx_probe", "wrong");
    let (out, _) = child("wrong", &[("NVTX_INJECTION64_PATH", roctx.as_os_str())]);
    assert!(out.contains("is not an NVTX injection library"), "{out}");
    let (out, _) = child("nvtx-unset", &[(MARKERS_ENV, "nvtx".as_ref())]);
    assert!(out.contains("NVTX_INJECTION64_PATH is not set"), "{out}");
    let (out, _) =
        child("roctx-missing", &[(MARKERS_ENV, "roctx".as_ref()), (ROCTX_LIBRARY_ENV, "/nonexistent/x.so".as_ref())]);
    assert!(out.contains("profiler error: no rocTX library could be loaded (/nonexistent/x.so:"), "{out}");
}

/// A value of `HETERO_MARKERS` that is not understood makes stream creation
/// fail with a message naming the variable and its values.
#[test]
fn a_bad_markers_setting_refuses_streams() {
    let (out, _) = child("bad", &[(MARKERS_ENV, "loud".as_ref())]);
    assert!(
        out.contains(r#"stream refused: host backend: stream failed: HETERO_MARKERS="loud" is not understood; use auto, off, nvtx or roctx"#),
        "{out}"
    );
}
