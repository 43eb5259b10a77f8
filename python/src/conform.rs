//! `hetero.conform`: the conformance run of `cargo xtask conform`, with its
//! report as a dict (the JSON report's schema, `docs/report-schema.md`).

use clap::Parser;
use conformance::cli::Cli;
use conformance::{Selection, session};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// Runs the conformance workloads and returns the report. The arguments
/// are `conform`'s options: `backend` (`auto`, `all`, or names joined by
/// commas), `workloads` (names joined by commas), `size`, `device`,
/// `seed` and `deterministic`. Refused with `ValueError` for an option
/// `conform` would refuse, `RuntimeError` when the request cannot run
/// (a requested backend is missing). A check that fails is in the report,
/// not an exception: see `report["runs"][i]["results"][j]["passed"]`.
#[pyfunction]
#[pyo3(signature = (backend = "auto", workloads = "reduce,scan,pull,wave,bandwidth", size = "small", device = "0", seed = None, deterministic = false))]
pub(crate) fn conform(
    py: Python<'_>,
    backend: &str,
    workloads: &str,
    size: &str,
    device: &str,
    seed: Option<u64>,
    deterministic: bool,
) -> PyResult<Py<PyAny>> {
    let mut args = vec![
        "conform".to_string(),
        format!("--backend={backend}"),
        format!("--workload={workloads}"),
        format!("--size={size}"),
        format!("--device={device}"),
    ];
    args.extend(seed.map(|s| format!("--seed={s}")));
    if deterministic {
        args.push("--deterministic".to_string());
    }
    let cli = Cli::try_parse_from(&args).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let text = py.detach(move || -> Result<String, String> {
        let tuning = session::tuning(&cli);
        let (contexts, unavailable) = session::prepare(&cli, &tuning)?;
        let selection =
            Selection { workloads: cli.workload.clone(), size: cli.size, seed: cli.seed, dump: None, tuning };
        let runs = session::run_all(&contexts, &selection, |_, _| {}, |_, _| {});
        let report = session::report(&selection, cli.deterministic, runs, unavailable, cli.slow_threshold);
        serde_json::to_string(&report).map_err(|e| e.to_string())
    });
    let text = text.map_err(PyRuntimeError::new_err)?;
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
}
