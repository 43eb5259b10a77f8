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
    match cargo_run.arg("--").args(args).status() {
        Ok(s) => ExitCode::from(s.code().map_or(2, |c| u8::try_from(c).unwrap_or(2))),
        Err(e) => {
            eprintln!("cargo xtask {bin}: cannot run cargo: {e}");
            ExitCode::from(2)
        }
    }
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
