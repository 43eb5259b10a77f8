//! `--markdown FILE` and merged reports: one comparison table with a row
//! per workload, variant and size and a column per device run, so runs of
//! different backends and nodes read side by side.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::report::{Report, ResultRecord};

fn cell(r: &ResultRecord) -> String {
    let verdict = if r.passed { "pass" } else { "**FAIL**" };
    let error = match (r.error, r.tolerance) {
        (Some(e), Some(t)) => format!(" {e:.1e}/{t:.1e}"),
        _ => String::new(),
    };
    let time = r.device_ms.map_or(String::new(), |ms| format!(", {ms:.3} ms"));
    format!("{verdict}{error}{time}")
}

/// The Markdown page of `report`: summary, comparison table, overlap figures, notes.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let total: usize = report.runs.iter().map(|r| r.results.len()).sum();
    let failed = report.runs.iter().flat_map(|r| &r.results).filter(|r| !r.passed).count();
    let _ = writeln!(out, "# hetero conformance\n");
    let _ = writeln!(
        out,
        "{}: {} of {total} checks passed (seed {}, schema {}).\n",
        if report.passed() { "PASS" } else { "FAIL" },
        total - failed,
        report.seed,
        report.schema_version
    );
    // Rows in first-seen order; one column per run.
    let mut rows: Vec<(String, String, String)> = Vec::new();
    let mut cells: BTreeMap<(usize, usize), String> = BTreeMap::new();
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
    let headers: Vec<String> = report.runs.iter().map(|r| format!("{} ({})", r.backend, r.device.name)).collect();
    let _ = writeln!(out, "| workload | variant | size | {} |", headers.join(" | "));
    let _ = writeln!(out, "|---|---|---|{}", "---|".repeat(headers.len()));
    for (i, (workload, variant, size)) in rows.iter().enumerate() {
        let row: Vec<String> =
            (0..report.runs.len()).map(|c| cells.get(&(i, c)).cloned().unwrap_or_else(|| "-".to_string())).collect();
        let _ = writeln!(out, "| {workload} | {variant} | {size} | {} |", row.join(" | "));
    }
    let _ = writeln!(out, "\nCells: result, error/tolerance against the float64 reference, device time.\n");
    comparison_table(&mut out, report, &rows, &headers);
    let mut overlap = String::new();
    for run in &report.runs {
        for r in run.results.iter().filter(|r| r.metrics.contains_key("hidden_copy_fraction")) {
            let m = &r.metrics;
            let num = |x: Option<f64>, unit: &str| x.map_or("-".to_string(), |v| format!("{v:.3}{unit}"));
            let _ = writeln!(
                overlap,
                "| {} ({}) | {} {} | {} | {} | {} | {} | {} | {} | {:.0}% |",
                run.backend,
                run.device.name,
                r.workload.name(),
                r.variant,
                r.size.name(),
                num(m.get("sync_ms").copied(), ""),
                num(r.device_ms, ""),
                num(m.get("ideal_ms").copied(), ""),
                num(m.get("of_ideal").copied(), "x"),
                num(m.get("speedup_vs_sync").copied(), "x"),
                100.0 * m.get("hidden_copy_fraction").copied().unwrap_or(f64::NAN)
            );
        }
    }
    if !overlap.is_empty() {
        let _ = writeln!(out, "## Copies overlapped under compute\n");
        let _ = writeln!(
            out,
            "Ideal: the longer of the synchronous run's summed kernel and copy intervals (wave). Copy time hidden: share of the copy intervals that overlaps kernel intervals on the device timeline.\n"
        );
        let _ = writeln!(
            out,
            "| run | workload / variant | size | sync ms | time ms | ideal ms | time / ideal | speed-up vs sync | copy time hidden |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
        out += &overlap;
        out += "\n";
    }
    let notes: Vec<String> = report
        .runs
        .iter()
        .flat_map(|run| {
            run.results.iter().filter_map(move |r| {
                r.note.as_ref().map(|n| format!("- {} {} {}: {n}", run.backend, r.workload.name(), r.variant))
            })
        })
        .chain(report.unavailable.iter().map(|u| format!("- skipped {}: {}", u.backend, u.reason)))
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(out, "## Notes\n\n{}", notes.join("\n"));
    }
    out
}

/// Each later run's outputs against the first run's (cross-backend comparison).
fn comparison_table(out: &mut String, report: &Report, rows: &[(String, String, String)], headers: &[String]) {
    let compared: Vec<usize> =
        (0..report.runs.len()).filter(|&c| report.runs[c].results.iter().any(|r| r.comparison.is_some())).collect();
    let Some(against) = compared
        .first()
        .and_then(|&c| report.runs[c].results.iter().find_map(|r| r.comparison.as_ref()))
        .map(|c| c.against.clone())
    else {
        return;
    };
    let num = |x: Option<f64>| x.map_or("inf".to_string(), |v| format!("{v:.1e}"));
    let _ = writeln!(out, "## Backends compared with {against}\n");
    let _ = writeln!(out, "Largest absolute / relative difference of each output.\n");
    let names: Vec<&str> = compared.iter().map(|&c| headers[c].as_str()).collect();
    let _ = writeln!(out, "| workload | variant | size | {} |", names.join(" | "));
    let _ = writeln!(out, "|---|---|---|{}", "---|".repeat(names.len()));
    for (workload, variant, size) in rows {
        let row: Vec<String> = compared
            .iter()
            .map(|&c| {
                report.runs[c]
                    .results
                    .iter()
                    .find(|r| r.workload.name() == workload && &r.variant == variant && r.size.name() == size)
                    .and_then(|r| r.comparison.as_ref())
                    .map_or("-".to_string(), |c| format!("{} / {}", num(c.max_abs), num(c.max_rel)))
            })
            .collect();
        let _ = writeln!(out, "| {workload} | {variant} | {size} | {} |", row.join(" | "));
    }
    out.push('\n');
}

/// Combines reports of one schema version into one, runs side by side.
pub fn merge(reports: Vec<Report>) -> Result<Report, String> {
    let mut iter = reports.into_iter();
    let mut merged = iter.next().ok_or("no report to merge")?;
    for report in iter {
        if report.schema_version != merged.schema_version {
            return Err(format!(
                "cannot merge schema version {} into {}: rerun conform with one hetero version",
                report.schema_version, merged.schema_version
            ));
        }
        if report.seed != merged.seed {
            merged.unavailable.push(crate::report::Unavailable {
                backend: "-".to_string(),
                reason: format!("reports used different seeds ({} and {}): inputs differ", merged.seed, report.seed),
            });
        }
        merged.runs.extend(report.runs);
        merged.unavailable.extend(report.unavailable);
    }
    Ok(merged)
}
