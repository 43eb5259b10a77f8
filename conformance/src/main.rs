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
use conformance::cli::Cli;
use conformance::dump::Dump;
use conformance::output::Output;
use conformance::report::SCHEMA_VERSION;
use conformance::{Selection, markdown, session, table};
use hetero::Context;

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
    let tuning = session::tuning(cli);
    let files = cli.reports.named();
    conformance::output::check_distinct(&files).map_err(CannotRun)?;
    let library =
        cli.baseline.as_deref().map(|p| conformance::library::load(p, cli.size)).transpose().map_err(CannotRun)?;
    let against = cli.against.as_deref().map(conformance::compare::read).transpose().map_err(CannotRun)?;
    if let Some(old) = &against {
        conformance::compare::comparable(old, SCHEMA_VERSION, cli.size, cli.seed)
            .map_err(|e| CannotRun(format!("--against: {e}")))?;
    }
    let (contexts, unavailable) = session::prepare(cli, &tuning).map_err(CannotRun)?;
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
    // On a terminal, a spinner with the latest result; otherwise (CI logs) a line per result.
    let progress = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        bar
    });
    let on_result = |ctx: &Context, r: &conformance::report::ResultRecord| {
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
    };
    let after = |ctx: &Context, run: &mut conformance::report::Run| {
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
            run.baseline = conformance::library::compare(measured, run);
            if run.baseline.is_none() {
                eprintln!(
                    "  {}: no library baseline: it was measured on {}, this is {}",
                    run.backend, measured.device, run.device.name
                );
            }
        }
    };
    let runs = session::run_all(&contexts, &selection, on_result, after);
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let report = session::report(&selection, cli.deterministic, runs, unavailable, cli.slow_threshold);
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
