//! `stress`: random concurrent use of hetero's typed layer on each named
//! backend, checked against a CPU model (see `conformance::stress`).
//!
//! Before the timed run, a one-second run of the same kind warms every
//! cache; then the process's resident memory, the allocator's bytes and
//! the device's live handles are taken, and again after the run (with the
//! allocator trimmed), and printed. A soak is a long `--seconds` with
//! `--max-rss-growth-mib`: then handles and allocator bytes must come back
//! to where they were, and resident memory must not grow by more than that.
//!
//! Exit status: 0 clean, 1 a mismatch, an error or growth, 2 the request
//! cannot run, 3 a hang (the watchdog fired).

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use conformance::stress::{self, Config};
use hetero::{Backend, Context, Device, LiveHandles};

#[derive(Debug, Parser)]
#[command(name = "stress", version, about = "Random concurrent streams, events, copies and launches, checked")]
struct Cli {
    /// Seconds per backend.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Backends, comma-separated; each must be usable.
    #[arg(long, value_delimiter = ',', default_value = "host")]
    backend: Vec<Backend>,
    /// Host threads.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    threads: u16,
    /// Streams per thread.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=16))]
    streams: u16,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A soak's verdict: fail when live handles or allocator bytes end
    /// above where they started, or resident host memory grows by more than
    /// this many MiB (without it, growth is only reported).
    #[arg(long)]
    max_rss_growth_mib: Option<f64>,
}

/// What a long run must not grow.
#[derive(Debug, Clone, Copy)]
struct Snapshot {
    /// Resident host memory, KiB (Linux's `VmRSS`), where readable.
    rss_kib: Option<u64>,
    /// Device and pinned bytes the allocator has handed out, and holds cached.
    in_use: u64,
    cached: u64,
    handles: Option<LiveHandles>,
}

impl Snapshot {
    fn take(ctx: &Context) -> Self {
        ctx.trim();
        let stats = ctx.allocator_stats();
        Self {
            rss_kib: rss_kib(),
            in_use: stats.device.bytes_in_use + stats.pinned.bytes_in_use,
            cached: stats.device.bytes_cached + stats.pinned.bytes_cached,
            handles: ctx.device().live_handles(),
        }
    }
}

/// `VmRSS` of `/proc/self/status`, in KiB.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Prints the two snapshots; `false` when something grew.
fn report_growth(name: &str, start: &Snapshot, end: &Snapshot, max_rss_mib: Option<f64>) -> bool {
    let mut clean = true;
    let rss = match (start.rss_kib, end.rss_kib) {
        (Some(a), Some(b)) => {
            let grown = (b as f64 - a as f64) / 1024.0;
            if max_rss_mib.is_some_and(|max| grown > max) {
                clean = false;
            }
            format!("{:.1} -> {:.1} MiB ({grown:+.1})", a as f64 / 1024.0, b as f64 / 1024.0)
        }
        _ => "unavailable".to_string(),
    };
    let handles = match (start.handles, end.handles) {
        (Some(a), Some(b)) => {
            clean &= b.total() <= a.total();
            format!(
                "{} -> {} (streams {} -> {}, events {} -> {}, allocations {} -> {}, modules {} -> {}, kernels {} -> {}, graphs {} -> {})",
                a.total(),
                b.total(),
                a.streams,
                b.streams,
                a.events,
                b.events,
                a.allocations,
                b.allocations,
                a.modules,
                b.modules,
                a.kernels,
                b.kernels,
                a.graphs,
                b.graphs
            )
        }
        _ => "not counted by this backend".to_string(),
    };
    clean &= end.in_use <= start.in_use && end.cached <= start.cached;
    println!(
        "stress: {name}: resident memory {rss}; allocator bytes in use {} -> {}, cached {} -> {}; live handles {handles}: {}",
        start.in_use,
        end.in_use,
        start.cached,
        end.cached,
        if clean { "no growth" } else { "GROWTH" }
    );
    clean
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !(cli.seconds.is_finite() && cli.seconds > 0.0 && cli.seconds <= 3600.0) {
        eprintln!("stress: cannot run: --seconds must be in (0, 3600], not {}", cli.seconds);
        return ExitCode::from(2);
    }
    let config = Config {
        duration: Duration::from_secs_f64(cli.seconds),
        threads: usize::from(cli.threads),
        streams: usize::from(cli.streams),
        buffers: 6,
        len: 4096,
        seed: cli.seed,
    };
    let mut contexts = Vec::new();
    for &backend in &cli.backend {
        match hetero::backend_devices(backend) {
            Ok(mut devices) => contexts.push(Context::new(devices.remove(0))),
            Err(e) => {
                eprintln!("stress: cannot run: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let mut clean = true;
    for ctx in &contexts {
        let watchdog = Duration::from_secs(60);
        let name = format!("{} `{}`", ctx.info().backend, ctx.info().name);
        // The warm-up: caches, compiled modules and pools settle first.
        let warm = Config { duration: Duration::from_secs(1), ..config };
        let kernel = match stress::kernel(ctx) {
            Ok(kernel) => std::sync::Arc::new(kernel),
            Err(e) => {
                eprintln!("stress: {name}: cannot build its kernel: {e}");
                return ExitCode::from(1);
            }
        };
        if stress::run(ctx, &kernel, warm, watchdog).is_none() {
            eprintln!("stress: {name}: HANG in the warm-up run");
            return ExitCode::from(3);
        }
        let start = Snapshot::take(ctx);
        let Some(stats) = stress::run(ctx, &kernel, config, watchdog) else {
            eprintln!(
                "stress: {} `{}`: HANG: threads did not finish within {} s of the deadline",
                ctx.info().backend,
                ctx.info().name,
                watchdog.as_secs()
            );
            return ExitCode::from(3);
        };
        println!(
            "stress: {} `{}`: {} threads x {} streams, {:.1} s: {} operations, {} checks, {} mismatches, {} errors",
            ctx.info().backend,
            ctx.info().name,
            config.threads,
            config.streams,
            cli.seconds,
            stats.operations,
            stats.checks,
            stats.mismatches,
            stats.errors.len()
        );
        for e in &stats.errors {
            println!("  error: {e}");
        }
        clean &= stats.mismatches == 0 && stats.errors.is_empty() && stats.checks > 0;
        let steady = report_growth(&name, &start, &Snapshot::take(ctx), cli.max_rss_growth_mib);
        clean &= steady || cli.max_rss_growth_mib.is_none();
    }
    if clean { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
