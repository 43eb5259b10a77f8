//! `bench`: the host cost of each basic operation through hetero's typed
//! layer and through the vendor API directly, in one process on one device,
//! printed as ratios (`cargo xtask bench`).
//!
//! This crate calls vendor APIs directly (the raw baselines in `raw_*.rs`):
//! it is the one place outside `crates/hetero/src/backend/` that may.

mod algorithms;
mod graphs;
mod growth;
mod markers;
mod measure;
mod peer;
mod pull;
#[cfg(feature = "cuda")]
mod raw_cuda;
#[cfg(feature = "hip")]
mod raw_hip;
#[cfg(feature = "opencl")]
mod raw_opencl;
mod sorting;
mod threads;
mod trait_path;
mod typed;

use std::process::ExitCode;

use clap::Parser;
use hetero::{Backend, Context};
use measure::{Cost, Fail, Plan};

/// Sizes every path uses.
pub mod sizes {
    /// Words of the small buffers (4 KiB).
    pub const WORDS: usize = 1024;
    /// Bytes of one allocation in the alloc+free pair.
    pub const ALLOC_BYTES: usize = 1 << 20;
    /// Threads of the one-block launch every path measures, where
    /// `affine_u32` can run that many ([`launch_threads`]).
    pub const LAUNCH_THREADS: u32 = 64;

    /// The threads of the measured launch on `ctx`'s device: the same for
    /// every path of the device.
    pub fn launch_threads(ctx: &hetero::Context) -> Result<u32, super::Fail> {
        let kernel = ctx.build_module(hetero::kernels::UTIL)?.kernel("affine_u32")?;
        Ok(kernel.block_size(hetero::BlockRequest::new(LAUNCH_THREADS)))
    }
}

/// One measured operation; every path measures the same list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Enqueue a one-block `affine_u32` launch.
    Launch,
    /// The same launch with what hetero's tracking adds to it: raw CUDA
    /// and HIP also record an untimed event after it and check the current
    /// device (CUDA: `cuCtxGetCurrent`, HIP: `hipGetDevice`) before each
    /// call, as hetero does; raw OpenCL keeps the command's event until the
    /// next tracked command (hetero tracks with that event); hetero and
    /// cudarc launch as in `Launch`.
    LaunchTracked,
    /// Launch it and wait for it.
    LaunchToCompletion,
    /// Enqueue a 4 KiB copy from pinned memory to the device.
    CopyH2d,
    /// The same copy with what hetero's tracking adds to it, as for
    /// `LaunchTracked`; hetero and cudarc copy as in `CopyH2d`.
    CopyH2dTracked,
    /// Enqueue a 4 KiB copy from the device to pinned memory.
    CopyD2h,
    /// Record an event.
    EventRecord,
    /// A 4 KiB fill of `x` on stream `a`, then a copy of `x` on stream `b`
    /// ordered after it by an event (hetero and cudarc: their trackers'
    /// waits). Raw paths do the same race-free work: the fill first waits
    /// for the previous pair's copy, which still reads `x`, and OpenCL
    /// flushes a queue before another queue waits on its event, as the
    /// OpenCL specification asks (its `clFlush` reference page).
    CrossStreamPair,
    /// Allocate and free 1 MiB of device memory (hetero: with its
    /// allocator set to `direct`, so each is a driver call as in the raw paths).
    AllocFree1M,
    /// The same through hetero's caching allocator (hetero only).
    AllocFree1MCached,
    /// Launch, then await `Stream::synchronize_async` on a plain executor
    /// (hetero only): against `LaunchToCompletion`, the latency the waker
    /// thread adds from completion to the future waking.
    LaunchAwait,
    /// Launch, then wait until a `Stream::then` callback has run (hetero
    /// only): completion to callback.
    LaunchCallback,
    /// Register a `Stream::then` callback (hetero only): its host cost.
    ThenEnqueue,
    /// A 4-byte copy to pageable host memory, waited for.
    RoundTrip,
}

impl Op {
    /// Every operation, in table order.
    pub const ALL: [Op; 14] = [
        Op::Launch,
        Op::LaunchTracked,
        Op::LaunchToCompletion,
        Op::CopyH2d,
        Op::CopyH2dTracked,
        Op::CopyD2h,
        Op::EventRecord,
        Op::CrossStreamPair,
        Op::AllocFree1M,
        Op::AllocFree1MCached,
        Op::RoundTrip,
        Op::LaunchAwait,
        Op::LaunchCallback,
        Op::ThenEnqueue,
    ];

    /// Operations only hetero has; vendor paths are not asked for them.
    pub fn hetero_only(self) -> bool {
        matches!(self, Op::AllocFree1MCached | Op::LaunchAwait | Op::LaunchCallback | Op::ThenEnqueue)
    }

    /// Operations per timed round, for `enqueues` per round of the
    /// operations that only enqueue.
    ///
    /// Alloc + free pairs are counted as those are: they wait for nothing,
    /// and at about 1 µs a pair (OpenCL) a round of 200 lasted 0.2 ms,
    /// short enough that one interruption, or a slow first pair after the
    /// untimed settling between rounds (which on the typed paths waits for
    /// a callback), moved the round's cost by several percent.
    pub fn count(self, enqueues: usize) -> usize {
        match self {
            Op::Launch
            | Op::LaunchTracked
            | Op::CopyH2d
            | Op::CopyH2dTracked
            | Op::CopyD2h
            | Op::EventRecord
            | Op::AllocFree1M
            | Op::AllocFree1MCached
            | Op::ThenEnqueue => enqueues,
            Op::CrossStreamPair => enqueues.div_ceil(2),
            Op::LaunchToCompletion | Op::RoundTrip | Op::LaunchAwait | Op::LaunchCallback => 200,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Op::Launch => "launch (enqueue)",
            Op::LaunchTracked => "launch + tracking",
            Op::LaunchToCompletion => "launch + wait",
            Op::CopyH2d => "4 KiB pinned H2D",
            Op::CopyH2dTracked => "H2D + tracking",
            Op::CopyD2h => "4 KiB pinned D2H",
            Op::EventRecord => "event record",
            Op::CrossStreamPair => "cross-stream pair",
            Op::AllocFree1M => "1 MiB alloc + free",
            Op::AllocFree1MCached => "1 MiB cached pair",
            Op::RoundTrip => "4 B round trip",
            Op::LaunchAwait => "launch + await",
            Op::LaunchCallback => "launch + callback",
            Op::ThenEnqueue => "then (enqueue)",
        }
    }
}

/// The costs of one way of doing the operations (`hetero`, `raw`, ...).
#[derive(Debug, serde::Serialize)]
pub struct PathResult {
    /// `hetero` (typed layer, streams with timing), `hetero-untimed` (streams
    /// without), `trait` (hetero's raw `Device` trait, below the typed
    /// layer, on a stream without timing), `raw` (the vendor's C API), `raw-flushed` (OpenCL, its
    /// queue flushed as hetero flushes), `raw-prof` (OpenCL on profiling
    /// queues) or `cudarc` (its safe API).
    pub path: &'static str,
    /// The hetero path this vendor path is compared with (the same kind of
    /// stream); the typed paths name themselves.
    pub against: &'static str,
    /// Cost per operation; a path may measure only some operations.
    pub costs: Vec<(Op, Cost)>,
}

#[derive(Debug, serde::Serialize)]
struct DeviceResult {
    backend: String,
    device: String,
    platform: String,
    paths: Vec<PathResult>,
    /// Host cost per pull-shaped batch, first and last thousand.
    growth: Option<growth::Growth>,
    /// The conformance pull workload's device time per batch.
    pull: Vec<pull::PullCost>,
    /// Pull-shaped batches per second with several host threads.
    threads: Vec<threads::ThreadRate>,
    /// Peer copies between the backend's devices (`peer.rs`).
    peer: Vec<peer::PeerCost>,
    /// Graph replays against one-by-one launches (`graphs.rs`).
    graphs: Vec<graphs::GraphCost>,
    /// A profiler range's cost against an operation (`markers.rs`).
    markers: Option<markers::MarkerCost>,
    /// `hetero::algorithms` against the device's copy bandwidth (`algorithms.rs`).
    algorithms: Vec<algorithms::AlgorithmCost>,
    /// Errors of a path that could not run (its other paths still count).
    errors: Vec<String>,
}

#[derive(Debug, Parser)]
#[command(name = "bench", version, about = "Per-operation host cost: hetero against the vendor API, in one process")]
struct Cli {
    /// Backends, comma-separated (default: every compiled-in backend whose runtime is present).
    #[arg(long, value_delimiter = ',')]
    backend: Vec<Backend>,
    /// Timed rounds per operation (the median is reported).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u16).range(1..=1000))]
    rounds: u16,
    /// Untimed rounds first.
    #[arg(long, default_value_t = 2)]
    warmup: u16,
    /// Operations per round of the operations that only enqueue (half as
    /// many cross-stream pairs). Fewer keep the device's queue from filling,
    /// which would make the host wait for the device.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    enqueues: u32,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
    /// Device of each backend: its index, or a piece of its name or platform, ignoring case
    /// (`--device rusticl`).
    #[arg(long, default_value = "0")]
    device: hetero::DeviceSelector,
    /// Size of the conformance pull workload to time per batch.
    #[arg(long, value_enum, default_value = "small")]
    pull_size: conformance::workloads::Size,
    /// Groups of 1000 batches in the growth measurement (first vs last).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(2..=1000))]
    growth_groups: u16,
    /// Runs of the pull workload per device, the devices taking turns (the median counts).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    pull_repeats: u16,
    /// Host thread counts of the thread-scaling measurement, comma-separated
    /// (one thread is always measured too, for the speed-ups).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4", value_parser = clap::value_parser!(u16).range(1..=64))]
    threads: Vec<u16>,
    /// Batches each thread enqueues in the thread-scaling measurement (0: skip it).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    thread_batches: u32,
    /// Bytes per peer copy, comma-separated (multiples of 4; empty: no peer copies).
    #[arg(long, value_delimiter = ',', default_value = "4096,1073741824", value_parser = peer_bytes)]
    peer_bytes: Vec<usize>,
    /// Measure the peer copies only (every other row is skipped).
    #[arg(long)]
    peer_only: bool,
    /// Rounds of each graph row (the median is reported; 0 skips the graph rows).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u16).range(0..=1000))]
    graph_rounds: u16,
    /// Rounds of each peer-copy figure (the median is reported).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=1000))]
    peer_rounds: u16,
    /// Elements of each `hetero::algorithms` row, per element type (0 skips
    /// them; at most 2^31 - 1; `--rounds` rounds each).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=2_147_483_647))]
    algorithms_elements: u32,
    /// With `--algorithms-elements`: also the scan of u32 (and u64, with half
    /// as many) with each of these elements per thread, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=64))]
    scan_items: Vec<u32>,
    /// With `--algorithms-elements`: also the sort of u32 (and u64, with
    /// three quarters as many) with each of these keys per thread.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=32))]
    sort_items: Vec<u32>,
}

/// A peer-copy size: a positive multiple of 4 bytes.
fn peer_bytes(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if n > 0 && n % 4 == 0 => Ok(n),
        _ => Err(format!("`{text}` is not a positive multiple of 4 bytes")),
    }
}

/// A vendor path: its name, the hetero path it is compared with, the path.
pub type RawPath = (&'static str, &'static str, Box<dyn measure::Path>);

fn main() -> ExitCode {
    let cli = Cli::parse();
    let plan = Plan {
        warmup: usize::from(cli.warmup),
        rounds: usize::from(cli.rounds),
        enqueues: usize::try_from(cli.enqueues).unwrap_or(usize::MAX),
    };
    let backends = if cli.backend.is_empty() { hetero::compiled_backends() } else { cli.backend.clone() };
    let mut contexts = Vec::new();
    for backend in backends {
        match hetero::discover(backend).take(&cli.device) {
            Ok(device) => contexts.push((backend, Context::new(device))),
            Err(e) if cli.backend.is_empty() => println!("skipped: {backend}: {e}"),
            Err(e) => {
                eprintln!("bench: cannot run: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let mut results: Vec<DeviceResult> = contexts
        .iter()
        .map(|(backend, ctx)| {
            let info = ctx.info();
            DeviceResult {
                backend: backend.name().to_string(),
                device: info.name.clone(),
                platform: info.platform.clone(),
                paths: Vec::new(),
                growth: None,
                pull: Vec::new(),
                threads: Vec::new(),
                peer: Vec::new(),
                graphs: Vec::new(),
                markers: None,
                algorithms: Vec::new(),
                errors: Vec::new(),
            }
        })
        .collect();

    if !cli.peer_only {
        per_operation(&cli, plan, &contexts, &mut results);
        for result in &mut results {
            result.markers = markers::measure(plan.rounds, &result.paths);
        }
    }
    if cli.algorithms_elements > 0 {
        for ((_, ctx), result) in contexts.iter().zip(&mut results) {
            let (n, rounds) = (cli.algorithms_elements as usize, usize::from(cli.rounds));
            match algorithms::run(ctx, n, rounds, &cli.scan_items) {
                Ok(costs) => result.algorithms = costs,
                Err(e) => result.errors.push(format!("algorithms: {e}")),
            }
            match sorting::run(ctx, n, rounds, &cli.sort_items) {
                Ok(costs) => result.algorithms.extend(costs),
                Err(e) => result.errors.push(format!("sorting: {e}")),
            }
        }
    }
    // Peer copies, one backend at a time, on every device of it.
    if !cli.peer_bytes.is_empty() {
        for ((backend, _), result) in contexts.iter().zip(&mut results) {
            match peer::measure(*backend, &cli.peer_bytes, usize::from(cli.peer_rounds)) {
                Ok(costs) => result.peer = costs,
                Err(e) => result.errors.push(format!("peer: {e}")),
            }
        }
    }
    drop(contexts);

    for result in &results {
        print_table(result);
    }
    print_across(&results);
    if let Some(path) = &cli.json {
        let report = serde_json::json!({
            "schema_version": 2,
            "unit": "microseconds of host time per operation (median of rounds)",
            "rounds": plan.rounds,
            "warmup": plan.warmup,
            "enqueues": plan.enqueues,
            "interleaved": true,
            "pull_repeats": cli.pull_repeats,
            "devices": results,
        });
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("bench: cannot write `{}`: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if results.iter().any(|r| !r.errors.is_empty()) { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

/// Every row but the peer copies: per-operation costs (every path of every
/// device interleaved), growth, thread scaling and pull per batch.
fn per_operation(cli: &Cli, plan: Plan, contexts: &[(Backend, Context)], results: &mut [DeviceResult]) {
    // Every path of every device, measured interleaved (measure.rs).
    let mut entries = Vec::new();
    for (at, (backend, ctx)) in contexts.iter().enumerate() {
        for (name, timing) in [("hetero", true), ("hetero-untimed", false)] {
            match typed::path(ctx, timing) {
                Ok(path) => entries.push(measure::Entry::new(at, name, name, path)),
                Err(e) => results[at].errors.push(format!("{name}: {e}")),
            }
        }
        match fresh_device(ctx.info()).and_then(trait_path::path) {
            Ok(path) => entries.push(measure::Entry::new(at, "trait", "hetero-untimed", path)),
            Err(e) => results[at].errors.push(format!("trait: {e}")),
        }
        match sizes::launch_threads(ctx).and_then(|threads| raw(*backend, &ctx.info().name, threads)) {
            Ok(paths) => entries
                .extend(paths.into_iter().map(|(name, against, path)| measure::Entry::new(at, name, against, path))),
            Err(e) => results[at].errors.push(format!("raw: {e}")),
        }
    }
    measure::measure(&mut entries, plan);
    for entry in entries {
        let result = &mut results[entry.device];
        match entry.error {
            Some(e) => result.errors.push(format!("{}: {e}", entry.name)),
            None => result.paths.push(PathResult { path: entry.name, against: entry.against, costs: entry.costs }),
        }
    }

    // Growth: the devices take turns group by group (growth.rs).
    let mut runners: Vec<Option<growth::Runner>> = Vec::new();
    for ((_, ctx), result) in contexts.iter().zip(results.iter_mut()) {
        match growth::Runner::new(ctx) {
            Ok(r) => runners.push(Some(r)),
            Err(e) => {
                result.errors.push(format!("growth: {e}"));
                runners.push(None);
            }
        }
    }
    let groups = usize::from(cli.growth_groups);
    for g in 0..groups {
        // The last groups also run on a control: a fresh context of the device.
        let control = groups >= 2 && g == groups - growth::edge_groups(groups);
        for ((slot, result), (_, ctx)) in runners.iter_mut().zip(results.iter_mut()).zip(contexts) {
            let Some(runner) = slot else { continue };
            let started = if control {
                fresh_device(ctx.info()).and_then(|device| runner.start_control(&Context::new(device)))
            } else {
                Ok(())
            };
            if let Err(e) = started.and_then(|()| runner.group()) {
                result.errors.push(format!("growth: {e}"));
                *slot = None;
            }
        }
    }
    for (slot, result) in runners.into_iter().zip(results.iter_mut()) {
        match slot.map(growth::Runner::finish) {
            Some(Ok(g)) => result.growth = Some(g),
            Some(Err(e)) => result.errors.push(format!("growth: {e}")),
            None => {}
        }
    }
    // Thread scaling, one device at a time (threads.rs): hetero's untimed
    // streams against the vendor path they compare with.
    let mut counts: Vec<usize> = cli.threads.iter().map(|&t| usize::from(t)).chain([1]).collect();
    counts.sort_unstable();
    counts.dedup();
    let thread_batches = usize::try_from(cli.thread_batches).unwrap_or(usize::MAX);
    let scaled = if thread_batches == 0 { 0 } else { contexts.len() };
    for ((backend, ctx), result) in contexts.iter().zip(results.iter_mut()).take(scaled) {
        let (backend, name) = (*backend, ctx.info().name.clone());
        let threads = match sizes::launch_threads(ctx) {
            Ok(threads) => threads,
            Err(e) => {
                result.errors.push(format!("threads: {e}"));
                continue;
            }
        };
        let paths: Vec<(&'static str, threads::Make<'_>)> = vec![
            ("hetero-untimed", Box::new(|| typed::path(ctx, false))),
            (
                "raw",
                Box::new(move || {
                    raw(backend, &name, threads)?
                        .into_iter()
                        .find(|(path, ..)| *path == "raw")
                        .map(|(.., path)| path)
                        .ok_or_else(|| "no raw path on this backend".into())
                }),
            ),
        ];
        // The host backend has no vendor path to compare with.
        let paths: Vec<_> = if backend == Backend::Host { paths.into_iter().take(1).collect() } else { paths };
        match threads::measure(&paths, &counts, thread_batches) {
            Ok(rates) => result.threads = rates,
            Err(e) => result.errors.push(format!("threads: {e}")),
        }
    }
    // Graph rows, one device at a time, each with its runtime's own graph
    // API where it has one.
    for ((backend, ctx), result) in contexts.iter().zip(results.iter_mut()) {
        if cli.graph_rounds == 0 {
            break;
        }
        let mut own = match raw_graphs(*backend) {
            Some(Ok(own)) => Some(own),
            Some(Err(e)) => {
                result.errors.push(format!("graphs (raw): {e}"));
                None
            }
            None => None,
        };
        match graphs::measure(ctx, own.as_deref_mut(), usize::from(cli.graph_rounds)) {
            Ok(rows) => result.graphs = rows,
            Err(e) => result.errors.push(format!("graphs: {e}")),
        }
    }
    // Pull a few times, the devices in turn, so that a slow stretch of the
    // machine does not land on one backend only; the median run counts.
    let mut runs = vec![Vec::new(); contexts.len()];
    for _ in 0..cli.pull_repeats {
        for (at, (_, ctx)) in contexts.iter().enumerate() {
            match pull::run(ctx, cli.pull_size) {
                Ok(p) => runs[at].push(p),
                Err(e) => results[at].errors.push(format!("pull: {e}")),
            }
        }
    }
    for (result, runs) in results.iter_mut().zip(runs) {
        result.pull = pull::median(runs);
    }
}

/// The runtime's own graph API of `backend`, where it has one.
fn raw_graphs(backend: Backend) -> Option<Result<Box<dyn graphs::RawGraphs>, Fail>> {
    match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => Some(raw_cuda::graphs().map(|g| Box::new(g) as Box<dyn graphs::RawGraphs>)),
        #[cfg(feature = "hip")]
        Backend::Hip => Some(raw_hip::graphs().map(|g| Box::new(g) as Box<dyn graphs::RawGraphs>)),
        _ => None,
    }
}

/// A new handle on the device `info` describes, the one the bench's
/// context uses, for paths and controls that need a device of their own.
pub fn fresh_device(info: &hetero::DeviceInfo) -> Result<hetero::AnyDevice, Fail> {
    hetero::backend_devices(info.backend)?
        .into_iter()
        .find(|d| {
            let found = hetero::Device::info(d);
            (&found.name, &found.platform, found.ordinal) == (&info.name, &info.platform, info.ordinal)
        })
        .ok_or_else(|| "the device is gone".into())
}

/// The vendor-API paths of `backend` on the device named `name`, launching
/// `threads` threads (CUDA and HIP run [`sizes::LAUNCH_THREADS`] of this
/// kernel on every device they support).
fn raw(backend: Backend, name: &str, threads: u32) -> Result<Vec<RawPath>, Fail> {
    let _ = (name, threads);
    match backend {
        #[cfg(feature = "opencl")]
        Backend::OpenCl => raw_opencl::paths(name, threads),
        #[cfg(feature = "cuda")]
        Backend::Cuda => raw_cuda::paths(),
        #[cfg(feature = "hip")]
        Backend::Hip => raw_hip::paths(),
        _ => Ok(Vec::new()),
    }
}

/// The per-operation table of `result`: each path's cost and the ratios.
fn print_costs(result: &DeviceResult) {
    print!("{:<20}", "operation");
    for p in &result.paths {
        print!(" {:>14}", p.path);
    }
    let vendor: Vec<&PathResult> = result.paths.iter().filter(|p| p.against != p.path).collect();
    for p in &vendor {
        print!(" {:>24}", format!("{}/{}", p.against, p.path));
    }
    println!();
    for op in Op::ALL {
        print!("{:<20}", op.name());
        for p in &result.paths {
            match cost(p, op) {
                Some(us) => print!(" {us:>14.2}"),
                None => print!(" {:>14}", "-"),
            }
        }
        for p in &vendor {
            let ours = result.paths.iter().find(|h| h.path == p.against).and_then(|h| cost(h, op));
            match (ours, cost(p, op)) {
                (Some(a), Some(b)) if b > 0.0 => print!(" {:>23.2}x", a / b),
                _ => print!(" {:>24}", "-"),
            }
        }
        println!();
    }
}

fn print_table(result: &DeviceResult) {
    println!("\n{} `{}` ({}): microseconds of host time per operation", result.backend, result.device, result.platform);
    if !result.paths.is_empty() {
        print_costs(result);
    }
    if !result.algorithms.is_empty() {
        println!("algorithms (hetero::algorithms; device time, median): fraction of the device's copy bandwidth");
        println!(
            "{:<8} {:<16} {:>6} {:>12} {:>10} {:>9} {:>8} {:>8}",
            "element", "algorithm", "items", "elements", "ms", "GB/s", "of copy", "Gkeys/s"
        );
        for a in &result.algorithms {
            let items = a.scan_items.or(a.sort_items).map_or("-".to_string(), |i| i.to_string());
            let keys = a.gkeys.map_or("-".to_string(), |k| format!("{k:.2}"));
            println!(
                "{:<8} {:<16} {:>6} {:>12} {:>10.3} {:>9.1} {:>8.2} {:>8}",
                a.element, a.algorithm, items, a.elements, a.device_ms, a.gbps, a.of_copy, keys
            );
        }
    }
    if let Some(m) = &result.markers {
        println!(
            "markers (profiler: {}): {:.2} ns per range, {:.3}% of the cheapest operation that opens one ({}, {:.2} us)",
            m.profiler,
            m.ns_per_range,
            m.share * 100.0,
            m.cheapest_op,
            m.cheapest_us
        );
    }
    if let Some(g) = &result.growth {
        let control = match (g.control_us, g.control_ratio) {
            (Some(us), Some(ratio)) => {
                format!("; a fresh context in turn with the last: {us:.2} us/batch, the last at {ratio:.2}x of it")
            }
            _ => String::new(),
        };
        println!(
            "growth: {} pull-shaped batches on 4 untimed streams: {:.2} us/batch at first, {:.2} at last ({:.2}x; medians of {} thousands){control}",
            g.batches, g.first_us, g.last_us, g.ratio, g.edge_groups
        );
    }
    for p in &result.pull {
        let clock = if p.host_wall_clock { "host wall-clock" } else { "device" };
        let instrumented = p
            .instrumented_us_per_batch
            .map_or(String::new(), |us| format!(" ({us:.1} us/batch with per-operation events)"));
        println!(
            "pull {}: {:.0} batches, {:.3} {clock} ms (median of {}), {:.1} us/batch{instrumented}",
            p.variant,
            p.batches,
            p.device_ms,
            p.runs_ms.len(),
            p.us_per_batch,
        );
    }
    print_threads(&result.threads);
    print_graphs(&result.graphs);
    peer::print(&result.peer);
    for e in &result.errors {
        println!("error: {e}");
    }
}

/// The graph rows: microseconds per launch, host and until done.
fn print_graphs(rows: &[graphs::GraphCost]) {
    let Some(first) = rows.first() else { return };
    let how = if first.native { "the backend's own graphs" } else { "hetero replaying the recorded nodes" };
    println!("graphs ({how}): microseconds per launch of one-block affine_u32 (host enqueue / until done)");
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    println!(
        "{:>8} {:>18} {:>18} {:>18} {:>12} {:>10} {:>10} {:>12} {:>12}",
        "launches", "one by one", "replay", "raw replay", "raw tracked", "/raw", "/tracked", "record us", "raw record"
    );
    for r in rows {
        let ratio = |raw: Option<f64>| raw.map_or("-".to_string(), |raw| format!("{:.2}", r.replay_us / raw));
        println!(
            "{:>8} {:>18} {:>18} {:>18} {:>12} {:>10} {:>10} {:>12.1} {:>12}",
            r.launches,
            format!("{:.3} / {:.3}", r.stream_us, r.stream_done_us),
            format!("{:.3} / {:.3}", r.replay_us, r.replay_done_us),
            format!("{} / {}", opt(r.raw_replay_us), opt(r.raw_done_us)),
            opt(r.raw_tracked_us),
            ratio(r.raw_replay_us),
            ratio(r.raw_tracked_us),
            r.record_us,
            opt(r.raw_record_us),
        );
        if r.native && r.replay_done_us > r.stream_done_us {
            println!(
                "         note: {} launches finish later replayed ({:.3} us each) than enqueued one by one ({:.3}): this backend's graphs are slower than its streams here",
                r.launches, r.replay_done_us, r.stream_done_us
            );
        }
    }
}

/// Batches per second at each thread count, and the speed-up over one thread.
fn print_threads(rates: &[threads::ThreadRate]) {
    let Some(first) = rates.first() else { return };
    println!(
        "threads: pull-shaped batches per second ({} per thread: tracked 4 KiB copy in, tracked launch, copy out), each thread on its own stream",
        first.batches
    );
    let mut counts: Vec<usize> = rates.iter().map(|r| r.threads).collect();
    counts.dedup();
    print!("{:<20}", "path");
    for t in &counts {
        print!(" {:>18}", format!("{t} thread{}", if *t == 1 { "" } else { "s" }));
    }
    println!();
    let mut paths: Vec<&str> = rates.iter().map(|r| r.path).collect();
    paths.sort_unstable();
    paths.dedup();
    for path in paths {
        print!("{path:<20}");
        for t in &counts {
            match rates.iter().find(|r| r.path == path && r.threads == *t) {
                Some(r) => print!(" {:>10.0} ({:.2}x)", r.batches_per_s, r.speedup),
                None => print!(" {:>18}", "-"),
            }
        }
        println!();
    }
}

/// The device's backend and its path named `path`.
fn find<'a>(result: &'a DeviceResult, path: &str) -> Option<(String, &'a PathResult)> {
    result.paths.iter().find(|p| p.path == path).map(|p| (result.backend.clone(), p))
}

/// The median cost of `op` through `path`, if it measured it.
fn cost(path: &PathResult, op: Op) -> Option<f64> {
    path.costs.iter().find(|(o, _)| *o == op).map(|(_, c)| c.median_us)
}

/// hetero's cost on every device over its cost on the first, per operation
/// (e.g. HIP and OpenCL against CUDA on one GPU), for the same kind of
/// stream; and the vendor APIs' own (`raw`), which shows where a runtime is
/// itself slower than the first.
fn print_across(results: &[DeviceResult]) {
    let Some(first) = results.first() else { return };
    if results.len() < 2 {
        return;
    }
    for path in ["hetero", "hetero-untimed", "raw"] {
        let Some((base_name, base)) = find(first, path) else { continue };
        let others: Vec<(String, &PathResult)> = results[1..].iter().filter_map(|r| find(r, path)).collect();
        print!("\n{path}: cost over {base_name}'s\n{:<20}", "operation");
        for (name, _) in &others {
            print!(" {name:>10}");
        }
        println!();
        for op in Op::ALL {
            print!("{:<20}", op.name());
            for (_, p) in &others {
                match (cost(p, op), cost(base, op)) {
                    (Some(a), Some(b)) if b > 0.0 => print!(" {:>9.2}x", a / b),
                    _ => print!(" {:>10}", "-"),
                }
            }
            println!();
        }
    }
}
