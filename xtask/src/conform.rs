//! `cargo xtask conform`: pick backend features, build, run.

use std::process::{Command, ExitCode};

/// Backend names that are also cargo features of the `conformance` crate.
const BACKENDS: [&str; 4] = ["host", "opencl", "cuda", "hip"];

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// `cargo run --release` of binary `bin` of `package` with `features`
/// (`None`: the crate's defaults) and `args`; its exit status, or 2 when
/// cargo cannot be started.
fn run_bin(package: &str, bin: &str, features: Option<&[String]>, args: &[String]) -> ExitCode {
    let mut cargo_run = Command::new(cargo());
    cargo_run.args(["run", "--release", "--quiet", "--package", package, "--bin", bin]);
    if let Some(features) = features {
        cargo_run.args(["--no-default-features", "--features", &features.join(",")]);
    }
    exit_of(cargo_run.arg("--").args(args), bin)
}

/// The exit status of `cargo_run` (2 when cargo cannot be started).
fn exit_of(cargo_run: &mut Command, tool: &str) -> ExitCode {
    match cargo_run.status() {
        Ok(s) => ExitCode::from(s.code().map_or(2, |c| u8::try_from(c).unwrap_or(2))),
        Err(e) => {
            eprintln!("cargo xtask {tool}: cannot run cargo: {e}");
            ExitCode::from(2)
        }
    }
}

/// The help of each tool xtask builds, as the tool prints it (`--help`),
/// so that asking for it needs no build. Tests of the tools' crates keep
/// these files equal to the tools' own output.
const HELP: [(&str, &str); 3] = [
    ("conform", include_str!("../help/conform.txt")),
    ("stress", include_str!("../help/stress.txt")),
    ("bench", include_str!("../help/bench.txt")),
];

/// The answer to `--help`/`-h` (the tool's full help) or `--version`/`-V`
/// among `args` for tool `bin`, without building it; `None` when `args`
/// ask for neither (or follow a `--`).
pub fn answer(bin: &str, args: &[String]) -> Option<ExitCode> {
    let asked = |flags: [&str; 2]| args.iter().take_while(|a| *a != "--").any(|a| flags.contains(&a.as_str()));
    if asked(["--help", "-h"]) {
        let help = HELP.iter().find(|(name, _)| *name == bin)?.1;
        print!("{help}");
        return Some(ExitCode::SUCCESS);
    }
    if asked(["--version", "-V"]) {
        // The tools share the workspace's version with xtask.
        println!("{bin} {}", env!("CARGO_PKG_VERSION"));
        return Some(ExitCode::SUCCESS);
    }
    None
}

/// Builds and runs `conform` with `args`; returns its exit status (2 when
/// it cannot be built or started).
pub fn run(args: &[String]) -> ExitCode {
    run_for_backends("conformance", "conform", "auto", args)
}

/// Builds and runs the `stress` tool with the features of its `--backend`
/// list (default `host`); returns its exit status.
pub fn run_stress(args: &[String]) -> ExitCode {
    run_for_backends("conformance", "stress", "host", args)
}

/// Builds and runs the `bench` tool with the features of its `--backend`
/// list (default every backend); returns its exit status.
pub fn run_bench(args: &[String]) -> ExitCode {
    run_for_backends("bench", "bench", "auto", args)
}

/// Runs binary `bin` of `package` built with the features of the backends
/// its `--backend` argument names (`default` when it names none).
fn run_for_backends(package: &str, bin: &str, default: &str, args: &[String]) -> ExitCode {
    let available = match package_features(&cargo(), package) {
        Ok(features) => features,
        Err(e) => {
            eprintln!("cargo xtask {bin}: cannot read the workspace: {e}");
            return ExitCode::from(2);
        }
    };
    let backend = requested_backend(args).unwrap_or(default);
    run_bin(package, bin, Some(&features_for(backend, &available)), args)
}

/// Builds and runs the `report` tool of the conformance crate with `args`.
/// `hip-compile`: hetero's `hip_compile` example, with the HIP backend.
pub fn run_hip_compile(args: &[String]) -> ExitCode {
    let mut cargo_run = Command::new(cargo());
    cargo_run.args(["run", "--release", "--quiet", "--package", "hetero", "--features", "hip"]);
    exit_of(cargo_run.args(["--example", "hip_compile", "--"]).args(args), "hip-compile")
}

pub fn run_report(args: &[String]) -> ExitCode {
    run_bin("conformance", "report", None, args)
}

/// The value of `--backend` (either `--backend X` or `--backend=X`), if given.
fn requested_backend(args: &[String]) -> Option<&str> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--backend" {
            return iter.next().map(String::as_str);
        }
        if let Some(value) = arg.strip_prefix("--backend=") {
            return Some(value);
        }
    }
    None
}

/// Features to build with: `host` always, plus the requested backends (a
/// comma-separated list, or every backend for `auto` and `all`) when the
/// crate has those features. A backend the crate lacks is left to the
/// binary, which reports it (exit 2).
fn features_for(backend: &str, available: &[String]) -> Vec<String> {
    let wanted: Vec<&str> = match backend {
        "auto" | "all" => BACKENDS.to_vec(),
        list => std::iter::once("host").chain(list.split(',').map(str::trim)).collect(),
    };
    let mut features: Vec<String> = Vec::new();
    for f in wanted {
        if available.iter().any(|a| a == f) && !features.iter().any(|g| g == f) {
            features.push(f.to_string());
        }
    }
    features
}

/// Backend features declared by `package`.
fn package_features(cargo: &str, package: &str) -> Result<Vec<String>, String> {
    let output = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|e| e.to_string())?;
    let package = metadata["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == package))
        .ok_or_else(|| format!("no `{package}` package in the workspace"))?;
    let features = package["features"].as_object().ok_or("the package has no feature table")?;
    Ok(BACKENDS.iter().filter(|b| features.contains_key(**b)).map(|b| b.to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn help_and_version_need_no_build() {
        assert!(answer("conform", &strings(&["--backend", "host"])).is_none());
        assert!(answer("conform", &strings(&["--help"])).is_some());
        assert!(answer("bench", &strings(&["-V"])).is_some());
        assert!(answer("conform", &strings(&["--", "--help"])).is_none(), "after `--` it is the tool's argument");
        assert!(HELP.iter().all(|(bin, help)| help.contains(&format!("Usage: {bin}"))));
    }

    #[test]
    fn backend_argument_forms() {
        assert_eq!(requested_backend(&strings(&["--size", "small"])), None);
        assert_eq!(requested_backend(&strings(&["--backend", "cuda"])), Some("cuda"));
        assert_eq!(requested_backend(&strings(&["--seed", "3", "--backend=hip"])), Some("hip"));
    }

    #[test]
    fn features_follow_what_the_crate_has() {
        let have = strings(&["host", "opencl"]);
        assert_eq!(features_for("auto", &have), ["host", "opencl"]);
        assert_eq!(features_for("all", &have), ["host", "opencl"]);
        assert_eq!(features_for("cuda", &have), ["host"]);
        assert_eq!(features_for("opencl", &have), ["host", "opencl"]);
        assert_eq!(features_for("host", &have), ["host"]);
        assert_eq!(features_for("nonsense", &have), ["host"]);
        assert_eq!(features_for("opencl,host", &have), ["host", "opencl"]);
        assert_eq!(features_for("host, opencl,cuda", &have), ["host", "opencl"]);
    }
}
