//! `conform`'s command line, one argument per line: parsed, or refused with
//! clap's message, never a panic (`conformance::cli`, which the binary uses).

#![no_main]

use clap::Parser;
use conformance::cli::Cli;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let args = std::iter::once("conform").chain(text.split('\n'));
    match Cli::try_parse_from(args) {
        // What the binary asks of a parsed command line before it runs.
        Ok(cli) => {
            let _ = (cli.backend.len(), cli.device.to_string(), cli.wave_grid, cli.snapshot_every);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
