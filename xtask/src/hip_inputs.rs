//! `cargo xtask hip-inputs [DIR]`: fetches what the HIP-on-NVIDIA harness
//! (`ci/hip-nvidia/`) compiles against, on a machine with package access,
//! so a GPU node without network only has to build it.
//!
//! DIR (default `.gpu/hip`) receives `include/hip` (HIP 5.2.3's headers,
//! NVIDIA platform included, from Debian's `libamdhip64-dev`), CUDA 11.8's
//! headers from NVIDIA's PyPI wheels (`include/`), and `lib/libcudart.so.11.0`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The wheels, pinned: CUDA 11.8 is the newest whose headers HIP 5.2.3's
/// NVIDIA-platform code compiles against.
const WHEELS: [&str; 4] = [
    "nvidia-cuda-runtime-cu11==11.8.89",
    "nvidia-cuda-nvcc-cu11==11.8.89",
    "nvidia-cuda-nvrtc-cu11==11.8.89",
    "nvidia-cuda-profiler-api-cu11==11.8.86",
];

fn run(command: &mut Command) -> Result<(), String> {
    let status = command.status().map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{command:?} failed with {status}")) }
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    run(Command::new("cp").arg("-r").arg(format!("{}/.", from.display())).arg(to))
}

fn fetch(dir: &Path) -> Result<(), String> {
    let work = std::env::temp_dir().join(format!("hetero-hip-inputs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
    run(Command::new("apt-get").args(["download", "-q", "libamdhip64-dev"]).current_dir(&work))?;
    run(Command::new("python3")
        .args(["-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--platform", "manylinux2014_x86_64"])
        .args(["--python-version", "3.11", "-d"])
        .arg(&work)
        .args(WHEELS))?;
    let unpacked = work.join("unpacked");
    for entry in std::fs::read_dir(&work).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        match path.extension().and_then(|e| e.to_str()) {
            Some("deb") => run(Command::new("dpkg").arg("-x").arg(&path).arg(&unpacked))?,
            Some("whl") => run(Command::new("python3").args(["-m", "zipfile", "-e"]).arg(&path).arg(&unpacked))?,
            _ => {}
        }
    }
    let _ = std::fs::remove_dir_all(dir);
    let (include, lib) = (dir.join("include"), dir.join("lib"));
    std::fs::create_dir_all(&include).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&lib).map_err(|e| e.to_string())?;
    copy_tree(&unpacked.join("usr/include"), &include)?;
    for wheel in ["cuda_runtime", "cuda_nvcc", "cuda_nvrtc", "cuda_profiler_api"] {
        copy_tree(&unpacked.join("nvidia").join(wheel).join("include"), &include)?;
    }
    std::fs::copy(unpacked.join("nvidia/cuda_runtime/lib/libcudart.so.11.0"), lib.join("libcudart.so.11.0"))
        .map_err(|e| format!("libcudart.so.11.0: {e}"))?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// Fetches the inputs into `dir`.
pub fn run_command(dir: Option<PathBuf>) -> ExitCode {
    let dir = dir.unwrap_or_else(|| PathBuf::from(".gpu/hip"));
    match fetch(&dir) {
        Ok(()) => {
            println!("HIP-on-NVIDIA inputs in {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cargo xtask hip-inputs: {e}");
            ExitCode::from(2)
        }
    }
}
