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
//! With `--inject-faults RATE`, the device is wrapped in a
//! [`hetero::faults::Faulty`] that fails that fraction of its driver calls
//! (seeded by `--seed`); the run then also prints every injected fault as
//! surfaced (returned by an operation) or absorbed by the library, by call,
//! and fails unless the allocator and the device's handles come back to
//! where they were and, once the device is dropped, every allocation,
//! event and stream made through it was released.
//!
//! With `--mix peer,graphs,algorithms` (or `all`), the operations also
//! take in peer copies with a second device of the backend (its second
//! device, or a second opening of the first where it has one), graph
//! replays and the device-wide scan; under `--inject-faults` both devices
//! fail calls under the one plan and are accounted together.
//!
//! Exit status: 0 clean, 1 a mismatch, an error or growth, 2 the request
//! cannot run, 3 a hang (the watchdog fired).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use conformance::stress::{self, Config, Mix};
use hetero::faults::{FaultLog, FaultPlan, Faulty};
use hetero::{AnyDevice, Backend, Context, Device, LiveHandles};

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
    /// Fail this fraction of driver calls (allocations, creations, records,
    /// enqueues, queries, waits, synchronisations), in [0, 1]: every fault
    /// must surface as an operation's error or be absorbed by the library,
    /// with 0 mismatches and everything given back at the end.
    #[arg(long, value_name = "RATE")]
    inject_faults: Option<f64>,
    /// Mix in the later features: any of peer, graphs, algorithms
    /// (comma-separated), or all.
    #[arg(long, value_parser = Mix::parse)]
    mix: Option<Mix>,
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
    /// After trimming the peer device first (`Tools::trim_peer`), then `ctx`.
    fn take<D: Device>(ctx: &Context<D>, tools: &stress::Tools<D>) -> Self {
        tools.trim_peer();
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

impl Snapshot {
    /// A snapshot once the device's handles are back to `start`'s count,
    /// or as they are after two seconds: a stream destroyed while busy
    /// stays counted until its queued work is done, which it does without
    /// being waited for.
    fn settled<D: Device>(ctx: &Context<D>, tools: &stress::Tools<D>, start: &Snapshot) -> Self {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        loop {
            let now = Self::take(ctx, tools);
            let back = match (start.handles, now.handles) {
                (Some(a), Some(b)) => b.total() <= a.total(),
                _ => true,
            };
            if back || std::time::Instant::now() >= deadline {
                return now;
            }
            std::thread::sleep(Duration::from_millis(10));
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

/// Why a backend's run failed: the exit status.
type Failure = ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !(cli.seconds.is_finite() && cli.seconds > 0.0 && cli.seconds <= 3600.0) {
        eprintln!("stress: cannot run: --seconds must be in (0, 3600], not {}", cli.seconds);
        return ExitCode::from(2);
    }
    let plan = match cli.inject_faults.map(|rate| FaultPlan::random(rate, cli.seed)).transpose() {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("stress: cannot run: --inject-faults: {}", e.message);
            return ExitCode::from(2);
        }
    };
    let config = Config {
        duration: Duration::from_secs_f64(cli.seconds),
        threads: usize::from(cli.threads),
        streams: usize::from(cli.streams),
        buffers: 6,
        len: 4096,
        seed: cli.seed,
    };
    let mix = cli.mix.unwrap_or_default();
    let mut devices = Vec::new();
    for &backend in &cli.backend {
        match pick(backend, mix) {
            Ok(pair) => devices.push(pair),
            Err(e) => {
                eprintln!("stress: cannot run: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let mut clean = true;
    for (device, peer) in devices {
        let outcome = match &plan {
            None => stress(Context::new(device), peer.map(Context::new), None, &cli, config),
            Some(plan) => {
                let faulty = Faulty::<AnyDevice>::new(device, plan.clone());
                let log = faulty.log();
                let peer = peer.map(|p| Context::new(Faulty::with_log(p, plan.clone(), Arc::clone(&log))));
                stress(Context::new(faulty), peer, Some(log), &cli, config)
            }
        };
        match outcome {
            Ok(ok) => clean &= ok,
            Err(code) => return code,
        }
    }
    if clean { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// The first device of `backend`, and with a peer mix the device its peer
/// copies go to: the second, or the first opened again.
fn pick(backend: Backend, mix: Mix) -> hetero::Result<(AnyDevice, Option<AnyDevice>)> {
    let mut found = hetero::backend_devices(backend)?;
    let first = found.remove(0);
    if !mix.peer {
        return Ok((first, None));
    }
    let peer = match found.len() {
        0 => hetero::backend_devices(backend)?.remove(0),
        _ => found.remove(0),
    };
    Ok((first, Some(peer)))
}

/// Stresses one device (with `peer`, the second of peer copies):
/// `Ok(clean)`, or the exit status of a run that could not go on (a hang,
/// a kernel that does not build).
fn stress<D: Device>(
    ctx: Context<D>,
    peer: Option<Context<D>>,
    faults: Option<Arc<FaultLog>>,
    cli: &Cli,
    config: Config,
) -> Result<bool, Failure> {
    let watchdog = Duration::from_secs(60);
    let name = format!("{} `{}`", ctx.info().backend, ctx.info().name);
    // The warm-up: caches, compiled modules and pools settle first.
    let warm = Config { duration: Duration::from_secs(1), ..config };
    let mix = cli.mix.unwrap_or_default();
    let peer_name = peer.as_ref().map(|p| format!(" with peer `{}` #{}", p.info().name, p.info().ordinal));
    let tools = match stress::tools(&ctx, mix, peer) {
        Ok(tools) => Arc::new(tools),
        Err(e) => {
            eprintln!("stress: {name}: cannot build its kernels: {e}");
            return Err(ExitCode::from(1));
        }
    };
    if mix.any() {
        println!("stress: {name}: mixing in {mix:?}{}", peer_name.unwrap_or_default());
    }
    let log = faults.as_deref();
    let Some(warmed) = stress::run(&ctx, &tools, warm, watchdog, log) else {
        eprintln!("stress: {name}: HANG in the warm-up run");
        return Err(ExitCode::from(3));
    };
    let start = Snapshot::take(&ctx, &tools);
    let Some(stats) = stress::run(&ctx, &tools, config, watchdog, log) else {
        eprintln!("stress: {name}: HANG: threads did not finish within {} s of the deadline", watchdog.as_secs());
        return Err(ExitCode::from(3));
    };
    println!(
        "stress: {name}: {} threads x {} streams, {:.1} s: {} operations, {} checks, {} mismatches, {} errors",
        config.threads,
        config.streams,
        cli.seconds,
        stats.operations,
        stats.checks,
        stats.mismatches,
        stats.errors.len()
    );
    for e in warmed.errors.iter().chain(&stats.errors) {
        println!("  error: {e}");
    }
    let mut clean = stats.mismatches == 0 && stats.errors.is_empty() && warmed.errors.is_empty() && stats.checks > 0;
    let steady = report_growth(&name, &start, &Snapshot::settled(&ctx, &tools, &start), cli.max_rss_growth_mib);
    // A soak, and a run under faults, fail on growth (resident memory is
    // judged only against --max-rss-growth-mib).
    clean &= steady || (cli.max_rss_growth_mib.is_none() && faults.is_none());
    if let Some(log) = faults {
        drop(tools);
        drop(ctx);
        clean &= account(&name, &log, &[&warmed, &stats]);
    }
    Ok(clean)
}

/// Prints where every injected fault went and what the device still
/// holds after its drop; `false` when something was not given back.
fn account(name: &str, log: &FaultLog, runs: &[&stress::Stats]) -> bool {
    let injections = log.injections();
    let surfaced: std::collections::BTreeSet<u64> = runs.iter().flat_map(|r| r.surfaced.iter().copied()).collect();
    let mut by_call: std::collections::BTreeMap<(&str, &str), (u64, u64)> = Default::default();
    for i in &injections {
        let entry = by_call.entry((i.site.name(), i.call)).or_default();
        if surfaced.contains(&i.id) {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }
    let unknown = surfaced.iter().filter(|id| **id >= log.injected()).count();
    let total_surfaced = injections.iter().filter(|i| surfaced.contains(&i.id)).count();
    println!(
        "stress: {name}: {} faults injected in {} calls: {} surfaced as errors of their operations, {} absorbed by the library; {} resyncs",
        injections.len(),
        hetero::faults::FaultSite::ALL.iter().map(|s| log.calls(*s)).sum::<u64>(),
        total_surfaced,
        injections.len() - total_surfaced,
        runs.iter().map(|r| r.resyncs).sum::<u64>()
    );
    for ((site, call), (up, absorbed)) in &by_call {
        println!("  {site:<11} {call:<22} surfaced {up:>6}, absorbed {absorbed:>6}");
    }
    let live = log.released_within(Duration::from_secs(30));
    let released = live.total() == 0;
    println!(
        "stress: {name}: after the device's drop, made through it and not released: {} allocations, {} events, {} streams: {}; calls on released handles: {}",
        live.allocations,
        live.events,
        live.streams,
        if released { "none" } else { "LEAK" },
        log.invalid_handles()
    );
    if unknown > 0 {
        println!("stress: {name}: {unknown} errors named faults that were never injected");
    }
    // The library may absorb only what it retries (an allocation after
    // trimming its cache, a query of a retired allocation's marks) or what
    // follows an error it returns (the synchronisation after a failed
    // tracking record); a record, an enqueue or a wait it swallowed would
    // leave work untracked or unordered.
    let swallowed: u64 = by_call
        .iter()
        .filter(|((site, _), _)| !["alloc", "query", "synchronize"].contains(site))
        .map(|(_, (_, absorbed))| absorbed)
        .sum();
    if swallowed > 0 {
        println!(
            "stress: {name}: {swallowed} faults of records, enqueues, waits or creations were absorbed: UNACCOUNTED"
        );
    }
    let stale = log.invalid_handles();
    if stale > 0 {
        println!("stress: {name}: {stale} calls named a handle already released: USE AFTER RELEASE");
    }
    released && unknown == 0 && swallowed == 0 && stale == 0
}
