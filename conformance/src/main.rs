//! `conform`: run hetero's conformance workloads on the chosen backends and
//! print a pass/fail table with errors, tolerances and device times.
//!
//! Exit status: 0 when every check passed, 1 when one failed, 2 when the
//! request cannot run (bad arguments, a backend that is missing, an
//! unwritable output path).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use conformance::cli::{Choice, Cli};
use conformance::dump::Dump;
use conformance::output::Output;
use conformance::report::{Report, SCHEMA_VERSION, Unavailable};
use conformance::{Selection, Workload, markdown, run_device, table};
use hetero::{Backend, Context};

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
    // Everything that can be checked before a device is touched.
    match hetero::markers::profiler() {
        Err(e) if e.config => return Err(CannotRun(e.message)),
        Err(e) => eprintln!("conform: warning: profiler markers reach no profiler: {e}"),
        Ok(hetero::markers::Profiler::None) => {}
        Ok(p) => eprintln!("conform: profiler markers go to {p}"),
    }
    let tuning = conformance::Tuning {
        pull_streams: cli.pull_streams.iter().map(|&n| usize::from(n)).collect(),
        pull_threads: cli.pull_threads.iter().filter(|&&n| n > 0).map(|&n| usize::from(n)).collect(),
        pull_framework: cli.pull_framework.iter().filter(|&&n| n > 0).map(|&n| usize::from(n)).collect(),
        pull_graphs: cli.pull_graphs.iter().filter(|&&n| n > 0).map(|&n| usize::from(n)).collect(),
        pull_pageable: cli.pull_pageable,
        wave_grid: cli.wave_grid.map(|n| n as usize),
        wave_snapshot_every: cli.snapshot_every.map(|n| n as usize),
        deterministic: cli.deterministic,
    };
    let wave = cli
        .workload
        .contains(&Workload::Wave)
        .then(|| conformance::workloads::wave::Grid::tuned(cli.size, &tuning))
        .transpose()
        .map_err(CannotRun)?;
    let files = cli.reports.named();
    conformance::output::check_distinct(&files).map_err(CannotRun)?;
    let library =
        cli.baseline.as_deref().map(|p| conformance::library::load(p, cli.size)).transpose().map_err(CannotRun)?;
    let against = cli.against.as_deref().map(conformance::compare::read).transpose().map_err(CannotRun)?;
    if let Some(old) = &against {
        conformance::compare::comparable(old, SCHEMA_VERSION, cli.size, cli.seed)
            .map_err(|e| CannotRun(format!("--against: {e}")))?;
    }
    let (contexts, unavailable) = select(cli)?;
    // An allocator setting that is not understood would fail every
    // allocation, each a failed check: the run cannot start instead.
    for ctx in &contexts {
        hetero::AllocatorOptions::from_env(ctx.info().backend).map_err(|e| CannotRun(e.to_string()))?;
    }
    if let Some(grid) = wave {
        check_memory(&contexts, grid)?;
    }
    // Only now, with the run sure to start, are outputs prepared: each is
    // renamed into place when written, so existing files survive a failure.
    let dump = match &cli.dump {
        Some(dir) => Some(Dump::create(dir).map_err(|e| CannotRun(format!("--dump: {e}")))?),
        None => None,
    };
    let create = |flag: &'static str, path: &Option<PathBuf>| -> Result<Option<Output>, CannotRun> {
        path.as_deref().map(|p| Output::create(flag, p)).transpose().map_err(CannotRun)
    };
    let json = create("--json", &cli.reports.json)?;
    let junit_file = create("--junit", &cli.reports.junit)?;
    let markdown_file = create("--markdown", &cli.reports.markdown)?;
    let trace_file = create("--trace", &cli.reports.trace)?;
    let html_file = create("--html", &cli.reports.html)?;
    let selection = Selection { workloads: cli.workload.clone(), size: cli.size, seed: cli.seed, dump, tuning };
    // With a report on standard output, everything else goes to standard error.
    let to_stdout = conformance::output::any_stdout(files.iter().map(|(_, p)| *p));
    let say = |text: String| if to_stdout { eprint!("{text}") } else { print!("{text}") };
    say(format!(
        "hetero conform: {} on {}, size {}, seed {}",
        cli.workload.iter().map(|w| w.name()).collect::<Vec<_>>().join(","),
        contexts.iter().map(|c| c.info().backend.name()).collect::<Vec<_>>().join(","),
        cli.size.name(),
        cli.seed
    ) + "\n");
    if cli.deterministic {
        say("deterministic mode: kernels built with floating point as written, float sums in a fixed order, \
             outputs compared by digest; left out: reduce's two-pass, atomic and library sums (their order \
             follows the launch or the order blocks finish in) and wave's balanced variants (their snapshot \
             interval is each device's choice)\n"
            .to_string());
    }
    let mut runs = Vec::new();
    let mut baseline = conformance::Baseline::default();
    // On a terminal, a spinner with the latest result; otherwise (CI logs) a line per result.
    let progress = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        bar
    });
    for (index, ctx) in contexts.iter().enumerate() {
        if let Some(bar) = &progress {
            bar.set_message(format!("{}: running", ctx.info().backend));
        }
        let peers = peers_of(&contexts, index);
        let mut run = run_device(ctx, &peers, &selection, &mut baseline, |r| {
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
        if cli.verbose {
            for (kind, k) in [("device", ctx.allocator_stats().device), ("pinned", ctx.allocator_stats().pinned)] {
                say(format!(
                    "{} allocator, {kind}: {} requests, {} hits, {} misses, {} bytes in use, {} cached, high-water {}\n",
                    ctx.info().backend,
                    k.requests,
                    k.hits,
                    k.misses,
                    k.bytes_in_use,
                    k.bytes_cached,
                    k.high_water
                ));
            }
        }
        if let Some(measured) = &library {
            run.baseline = conformance::library::compare(measured, &run);
            if run.baseline.is_none() {
                eprintln!(
                    "  {}: no library baseline: it was measured on {}, this is {}",
                    run.backend, measured.device, run.device.name
                );
            }
        }
        runs.push(run);
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        hetero_version: env!("CARGO_PKG_VERSION").to_string(),
        seed: cli.seed,
        size: cli.size,
        deterministic: cli.deterministic,
        runs,
        unavailable,
        node_health: Vec::new(),
    };
    report.flag_slow_devices(cli.slow_threshold);
    report.node_health = report.health();
    say(table::render(&report));
    let total = report.runs.iter().map(|r| r.results.len()).sum::<usize>();
    let failed = report.runs.iter().flat_map(|r| &r.results).filter(|r| !r.passed).count();
    if report.passed() {
        say(format!("PASS: {total} of {total} checks passed\n"));
    } else {
        say(format!("FAIL: {failed} of {total} checks failed\n"));
    }
    if let Some(file) = json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| CannotRun(format!("--json: {e}")))?;
        file.commit(format!("{text}\n").as_bytes()).map_err(CannotRun)?;
    }
    if let Some(file) = junit_file {
        let xml = conformance::junit::render(&report).map_err(|e| CannotRun(format!("--junit: {e}")))?;
        file.commit(xml.as_bytes()).map_err(CannotRun)?;
    }
    if let Some(file) = trace_file {
        file.commit(conformance::trace::chrome_trace(&report).to_string().as_bytes()).map_err(CannotRun)?;
    }
    if let Some(file) = html_file {
        file.commit(conformance::html::render(&report).as_bytes()).map_err(CannotRun)?;
    }
    if let Some(file) = markdown_file {
        file.commit(conformance::markdown::render(&report).as_bytes()).map_err(CannotRun)?;
    }
    // Compared last: the run's outputs are written whatever the comparison
    // says (`a_comparison_error_keeps_the_run`).
    let mut regressed = false;
    if let Some(old) = &against {
        let found = conformance::compare::compare(old, &report, cli.regression_threshold)
            .map_err(|e| CannotRun(format!("--against: {e} (the run's reports were written)")))?;
        say(markdown::to_markdown(&found.document()));
        regressed = !found.flags.is_empty() && cli.fail_on_regression;
    }
    Ok(report.passed() && !regressed)
}

/// The other selected devices of `contexts[index]`'s backend when it is
/// the first of them (the split workloads run from it), else none.
fn peers_of(contexts: &[hetero::Context], index: usize) -> Vec<hetero::Context> {
    let backend = contexts[index].info().backend;
    if contexts[..index].iter().any(|c| c.info().backend == backend) {
        return Vec::new();
    }
    contexts[index + 1..].iter().filter(|c| c.info().backend == backend).cloned().collect()
}

/// The backends `choices` name, and whether each is required: a backend
/// named on its own is, one that `auto`/`all` brings in is not.
fn requested(choices: &[Choice]) -> Vec<(Backend, bool)> {
    let mut wanted: Vec<(Backend, bool)> = Vec::new();
    for choice in choices {
        let (backends, required) = match choice {
            Choice::Auto | Choice::All => (hetero::compiled_backends(), false),
            Choice::Host => (vec![Backend::Host], true),
            Choice::Opencl => (vec![Backend::OpenCl], true),
            Choice::Cuda => (vec![Backend::Cuda], true),
            Choice::Hip => (vec![Backend::Hip], true),
        };
        for backend in backends {
            match wanted.iter_mut().find(|(b, _)| *b == backend) {
                Some((_, r)) => *r |= required,
                None => wanted.push((backend, required)),
            }
        }
    }
    wanted
}

/// The devices to run and the backends that were probed but are missing;
/// an error naming every required backend that is missing, with its reason.
fn select(cli: &Cli) -> Result<(Vec<Context>, Vec<Unavailable>), CannotRun> {
    let mut contexts = Vec::new();
    let mut unavailable = Vec::new();
    let mut missing = Vec::new();
    for (backend, required) in requested(&cli.backend) {
        let mut found = hetero::discover(backend);
        let notes = found
            .unavailable
            .iter()
            .map(|e| Unavailable { backend: backend.name().to_string(), reason: e.to_string() })
            .collect::<Vec<_>>();
        let had_devices = !found.devices.is_empty();
        let reason = match found.take_list(&cli.device) {
            Ok(devices) => {
                // Platforms or devices that failed while others work: reported, not fatal.
                unavailable.extend(notes);
                contexts.extend(devices.into_iter().map(Context::new));
                continue;
            }
            Err(e) if had_devices => format!("--device {}: {e}", cli.device),
            Err(e) => e,
        };
        if required {
            missing.push(reason);
        } else {
            unavailable.push(Unavailable { backend: backend.name().to_string(), reason });
        }
    }
    if !missing.is_empty() {
        return Err(CannotRun(match missing.as_slice() {
            [one] => one.clone(),
            many => format!("{} requested backends are missing:\n  {}", many.len(), many.join("\n  ")),
        }));
    }
    if contexts.is_empty() {
        let reasons: Vec<String> = unavailable.iter().map(|u| format!("\n  {}: {}", u.backend, u.reason)).collect();
        return Err(CannotRun(format!("no backend can run this request:{}", reasons.concat())));
    }
    Ok((contexts, unavailable))
}

/// Refuses a wave grid whose fields do not fit a device, or whose
/// reference and snapshots do not fit the host's available memory, with
/// the numbers (a 65536-cell grid aborted the process allocating 32 GiB).
fn check_memory(contexts: &[Context], grid: conformance::workloads::wave::Grid) -> Result<(), CannotRun> {
    let gib = |b: u128| b as f64 / f64::from(1u32 << 30);
    for ctx in contexts {
        let (need, have) = (grid.device_bytes(), u128::from(ctx.info().total_memory));
        if need > have {
            return Err(CannotRun(format!(
                "wave on a {}x{} grid needs {:.1} GiB of device memory but {} `{}` has {:.1} GiB; choose a smaller --wave-grid",
                grid.nx,
                grid.ny,
                gib(need),
                ctx.info().backend,
                ctx.info().name,
                gib(have)
            )));
        }
    }
    if let Some(have) = available_host_memory() {
        let need = grid.host_bytes();
        if need > have {
            return Err(CannotRun(format!(
                "wave on a {}x{} grid with {} snapshots needs about {:.1} GiB of host memory (float64 reference and snapshots) but {:.1} GiB is available; choose a smaller --wave-grid or a larger --snapshot-every",
                grid.nx,
                grid.ny,
                grid.steps / grid.snapshot_every,
                gib(need),
                gib(have)
            )));
        }
    }
    Ok(())
}

/// `MemAvailable` from `/proc/meminfo`, where there is one.
fn available_host_memory() -> Option<u128> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
