//! `report merge A.json B.json ... [--json OUT] [--markdown OUT] [--junit OUT] [--html OUT]`:
//! combines `conform` reports from different nodes or CI jobs into one
//! comparison, without rerunning anything. Exit status 0 when every merged
//! check passed, 1 when one failed, 2 when the inputs cannot be read.
//!
//! `report digests A.json B.json ...`: checks that every output is the
//! same bits (equal SHA-256 digests) in every run of every report, as the
//! deterministic mode (`conform --deterministic`) promises. Exit status 0
//! when they are, 1 when one differs (each is listed), 2 when a report
//! cannot be read.
//!
//! `report compare OLD.json NEW.json [--threshold F] [--fail-on-regression]
//! [--markdown OUT] [--junit OUT] [--html OUT]`: flags every result of NEW slower than
//! OLD's by more than F (default 0.1), whose verdict changed, or that is
//! gone (`compare.rs`). Exit status 0, or 1 with `--fail-on-regression`
//! when something is flagged, 2 when the reports cannot be compared.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use conformance::output::{self, Output};
use conformance::{html, junit, markdown};

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
        /// Write the comparison as one self-contained HTML page here.
        #[arg(long)]
        html: Option<PathBuf>,
    },
    /// Check that every output has the same digest in every run of every report.
    Digests {
        /// Reports written by `conform --json` (typically `--deterministic`).
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Flag what got slower or changed between two reports of the same work.
    Compare {
        /// The earlier report (`conform --json`).
        old: PathBuf,
        /// The later report.
        new: PathBuf,
        /// Flag a time longer than the old one by more than this fraction.
        #[arg(long, default_value = "0.1", value_parser = conformance::compare::threshold)]
        threshold: f64,
        /// Exit 1 when anything is flagged.
        #[arg(long)]
        fail_on_regression: bool,
        /// Write the comparison as Markdown here (default: print it).
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Write one failing test case per flag as JUnit XML here.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Write the flags as one self-contained HTML page here.
        #[arg(long)]
        html: Option<PathBuf>,
    },
}

/// The Markdown to `--markdown`'s file, or printed: to standard error when
/// another output is standard output, else to standard output.
fn markdown_out(
    path: Option<&std::path::Path>,
    files: &[(&'static str, &std::path::Path)],
    text: &str,
) -> Result<(), String> {
    match path {
        Some(path) => write("--markdown", path, text)?,
        None if output::any_stdout(files.iter().map(|(_, p)| *p)) => eprint!("{text}"),
        None => print!("{text}"),
    }
    Ok(())
}

/// Writes `text` to `path` whole or not at all.
fn write(flag: &'static str, path: &std::path::Path, text: &str) -> Result<(), String> {
    Output::create(flag, path)?.commit(text.as_bytes())
}

fn main() -> ExitCode {
    let outcome = match Cli::parse().command {
        Command::Merge { inputs, json, markdown, junit, html } => {
            merge(&inputs, Outputs { json, markdown, junit, html })
        }
        Command::Digests { inputs } => digests(&inputs),
        Command::Compare { old, new, threshold, fail_on_regression, markdown, junit, html } => {
            compare(&old, &new, threshold, Outputs { json: None, markdown, junit, html })
                .map(|clean| clean || !fail_on_regression)
        }
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("report: {e}");
            ExitCode::from(2)
        }
    }
}

/// The files a command writes, each optional.
struct Outputs {
    json: Option<PathBuf>,
    markdown: Option<PathBuf>,
    junit: Option<PathBuf>,
    html: Option<PathBuf>,
}

impl Outputs {
    /// Each named file with its flag, checked to be distinct.
    fn files(&self) -> Result<Vec<(&'static str, &std::path::Path)>, String> {
        let paths =
            [("--json", &self.json), ("--junit", &self.junit), ("--markdown", &self.markdown), ("--html", &self.html)];
        let files: Vec<_> = paths.iter().filter_map(|(flag, p)| p.as_deref().map(|p| (*flag, p))).collect();
        output::check_distinct(&files)?;
        Ok(files)
    }

    /// Writes what each named file takes (`text` of its flag) and the
    /// Markdown to its file or printed.
    fn write(&self, text: impl Fn(&'static str) -> Result<String, String>) -> Result<(), String> {
        let files = self.files()?;
        for (flag, path) in &files {
            if *flag != "--markdown" {
                write(flag, path, &text(flag)?)?;
            }
        }
        markdown_out(self.markdown.as_deref(), &files, &text("--markdown")?)
    }
}

/// `report compare`: `true` when nothing was flagged.
fn compare(old: &std::path::Path, new: &std::path::Path, threshold: f64, out: Outputs) -> Result<bool, String> {
    let (old, new) = (conformance::compare::read(old)?, conformance::compare::read(new)?);
    let found = conformance::compare::compare(&old, &new, threshold)?;
    out.write(|flag| match flag {
        "--junit" => found.junit(),
        "--html" => Ok(html::page("hetero regressions", &html::to_html(&found.document()))),
        _ => Ok(markdown::to_markdown(&found.document())),
    })?;
    Ok(found.flags.is_empty())
}

/// `report digests`: `true` when every output is equal everywhere.
fn digests(inputs: &[PathBuf]) -> Result<bool, String> {
    let reports = inputs
        .iter()
        .map(|p| conformance::compare::read(p).map(|r| (p.display().to_string(), r)))
        .collect::<Result<Vec<_>, _>>()?;
    let (text, equal) = conformance::digests::check(&reports);
    print!("{text}");
    Ok(equal)
}

/// `report merge`: `true` when every merged check passed.
fn merge(inputs: &[PathBuf], out: Outputs) -> Result<bool, String> {
    let reports = inputs.iter().map(|p| conformance::compare::read(p)).collect::<Result<Vec<_>, _>>()?;
    let merged = conformance::report::merge(reports)?;
    out.write(|flag| match flag {
        "--json" => Ok(serde_json::to_string_pretty(&merged).map_err(|e| e.to_string())? + "\n"),
        "--junit" => junit::render(&merged),
        "--html" => Ok(conformance::html::render(&merged)),
        _ => Ok(markdown::render(&merged)),
    })?;
    Ok(merged.passed())
}
