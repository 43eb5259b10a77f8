//! The CUDA and HIP loaders against stand-in libraries that break their
//! contracts: a runtime that leaves a device name without its NUL or
//! reports a million devices, an empty or relative `ROCM_PATH`/`HIP_PATH`
//! that must not load a library planted in the current directory, a
//! `libamdhip64.so` that is not a library, and an empty `HETERO_NVRTC`.
//! Each stand-in is built here from C with the system's C compiler;
//! libraries are loaded once per process, so each case runs the ignored
//! `child_discovers` test in a child process with its own environment.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use hetero::Backend;

/// A stand-in HIP runtime: every function the backend resolves, each
/// returning success and writing nothing, but for the few a case needs.
/// `hipGetDeviceCount` reports `STANDIN_COUNT`; `hipDeviceGetName` fills
/// the whole buffer and leaves no NUL; loading it writes the file that
/// `STANDIN_MARK` names, so a test sees whether it was loaded at all.
fn standin_hip_source() -> String {
    let special = ["hipGetDeviceCount", "hipDeviceGetName", "hipGetErrorName", "hipGetErrorString"];
    let mut c = String::from(
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\
         __attribute__((constructor)) static void loaded(void) {\n\
           const char *mark = getenv(\"STANDIN_MARK\");\n\
           if (mark) { FILE *f = fopen(mark, \"w\"); if (f) fclose(f); }\n}\n\
         int hipGetDeviceCount(int *count) { const char *n = getenv(\"STANDIN_COUNT\"); *count = n ? atoi(n) : 1; return 0; }\n\
         int hipDeviceGetName(char *name, int len, int device) { (void)device; memset(name, 'A', (size_t)len); return 0; }\n\
         const char *hipGetErrorName(int code) { (void)code; return \"standinError\"; }\n\
         const char *hipGetErrorString(int code) { (void)code; return \"stand-in error\"; }\n",
    );
    for name in hetero::backend::hip::ffi::SYMBOLS.iter().filter(|n| !special.contains(n)) {
        c += &format!("int {name}(void) {{ return 0; }}\n");
    }
    c
}

/// Builds `source` as a shared library at `out`.
fn build(source: &str, out: &Path) {
    let dir = out.parent().unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let src = out.with_extension("c");
    std::fs::write(&src, source).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-w", "-o"])
        .arg(out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("{cc} (the C compiler Rust links with) could not run: {e}"));
    assert!(status.success(), "{cc} could not build {}", src.display());
}

/// A folder of this case's own.
fn scratch(case: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("loaders-{case}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A ROCm folder whose `lib/` holds the stand-in as the runtime and hiprtc.
fn standin_rocm(case: &str) -> PathBuf {
    let root = scratch(case);
    let lib = root.join("lib/libamdhip64.so");
    build(&standin_hip_source(), &lib);
    std::fs::copy(&lib, root.join("lib/libhiprtc.so")).unwrap();
    root
}

/// Runs `child_discovers` for `backend` in `dir` with `env`, killed after
/// a minute (a million devices took 23 s and 8.6 GB); its output.
fn child(backend: &str, dir: &Path, env: &[(&str, &std::ffi::OsStr)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_discovers", "--ignored", "--nocapture", "--test-threads=1"]).current_dir(dir);
    for var in ["ROCM_PATH", "HIP_PATH", "HETERO_NVRTC", "STANDIN_COUNT", "STANDIN_MARK"] {
        cmd.env_remove(var);
    }
    cmd.env("LOADERS_BACKEND", backend).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut process = cmd.spawn().unwrap();
    let started = Instant::now();
    while process.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = process.kill();
            panic!("discovery did not return within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = process.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "the child failed:\n{text}");
    text
}

/// The child: discovers `LOADERS_BACKEND` and prints each device's name
/// and each reason, one a line.
#[test]
#[ignore = "run by the tests above in a child process"]
fn child_discovers() {
    let backend: Backend = std::env::var("LOADERS_BACKEND").unwrap().parse().unwrap();
    let found = hetero::discover(backend);
    for device in &found.devices {
        println!("device: {}", hetero::Device::info(device).name);
    }
    for reason in &found.unavailable {
        println!("unavailable: {reason}");
    }
}

/// A name that fills its buffer with no NUL is read to the buffer's end:
/// it was read with `CStr::from_ptr`, past the 256-byte stack buffer
/// (AddressSanitizer: stack-buffer-overflow, READ of size 257).
#[test]
fn a_name_without_its_nul_is_read_to_the_buffer_end() {
    let root = standin_rocm("name");
    let out = child("hip", &root, &[("ROCM_PATH", root.as_os_str())]);
    let want = format!("device: {}\n", "A".repeat(256));
    assert!(out.contains(&want), "the device is named by the buffer's 256 bytes exactly:\n{out}");
}

/// A runtime reporting a million devices is an error naming the count: it
/// opened all of them (8.6 GB resident, 23 s).
#[test]
fn an_absurd_device_count_is_refused() {
    let root = standin_rocm("count");
    for count in ["1000000", "2147483647", "-1"] {
        let out = child("hip", &root, &[("ROCM_PATH", root.as_os_str()), ("STANDIN_COUNT", count.as_ref())]);
        assert!(!out.contains("device: "), "{count}: devices were opened:\n{out}");
        assert!(out.contains(&format!("reports {count} devices")) && out.contains("1024"), "{count}:\n{out}");
    }
}

/// An empty `ROCM_PATH` or `HIP_PATH` is unset, and a relative one is
/// refused: `ROCM_PATH=""` loaded `lib/libamdhip64.so` relative to the
/// current directory, running a planted library's constructor.
#[test]
fn an_empty_or_relative_rocm_path_loads_nothing_from_the_current_directory() {
    let planted = standin_rocm("planted");
    let mark = planted.join("planted-was-loaded");
    for (var, value) in [("ROCM_PATH", ""), ("HIP_PATH", ""), ("ROCM_PATH", "."), ("HIP_PATH", "lib/..")] {
        let _ = std::fs::remove_file(&mark);
        let out = child("hip", &planted, &[(var, value.as_ref()), ("STANDIN_MARK", mark.as_os_str())]);
        assert!(!mark.exists(), "{var}={value:?} loaded the library planted in the current directory:\n{out}");
        if !value.is_empty() {
            assert!(out.contains(&format!("{var}={value} is a relative path")), "{var}={value:?}:\n{out}");
        }
    }
}

/// A `libamdhip64.so` that is not a library is reported as such, with the
/// loader's reason, and not passed over for another install: it was
/// reported as not found, and every loader error ended in libloading's
/// bare "dlopen failed".
#[test]
fn a_library_that_cannot_load_says_why() {
    let root = scratch("not-elf");
    std::fs::create_dir_all(root.join("lib")).unwrap();
    std::fs::write(root.join("lib/libamdhip64.so"), "this is not a shared object\n").unwrap();
    let out = child("hip", &root, &[("ROCM_PATH", root.as_os_str())]);
    let line = out.lines().find(|l| l.contains("unavailable: ")).unwrap_or_else(|| panic!("no reason:\n{out}"));
    assert!(line.contains("could not be loaded") && line.contains("lib/libamdhip64.so"), "{line}");
    assert!(line.contains("dlopen failed: ") && !line.trim_end().ends_with("dlopen failed"), "{line}");
    assert!(!line.contains("was not found"), "{line}");
}

/// `HETERO_NVRTC=""` is unset: it was taken as a path (`dlopen("")` opens
/// the program itself, which is not NVRTC), so CUDA was reported
/// unavailable for that although NVRTC could be on the library path. A
/// stand-in `libcuda.so` on the library path gets discovery as far as NVRTC.
#[test]
fn an_empty_nvrtc_path_is_unset() {
    let dir = scratch("nvrtc");
    build("int cuInit(unsigned flags) { (void)flags; return 0; }\n", &dir.join("libcuda.so"));
    std::fs::copy(dir.join("libcuda.so"), dir.join("libcuda.so.1")).unwrap();
    let path = match std::env::var_os("LD_LIBRARY_PATH") {
        Some(old) => std::env::join_paths(std::iter::once(dir.clone()).chain(std::env::split_paths(&old))).unwrap(),
        None => dir.clone().into_os_string(),
    };
    let out = child("cuda", &dir, &[("HETERO_NVRTC", "".as_ref()), ("LD_LIBRARY_PATH", path.as_os_str())]);
    assert!(!out.contains("HETERO_NVRTC= "), "an empty HETERO_NVRTC was taken as a path:\n{out}");
    assert!(out.contains("unavailable: "), "{out}");
    let out = child("cuda", &dir, &[("HETERO_NVRTC", "libnvrtc.so".as_ref()), ("LD_LIBRARY_PATH", path.as_os_str())]);
    assert!(out.contains("HETERO_NVRTC=libnvrtc.so is a relative path"), "{out}");
}
