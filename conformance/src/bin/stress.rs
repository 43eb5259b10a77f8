//! `stress`: random concurrent use of hetero's typed layer on each named
//! backend, checked against a CPU model (see `conformance::stress`).
//!
//! Exit status: 0 clean, 1 a mismatch or an error, 2 the request cannot
//! run, 3 a hang (the watchdog fired).

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use conformance::stress::{self, Config};
use hetero::{Backend, Context};

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
        let Some(stats) = stress::run(ctx, config, watchdog) else {
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
    }
    if clean { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
