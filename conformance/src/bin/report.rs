//! `report merge A.json B.json ... [--json OUT] [--markdown OUT] [--junit OUT]`:
//! combines `conform` reports from different nodes or CI jobs into one
//! comparison, without rerunning anything. Exit status 0 when every merged
//! check passed, 1 when one failed, 2 when the inputs cannot be read.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use conformance::output::{self, Output};
use conformance::report::Report;
use conformance::{junit, markdown};

#[derive(Debug, Parser)]
#[command(name = "report", about = "Combine hetero conformance reports")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Merge JSON reports into one comparison.
    Merge {
        /// Reports written by `conform --json`.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Write the merged JSON report here (`-`: standard output; the same for each report).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the comparison as Markdown here (default: print it).
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Write the merged results as JUnit XML here.
        #[arg(long)]
        junit: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let Command::Merge { inputs, json, markdown: md, junit: xml } = Cli::parse().command;
    let run = || -> Result<bool, String> {
        let reports = inputs
            .iter()
            .map(|path| {
                let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
                serde_json::from_str::<Report>(&text)
                    .map_err(|e| format!("{}: not a conform report: {e}", path.display()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let merged = conformance::report::merge(reports)?;
        let paths = [("--json", &json), ("--junit", &xml), ("--markdown", &md)];
        let files: Vec<(&'static str, &std::path::Path)> =
            paths.iter().filter_map(|(flag, p)| p.as_deref().map(|p| (*flag, p))).collect();
        output::check_distinct(&files)?;
        let write =
            |flag: &'static str, path: &PathBuf, text: String| Output::create(flag, path)?.commit(text.as_bytes());
        if let Some(path) = &json {
            write("--json", path, serde_json::to_string_pretty(&merged).map_err(|e| e.to_string())? + "\n")?;
        }
        if let Some(path) = &xml {
            write("--junit", path, junit::render(&merged)?)?;
        }
        match &md {
            Some(path) => write("--markdown", path, markdown::render(&merged))?,
            // With a report on standard output, the comparison goes to standard error.
            None if output::any_stdout(files.iter().map(|(_, p)| *p)) => eprint!("{}", markdown::render(&merged)),
            None => print!("{}", markdown::render(&merged)),
        }
        Ok(merged.passed())
    };
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("report: {e}");
            ExitCode::from(2)
        }
    }
}
