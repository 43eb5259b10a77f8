//! What one `conform` invocation does besides printing and writing files,
//! for the `conform` binary and for embedders (the Python package): pick
//! the devices a [`Cli`] asks for, check that the request fits them, run
//! every selected workload on each, and assemble the [`Report`].

use hetero::{Backend, Context};

use crate::cli::{Choice, Cli};
use crate::report::{Report, ResultRecord, Run, SCHEMA_VERSION, Unavailable};
use crate::{Selection, run_device};

/// The workload parameters `cli` gives beyond the size class.
pub fn tuning(cli: &Cli) -> crate::Tuning {
    crate::Tuning {
        pull_streams: cli.pull_streams.iter().map(|&n| usize::from(n)).collect(),
        pull_threads: cli.pull_threads.iter().filter(|&&n| n > 0).map(|&n| usize::from(n)).collect(),
        pull_framework: cli.pull_framework.iter().filter(|&&n| n > 0).map(|&n| usize::from(n)).collect(),
        pull_graphs: cli.pull_graphs.iter().filter(|&&n| n > 0).map(|&n| usize::from(n)).collect(),
        pull_pageable: cli.pull_pageable,
        wave_grid: cli.wave_grid.map(|n| n as usize),
        wave_snapshot_every: cli.snapshot_every.map(|n| n as usize),
        deterministic: cli.deterministic,
        wave_variants: cli.wave_variants.clone(),
    }
}

/// The devices `cli` selects, checked to take the request: allocator
/// settings understood, a wave grid that fits each device and the host.
pub fn prepare(cli: &Cli, tuning: &crate::Tuning) -> Result<(Vec<Context>, Vec<Unavailable>), String> {
    let wave = cli
        .workload
        .contains(&crate::Workload::Wave)
        .then(|| crate::workloads::wave::Grid::tuned(cli.size, tuning))
        .transpose()?;
    let (contexts, unavailable) = select(cli)?;
    // An allocator setting that is not understood would fail every
    // allocation, each a failed check: the run cannot start instead.
    for ctx in &contexts {
        hetero::AllocatorOptions::from_env(ctx.info().backend).map_err(|e| e.to_string())?;
    }
    if let Some(grid) = wave {
        check_memory(&contexts, grid)?;
    }
    Ok((contexts, unavailable))
}

/// Runs `selection` on every context in turn (the first device of a
/// backend with the others as its peers); `on_result` sees each record as
/// it is made, `after` each device's run once it is complete.
pub fn run_all(
    contexts: &[Context],
    selection: &Selection,
    mut on_result: impl FnMut(&Context, &ResultRecord),
    mut after: impl FnMut(&Context, &mut Run),
) -> Vec<Run> {
    let mut baseline = crate::Baseline::default();
    let mut runs = Vec::new();
    for (index, ctx) in contexts.iter().enumerate() {
        let peers = peers_of(contexts, index);
        let mut run = run_device(ctx, &peers, selection, &mut baseline, |r| on_result(ctx, r));
        after(ctx, &mut run);
        runs.push(run);
    }
    runs
}

/// The report of `runs`: slow devices flagged at `slow_threshold`, node
/// health derived.
pub fn report(
    selection: &Selection,
    deterministic: bool,
    runs: Vec<Run>,
    unavailable: Vec<Unavailable>,
    slow_threshold: f64,
) -> Report {
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        hetero_version: env!("CARGO_PKG_VERSION").to_string(),
        seed: selection.seed,
        size: selection.size,
        deterministic,
        runs,
        unavailable,
        node_health: Vec::new(),
    };
    report.flag_slow_devices(slow_threshold);
    report.node_health = report.health();
    report
}

/// The other selected devices of `contexts[index]`'s backend when it is
/// the first of them (the split workloads run from it), else none.
pub fn peers_of(contexts: &[hetero::Context], index: usize) -> Vec<hetero::Context> {
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
pub fn select(cli: &Cli) -> Result<(Vec<Context>, Vec<Unavailable>), String> {
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
        return Err(match missing.as_slice() {
            [one] => one.clone(),
            many => format!("{} requested backends are missing:\n  {}", many.len(), many.join("\n  ")),
        });
    }
    if contexts.is_empty() {
        let reasons: Vec<String> = unavailable.iter().map(|u| format!("\n  {}: {}", u.backend, u.reason)).collect();
        return Err(format!("no backend can run this request:{}", reasons.concat()));
    }
    Ok((contexts, unavailable))
}

/// Refuses a wave grid whose fields do not fit a device, or whose
/// reference and snapshots do not fit the host's available memory, with
/// the numbers (a 65536-cell grid aborted the process allocating 32 GiB).
pub fn check_memory(contexts: &[Context], grid: crate::workloads::wave::Grid) -> Result<(), String> {
    let gib = |b: u128| b as f64 / f64::from(1u32 << 30);
    for ctx in contexts {
        let (need, have) = (grid.device_bytes(), u128::from(ctx.info().total_memory));
        if need > have {
            return Err(format!(
                "wave on a {}x{} grid needs {:.1} GiB of device memory but {} `{}` has {:.1} GiB; choose a smaller --wave-grid",
                grid.nx,
                grid.ny,
                gib(need),
                ctx.info().backend,
                ctx.info().name,
                gib(have)
            ));
        }
    }
    if let Some(have) = available_host_memory() {
        let need = grid.host_bytes();
        if need > have {
            return Err(format!(
                "wave on a {}x{} grid with {} snapshots needs about {:.1} GiB of host memory (float64 reference and snapshots) but {:.1} GiB is available; choose a smaller --wave-grid or a larger --snapshot-every",
                grid.nx,
                grid.ny,
                grid.steps / grid.snapshot_every,
                gib(need),
                gib(have)
            ));
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
