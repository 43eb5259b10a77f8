//! Project automation, run as `cargo xtask <command>`.
//!
//! - `conform [ARGS]`: builds the `conform` binary with the cargo features
//!   of the requested backends and runs it with `ARGS` (see `conform --help`).
//! - `stress [--seconds N] [--backend host,opencl]`: random concurrent
//!   streams, events, copies and launches on each backend, checked against
//!   a CPU model, with a watchdog (see `stress --help`).
//! - `bench [--backend cuda,hip] [--json F]`: per-operation host cost
//!   through hetero and through the vendor API in the same process.
//! - `report merge A.json B.json ... [--markdown F] [--junit F] [--json F]`:
//!   combines reports of different nodes or jobs into one comparison;
//!   `report compare OLD.json NEW.json [--threshold F] [--fail-on-regression]`:
//!   flags what got slower or changed between two runs; `report digests
//!   A.json B.json ...`: exit 1 when an output's digest differs between runs.
//! - `ci-matrix --format github|gitlab|slurm [--runners LIST]`: the CI job
//!   matrix of `ci/matrix.json`.
//! - `hip-inputs [DIR]`: fetches the headers and runtime the HIP-on-NVIDIA
//!   test harness builds against (`ci/hip-nvidia/`).
//! - `hip-compile --arch gfx908,gfx90a,gfx1030`: compiles every kernel with
//!   ROCm's hiprtc for those targets, without a GPU (hetero's
//!   `hip_compile` example).

mod ci_matrix;
mod conform;
mod hip_inputs;

use std::path::PathBuf;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", version, about = "hetero project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build `conform` with the needed backend features and run it.
    ///
    /// Every argument is passed on to `conform`; run `cargo xtask conform --help` for them.
    #[command(disable_help_flag = true)]
    Conform {
        /// Arguments for `conform`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build `stress` with the needed backend features and run it.
    ///
    /// Every argument is passed on to `stress`; run `cargo xtask stress --help` for them.
    #[command(disable_help_flag = true)]
    Stress {
        /// Arguments for `stress`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build `bench` with the needed backend features and run it.
    ///
    /// Every argument is passed on to `bench`; run `cargo xtask bench --help` for them.
    #[command(disable_help_flag = true)]
    Bench {
        /// Arguments for `bench`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Combine or compare conformance reports: `cargo xtask report merge A.json B.json --markdown OUT.md`,
    /// `cargo xtask report compare OLD.json NEW.json`, `cargo xtask report digests A.json B.json`.
    #[command(disable_help_flag = true)]
    Report {
        /// Arguments for the `report` tool.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Print the CI job matrix of ci/matrix.json (backend x runner kind).
    CiMatrix {
        /// github: JSON for fromJSON; gitlab: a parallel:matrix fragment;
        /// slurm: one line per job.
        #[arg(long, value_enum)]
        format: ci_matrix::Format,
        /// Only jobs on these runners, comma-separated: runner names of
        /// ci/matrix.json, `cpu` or `gpu` (every runner without or with a
        /// GPU), or `all`.
        #[arg(long, value_delimiter = ',', default_value = "all")]
        runners: Vec<String>,
    },
    /// Compile every kernel with ROCm's hiprtc for AMD GPU targets, without a GPU:
    /// `cargo xtask hip-compile --arch gfx908,gfx90a,gfx1030`.
    #[command(disable_help_flag = true)]
    HipCompile {
        /// Arguments for the `hip_compile` example (`--arch`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Fetch the inputs of the HIP-on-NVIDIA harness (needs apt-get and pip).
    HipInputs {
        /// Where to put them (default .gpu/hip).
        dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Conform { args } => conform::answer("conform", &args).unwrap_or_else(|| conform::run(&args)),
        Command::Stress { args } => conform::answer("stress", &args).unwrap_or_else(|| conform::run_stress(&args)),
        Command::Bench { args } => conform::answer("bench", &args).unwrap_or_else(|| conform::run_bench(&args)),
        Command::HipCompile { args } => conform::run_hip_compile(&args),
        Command::HipInputs { dir } => hip_inputs::run_command(dir),
        Command::Report { args } => conform::run_report(&args),
        Command::CiMatrix { format, runners } => ci_matrix::run(format, &runners),
    }
}
