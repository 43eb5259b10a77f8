//! The report as a document: headings, text, tables and lists, built once
//! from the report model ([`document`]) and written as Markdown
//! ([`crate::markdown`]) or as HTML ([`crate::html`]). The HTML writer
//! escapes every string it is given, so no report content (a device name,
//! a note) can add markup.

use std::collections::BTreeMap;

use crate::report::{Report, ResultRecord};

/// One part of a document.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// The page title.
    Title(String),
    /// A section heading.
    Heading(String),
    /// A paragraph.
    Text(String),
    /// A table with a header row.
    Table {
        /// Column names.
        header: Vec<String>,
        /// Rows, each with one cell per column.
        rows: Vec<Vec<Cell>>,
    },
    /// A bulleted list.
    List(Vec<String>),
}

/// A table cell: text, marked as a failure when it reports one (written
/// `**FAIL**` in Markdown and highlighted in HTML, before the text).
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Whether the cell reports a failure.
    pub failed: bool,
    /// What follows the failure mark, or the whole cell.
    pub text: String,
}

impl Cell {
    /// A cell of plain text.
    pub fn plain(text: impl Into<String>) -> Self {
        Self { failed: false, text: text.into() }
    }
}

fn cell(r: &ResultRecord) -> Cell {
    let verdict = if r.passed { "pass" } else { "" };
    let error = match (r.error, r.tolerance) {
        (Some(e), Some(t)) => format!(" {e:.1e}/{t:.1e}"),
        _ => String::new(),
    };
    let time = r.device_ms.map_or(String::new(), |ms| format!(", {ms:.3} ms"));
    Cell { failed: !r.passed, text: format!("{verdict}{error}{time}").trim_start_matches([' ', ',']).to_string() }
}

/// The report as a document (what the Markdown and HTML pages show).
pub fn document(report: &Report) -> Vec<Block> {
    let mut doc = Vec::new();
    let total: usize = report.runs.iter().map(|r| r.results.len()).sum();
    let failed = report.runs.iter().flat_map(|r| &r.results).filter(|r| !r.passed).count();
    doc.push(Block::Title("hetero conformance".into()));
    doc.push(Block::Text(format!(
        "{}: {} of {total} checks passed (seed {}, schema {}).",
        if report.passed() { "PASS" } else { "FAIL" },
        total - failed,
        report.seed,
        report.schema_version
    )));
    // Rows in first-seen order; one column per run.
    let mut rows: Vec<(String, String, String)> = Vec::new();
    let mut cells: BTreeMap<(usize, usize), Cell> = BTreeMap::new();
    for (col, run) in report.runs.iter().enumerate() {
        for r in &run.results {
            let key = (r.workload.name().to_string(), r.variant.clone(), r.size.name().to_string());
            let row = rows.iter().position(|k| *k == key).unwrap_or_else(|| {
                rows.push(key);
                rows.len() - 1
            });
            cells.insert((row, col), cell(r));
        }
    }
    let headers: Vec<String> =
        report.runs.iter().map(|r| format!("{} ({})", r.backend, report.device_label(r))).collect();
    let key_header = ["workload", "variant", "size"].map(String::from);
    doc.push(Block::Table {
        header: key_header.iter().cloned().chain(headers.iter().cloned()).collect(),
        rows: rows
            .iter()
            .enumerate()
            .map(|(i, (workload, variant, size))| {
                [workload, variant, size]
                    .into_iter()
                    .map(Cell::plain)
                    .chain(
                        (0..report.runs.len()).map(|c| cells.get(&(i, c)).cloned().unwrap_or_else(|| Cell::plain("-"))),
                    )
                    .collect()
            })
            .collect(),
    });
    let clock = if report.runs.iter().any(|r| r.device_timing_unavailable.is_some()) {
        "device time (host wall-clock time where device timing is unavailable: see the notes)"
    } else {
        "device time"
    };
    doc.push(Block::Text(format!("Cells: result, error/tolerance against the float64 reference, {clock}.")));
    doc.extend(comparison_table(report, &rows, &headers));
    doc.extend(digest_table(report, &rows, &headers));
    let mut overlap = Vec::new();
    for run in &report.runs {
        for r in run.results.iter().filter(|r| r.metrics.contains_key("hidden_copy_fraction")) {
            let m = &r.metrics;
            let num = |x: Option<f64>, unit: &str| x.map_or("-".to_string(), |v| format!("{v:.3}{unit}"));
            overlap.push(
                [
                    format!("{} ({})", run.backend, report.device_label(run)),
                    format!("{} {}", r.workload.name(), r.variant),
                    r.size.name().to_string(),
                    num(m.get("sync_ms").copied(), ""),
                    num(r.device_ms, ""),
                    num(m.get("ideal_ms").copied(), ""),
                    num(m.get("of_ideal").copied(), "x"),
                    num(m.get("speedup_vs_sync").copied(), "x"),
                    format!("{:.0}%", 100.0 * m.get("hidden_copy_fraction").copied().unwrap_or(f64::NAN)),
                ]
                .into_iter()
                .map(Cell::plain)
                .collect(),
            );
        }
    }
    if !overlap.is_empty() {
        doc.push(Block::Heading("Copies overlapped under compute".into()));
        doc.push(Block::Text("Ideal: the longer of the synchronous run's summed kernel and copy intervals (wave). Copy time hidden: share of the copy intervals that overlaps kernel intervals on the device timeline.".into()));
        doc.push(Block::Table {
            header: [
                "run",
                "workload / variant",
                "size",
                "sync ms",
                "time ms",
                "ideal ms",
                "time / ideal",
                "speed-up vs sync",
                "copy time hidden",
            ]
            .map(String::from)
            .to_vec(),
            rows: overlap,
        });
    }
    let mut split = Vec::new();
    for run in &report.runs {
        for r in run.results.iter().filter(|r| r.metrics.contains_key("devices")) {
            let m = &r.metrics;
            let num = |x: Option<f64>, unit: &str| x.map_or("-".to_string(), |v| format!("{v:.3}{unit}"));
            let hidden = m.get("halo_hidden_fraction").map_or("-".to_string(), |h| format!("{:.0}%", 100.0 * h));
            split.push(
                [
                    format!("{} ({})", run.backend, report.device_label(run)),
                    format!("{} {}", r.workload.name(), r.variant),
                    format!("{:.0}", m.get("devices").copied().unwrap_or(f64::NAN)),
                    num(m.get("single_ms").copied(), ""),
                    num(r.device_ms, ""),
                    num(m.get("speedup_vs_single").copied(), "x"),
                    num(m.get("halo_ms").copied(), ""),
                    hidden,
                ]
                .into_iter()
                .map(Cell::plain)
                .collect(),
            );
        }
    }
    if !split.is_empty() {
        doc.push(Block::Heading("Wave split across devices".into()));
        doc.push(Block::Text("One band of rows per device, halo rows exchanged by peer copies every step; time is the slowest device's, halo time its summed halo copies, hidden the mean share of halo copy time under compute (split-overlap).".into()));
        doc.push(Block::Table {
            header: [
                "run",
                "workload / variant",
                "devices",
                "one device ms",
                "time ms",
                "speed-up",
                "halo ms",
                "halo hidden",
            ]
            .map(String::from)
            .to_vec(),
            rows: split,
        });
    }
    let notes: Vec<String> = report
        .runs
        .iter()
        .filter_map(crate::report::Run::timing_note)
        .chain(report.identity_notes())
        .chain(report.slow_notes())
        .chain(report.runs.iter().flat_map(|run| {
            run.results.iter().filter_map(move |r| {
                r.note.as_ref().map(|n| format!("{} {} {}: {n}", run.backend, r.workload.name(), r.variant))
            })
        }))
        .chain(report.runs.iter().flat_map(|run| {
            run.results.iter().filter_map(move |r| {
                r.not_compared.as_ref().map(|n| format!("{} {} {}: {n}", run.backend, r.workload.name(), r.variant))
            })
        }))
        .chain(report.unavailable.iter().map(|u| format!("skipped {}: {}", u.backend, u.reason)))
        .collect();
    if !notes.is_empty() {
        doc.push(Block::Heading("Notes".into()));
        doc.push(Block::List(notes));
    }
    doc
}

/// Each later run's outputs against the first run's (cross-backend comparison).
/// Each output's digest per run (its first 16 hex digits): in the
/// deterministic mode one that differs from the row's first is a failure.
fn digest_table(report: &Report, rows: &[(String, String, String)], headers: &[String]) -> Vec<Block> {
    if !report.runs.iter().flat_map(|r| &r.results).any(|r| r.digest.is_some()) {
        return Vec::new();
    }
    let find = |c: usize, (workload, variant, size): &(String, String, String)| {
        report.runs[c]
            .results
            .iter()
            .find(|r| r.workload.name() == workload && &r.variant == variant && r.size.name() == size)
            .and_then(|r| r.digest.clone())
    };
    let mut differing = 0;
    let table_rows = rows
        .iter()
        .filter(|key| (0..report.runs.len()).any(|c| find(c, key).is_some()))
        .map(|key| {
            let first = (0..report.runs.len()).find_map(|c| find(c, key));
            let (workload, variant, size) = key;
            let digests = (0..report.runs.len()).map(|c| match find(c, key) {
                Some(d) => {
                    let differs = first.as_ref().is_some_and(|f| *f != d);
                    differing += usize::from(differs);
                    Cell { failed: differs && report.deterministic, text: d.chars().take(16).collect() }
                }
                None => Cell::plain("-"),
            });
            [workload, variant, size].into_iter().map(Cell::plain).chain(digests.collect::<Vec<_>>()).collect()
        })
        .collect();
    let header = ["workload", "variant", "size"].into_iter().map(String::from).chain(headers.iter().cloned()).collect();
    let rule = if report.deterministic {
        "Deterministic mode: every run's digest must equal the row's first"
    } else {
        "Outside the deterministic mode digests may differ by rounding"
    };
    vec![
        Block::Heading("Output digests".into()),
        Block::Text(format!(
            "SHA-256 of each output's bytes (first 16 hex digits; the JSON report has all 64). {rule}; {differing} differ{}.",
            if differing == 1 { "s" } else { "" }
        )),
        Block::Table { header, rows: table_rows },
    ]
}

fn comparison_table(report: &Report, rows: &[(String, String, String)], headers: &[String]) -> Vec<Block> {
    let compared: Vec<usize> =
        (0..report.runs.len()).filter(|&c| report.runs[c].results.iter().any(|r| r.comparison.is_some())).collect();
    let Some(against) = compared
        .first()
        .and_then(|&c| report.runs[c].results.iter().find_map(|r| r.comparison.as_ref()))
        .map(|c| c.against.clone())
    else {
        return Vec::new();
    };
    let num = |x: Option<f64>| x.map_or("inf".to_string(), |v| format!("{v:.1e}"));
    let header = ["workload", "variant", "size"]
        .into_iter()
        .map(String::from)
        .chain(compared.iter().map(|&c| headers[c].clone()))
        .collect();
    let table_rows = rows
        .iter()
        .map(|(workload, variant, size)| {
            [workload, variant, size]
                .into_iter()
                .map(Cell::plain)
                .chain(compared.iter().map(|&c| {
                    Cell::plain(
                        report.runs[c]
                            .results
                            .iter()
                            .find(|r| r.workload.name() == workload && &r.variant == variant && r.size.name() == size)
                            .map_or("-".to_string(), |r| match (&r.comparison, &r.not_compared) {
                                (Some(c), _) => format!("{} / {}", num(c.max_abs), num(c.max_rel)),
                                (None, Some(_)) => "not compared (see notes)".to_string(),
                                (None, None) => "-".to_string(),
                            }),
                    )
                }))
                .collect()
        })
        .collect();
    vec![
        Block::Heading(format!("Backends compared with {against}")),
        Block::Text("Largest absolute / relative difference of each output.".into()),
        Block::Table { header, rows: table_rows },
    ]
}
