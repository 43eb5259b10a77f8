//! `conform`: run hetero's conformance workloads on the chosen backends and
//! print a pass/fail table with errors, tolerances and device times.
//!
//! Exit status: 0 when every check passed, 1 when one failed, 2 when the
//! request cannot run (bad arguments, a backend that is missing, an
//! unwritable output path).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use conformance::dump::Dump;
use conformance::report::{Report, SCHEMA_VERSION, Unavailable};
use conformance::{Selection, Size, Workload, inputs, run_device, table};
use hetero::{Backend, Context};

/// Which backends to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Choice {
    /// Every compiled-in backend whose runtime is present (host always).
    Auto,
    /// The embedded CPU backend.
    Host,
    /// OpenCL.
    Opencl,
    /// CUDA.
    Cuda,
    /// HIP.
    Hip,
    /// Every available backend, as `auto` (the cross-backend comparison's name).
    All,
}

#[derive(Debug, Parser)]
#[command(name = "conform", version, about = "Run hetero's conformance workloads and compare with float64 references")]
struct Cli {
    /// Backend(s) to run.
    #[arg(long, value_enum, default_value = "auto")]
    backend: Choice,
    /// Workloads to run, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "reduce,scan,pull,wave")]
    workload: Vec<Workload>,
    /// Problem size.
    #[arg(long, value_enum, default_value = "small")]
    size: Size,
    /// Seed of the inputs.
    #[arg(long, default_value_t = inputs::DEFAULT_SEED)]
    seed: u64,
    /// Device index within each backend.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Write the JSON report to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write every workload's inputs and outputs as .npy files under this directory.
    #[arg(long, value_name = "DIR")]
    dump: Option<PathBuf>,
    /// Write the results as JUnit XML to this file (one test case per backend, workload and variant).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write the comparison table as Markdown to this file.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Write every kernel and copy of pull and wave as Chrome trace-event JSON (open in Perfetto).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Write one self-contained HTML page: tables, device timelines, wavefield snapshots.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Stream counts of the pull variants, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4", value_parser = clap::value_parser!(u16).range(1..=64))]
    pull_streams: Vec<u16>,
    /// Also run pull with its inputs staged from pageable memory, to compare with pinned staging.
    #[arg(long)]
    pull_pageable: bool,
    /// Wave grid side in cells (default: by size).
    #[arg(long, value_name = "CELLS", value_parser = clap::value_parser!(u32).range(5..=65536))]
    wave_grid: Option<u32>,
    /// Wave steps between snapshots (default: by size).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    snapshot_every: Option<u32>,
}

/// A request that cannot run: printed, exit status 2.
struct CannotRun(String);

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(CannotRun(reason)) => {
            eprintln!("conform: cannot run: {reason}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: &Cli) -> Result<bool, CannotRun> {
    let dump = match &cli.dump {
        Some(dir) => Some(Dump::create(dir).map_err(|e| CannotRun(format!("--dump: {e}")))?),
        None => None,
    };
    let create = |flag: &str, path: &Option<PathBuf>| -> Result<Option<std::fs::File>, CannotRun> {
        path.as_ref()
            .map(|p| {
                std::fs::File::create(p).map_err(|e| CannotRun(format!("{flag}: cannot write `{}`: {e}", p.display())))
            })
            .transpose()
    };
    // Every output file is opened before anything runs, so a bad path costs nothing.
    let mut json = create("--json", &cli.json)?;
    let mut junit_file = create("--junit", &cli.junit)?;
    let mut markdown_file = create("--markdown", &cli.markdown)?;
    let mut trace_file = create("--trace", &cli.trace)?;
    let mut html_file = create("--html", &cli.html)?;
    let (contexts, unavailable) = select(cli)?;
    let tuning = conformance::Tuning {
        pull_streams: cli.pull_streams.iter().map(|&n| usize::from(n)).collect(),
        pull_pageable: cli.pull_pageable,
        wave_grid: cli.wave_grid.map(|n| n as usize),
        wave_snapshot_every: cli.snapshot_every.map(|n| n as usize),
    };
    let selection = Selection { workloads: cli.workload.clone(), size: cli.size, seed: cli.seed, dump, tuning };
    println!(
        "hetero conform: {} on {}, size {}, seed {}",
        cli.workload.iter().map(|w| w.name()).collect::<Vec<_>>().join(","),
        contexts.iter().map(|c| c.info().backend.name()).collect::<Vec<_>>().join(","),
        cli.size.name(),
        cli.seed
    );
    let mut runs = Vec::new();
    let mut baseline = conformance::Baseline::default();
    // On a terminal, a spinner with the latest result; otherwise (CI logs) a line per result.
    let progress = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        bar
    });
    for ctx in &contexts {
        if let Some(bar) = &progress {
            bar.set_message(format!("{}: running", ctx.info().backend));
        }
        let run = run_device(ctx, &selection, &mut baseline, |r| {
            let line = format!(
                "{} {} {}: {}",
                ctx.info().backend,
                r.workload.name(),
                r.variant,
                if r.passed { "pass" } else { "FAIL" }
            );
            match &progress {
                Some(bar) => bar.set_message(line),
                None => eprintln!("  {line}"),
            }
        });
        runs.push(run);
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let report = Report {
        schema_version: SCHEMA_VERSION,
        hetero_version: env!("CARGO_PKG_VERSION").to_string(),
        seed: cli.seed,
        size: cli.size,
        runs,
        unavailable,
    };
    print!("{}", table::render(&report));
    let total = report.runs.iter().map(|r| r.results.len()).sum::<usize>();
    let failed = report.runs.iter().flat_map(|r| &r.results).filter(|r| !r.passed).count();
    if report.passed() {
        println!("PASS: {total} of {total} checks passed");
    } else {
        println!("FAIL: {failed} of {total} checks failed");
    }
    if let (Some(file), Some(path)) = (json.as_mut(), &cli.json) {
        let text = serde_json::to_string_pretty(&report).map_err(|e| CannotRun(format!("--json: {e}")))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.write_all(b"\n"))
            .map_err(|e| CannotRun(format!("--json: cannot write `{}`: {e}", path.display())))?;
    }
    if let Some(file) = junit_file.as_mut() {
        let xml = conformance::junit::render(&report).map_err(|e| CannotRun(format!("--junit: {e}")))?;
        file.write_all(xml.as_bytes()).map_err(|e| CannotRun(format!("--junit: {e}")))?;
    }
    if let Some(file) = trace_file.as_mut() {
        let trace = conformance::timeline::chrome_trace(&report);
        file.write_all(trace.to_string().as_bytes()).map_err(|e| CannotRun(format!("--trace: {e}")))?;
    }
    if let Some(file) = html_file.as_mut() {
        file.write_all(conformance::html::render(&report).as_bytes()).map_err(|e| CannotRun(format!("--html: {e}")))?;
    }
    if let Some(file) = markdown_file.as_mut() {
        file.write_all(conformance::markdown::render(&report).as_bytes())
            .map_err(|e| CannotRun(format!("--markdown: {e}")))?;
    }
    Ok(report.passed())
}

/// The devices to run and the backends that were probed but are missing.
fn select(cli: &Cli) -> Result<(Vec<Context>, Vec<Unavailable>), CannotRun> {
    let (backends, required) = match cli.backend {
        Choice::Auto => (hetero::compiled_backends(), false),
        Choice::All => (hetero::compiled_backends(), false),
        Choice::Host => (vec![Backend::Host], true),
        Choice::Opencl => (vec![Backend::OpenCl], true),
        Choice::Cuda => (vec![Backend::Cuda], true),
        Choice::Hip => (vec![Backend::Hip], true),
    };
    let mut contexts = Vec::new();
    let mut unavailable = Vec::new();
    for backend in backends {
        let mut found = hetero::discover(backend);
        let notes = found
            .unavailable
            .iter()
            .map(|e| Unavailable { backend: backend.name().to_string(), reason: e.to_string() });
        if cli.device < found.devices.len() {
            // Platforms or devices that failed while others work: reported, not fatal.
            unavailable.extend(notes);
            contexts.push(Context::new(found.devices.swap_remove(cli.device)));
            continue;
        }
        let reason = match found.unavailable.first() {
            _ if !found.devices.is_empty() => {
                format!("{backend} has {} device(s); --device {} does not exist", found.devices.len(), cli.device)
            }
            Some(e) => e.to_string(),
            None => format!("{backend} reports no device"),
        };
        if required {
            return Err(CannotRun(reason));
        }
        unavailable.push(Unavailable { backend: backend.name().to_string(), reason });
    }
    if contexts.is_empty() {
        return Err(CannotRun("no backend is available".to_string()));
    }
    Ok((contexts, unavailable))
}
