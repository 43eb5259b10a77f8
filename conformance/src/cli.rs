//! The command line of `conform` (`src/main.rs`), here so that the fuzz
//! target `conform_options` parses it as the binary does.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::{Size, Workload};

/// Which backends to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Choice {
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

/// The command line of `conform`.
#[derive(Debug, Parser)]
#[command(name = "conform", version, about = "Run hetero's conformance workloads and compare with float64 references")]
pub struct Cli {
    /// Backends to run, comma-separated (`cuda,hip`): each one named is required. `auto` (or `all`)
    /// runs every compiled-in backend whose runtime is present.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "auto")]
    pub backend: Vec<Choice>,
    /// Workloads to run, comma-separated (`sort` runs when named).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "reduce,scan,pull,wave,bandwidth")]
    pub workload: Vec<Workload>,
    /// Problem size.
    #[arg(long, value_enum, default_value = "small")]
    pub size: Size,
    /// Seed of the inputs.
    #[arg(long, default_value_t = crate::inputs::DEFAULT_SEED)]
    pub seed: u64,
    /// Devices of each backend: `all`, or indices or pieces of a name or platform (ignoring case),
    /// separated by commas (`--device 0,2`, `--device rusticl`); one that matches nothing lists the
    /// devices there are. Several devices of a backend run one after another, each compared with the first.
    #[arg(long, default_value = "0")]
    pub device: hetero::DeviceList,
    /// The report files to write.
    #[command(flatten)]
    pub reports: ReportFiles,
    /// Write every workload's inputs and outputs as .npy files under this directory.
    #[arg(long, value_name = "DIR")]
    pub dump: Option<PathBuf>,
    /// Stream counts of the pull variants, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub pull_streams: Vec<u16>,
    /// Host-thread counts of the threaded pull variants, comma-separated: each thread enqueues its
    /// share of the batches on its own stream with its own buffers, as a framework's thread pool
    /// would. 0 runs none.
    #[arg(long, value_delimiter = ',', default_value = "4", value_parser = clap::value_parser!(u16).range(0..=64))]
    pub pull_threads: Vec<u16>,
    /// Host-thread counts of the framework-style pull variants, comma-separated: a pool of threads,
    /// two tasks each, that allocate every batch's buffers through the caching allocator and await
    /// its completion without blocking their thread. 0 runs none.
    #[arg(long, value_delimiter = ',', default_value = "4", value_parser = clap::value_parser!(u16).range(0..=64))]
    pub pull_framework: Vec<u16>,
    /// Lane counts of the graph pull variants, comma-separated: each lane replays one recorded graph
    /// per batch (copies in, scan, pull, copy out), with its copies and arguments set for the batch.
    /// 0 runs none.
    #[arg(long, value_delimiter = ',', default_value = "1,4", value_parser = clap::value_parser!(u16).range(0..=64))]
    pub pull_graphs: Vec<u16>,
    /// Print each device's allocator statistics after its run.
    #[arg(long, short)]
    pub verbose: bool,
    /// Flag a device whose times are this fraction or more above its peers' (devices of the same
    /// backend and model in the run) in the median over its variants; its variants past it are named.
    #[arg(long, default_value_t = 0.15, value_parser = slow_threshold)]
    pub slow_threshold: f64,
    /// Also run pull with its inputs staged from pageable memory, to compare with pinned staging.
    #[arg(long)]
    pub pull_pageable: bool,
    /// A vendor library's times on this device (`ci/gpu/baseline.py`): each run on that device
    /// gets a `baseline` section with hetero's time over the library's.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// An earlier report of the same size and seed (`--json`): every result slower than it by more
    /// than --regression-threshold, changed or gone is flagged after the run.
    #[arg(long, value_name = "FILE")]
    pub against: Option<PathBuf>,
    /// With --against: flag times longer than the earlier report's by more than this fraction.
    #[arg(long, default_value = "0.1", value_parser = crate::compare::threshold)]
    pub regression_threshold: f64,
    /// With --against: exit 1 when anything is flagged.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// The deterministic mode: every kernel built with floating point exactly as written
    /// (no contraction into fused multiply-adds, denormals kept, correctly rounded division and
    /// square root), float sums in a fixed order, and only the variants whose outputs are then the
    /// same bits on every backend, device and core count (reduce's atomic and launch-shaped sums
    /// are left out). Outputs are compared by their SHA-256 digest, exactly.
    #[arg(long)]
    pub deterministic: bool,
    /// Wave grid side in cells (default: by size).
    #[arg(long, value_name = "CELLS", value_parser = clap::value_parser!(u32).range(5..=65536))]
    pub wave_grid: Option<u32>,
    /// Wave steps between snapshots (default: by size).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub snapshot_every: Option<u32>,
    /// Wave variants to run, comma-separated (default: all). `sync` always runs, as the others'
    /// baseline; `balanced` names the four balanced variants. Fewer variants let a run at size
    /// large on many devices (each runs the one-device variants) fit a time limit.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub wave_variants: Vec<crate::WaveVariant>,
}

/// The report files a run writes, each optional: one flattened group of
/// flags, iterated as one list ([`ReportFiles::named`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ReportFiles {
    /// Write the JSON report to this file (`-`: standard output, and the table goes to standard error;
    /// the same for every report below).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the results as JUnit XML to this file (one test case per backend, workload and variant).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the comparison table as Markdown to this file.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write every kernel and copy of pull and wave as Chrome trace-event JSON (open in Perfetto).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write one self-contained HTML page: tables, device timelines, wavefield snapshots.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

impl ReportFiles {
    /// Each file named, with its flag, in the order of the flags.
    pub fn named(&self) -> Vec<(&'static str, &std::path::Path)> {
        [
            ("--json", &self.json),
            ("--junit", &self.junit),
            ("--markdown", &self.markdown),
            ("--trace", &self.trace),
            ("--html", &self.html),
        ]
        .into_iter()
        .filter_map(|(flag, path)| path.as_deref().map(|p| (flag, p)))
        .collect()
    }
}

/// `--slow-threshold`: a finite fraction from 0 to 10.
pub fn slow_threshold(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(t) if (0.0..=10.0).contains(&t) => Ok(t),
        _ => Err(format!("{value:?} is not a fraction from 0 to 10 (0.15: 15% slower than the peers)")),
    }
}
