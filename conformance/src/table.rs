//! The terminal table: one row per backend, device, workload and variant.

use crate::report::{Report, ResultRecord};

const HEADERS: [&str; 7] = ["backend", "device", "workload", "variant", "result", "error / tolerance", "device ms"];
const DEVICE_WIDTH: usize = 32;

fn cells(backend: &str, device: &str, r: &ResultRecord) -> [String; 7] {
    let number = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2e}"));
    let device: String = if device.chars().count() > DEVICE_WIDTH {
        device.chars().take(DEVICE_WIDTH - 1).chain(['…']).collect()
    } else {
        device.to_string()
    };
    [
        backend.to_string(),
        device,
        r.workload.name().to_string(),
        r.variant.clone(),
        if r.passed { "pass" } else { "FAIL" }.to_string(),
        if r.error.is_none() && r.tolerance.is_none() {
            "-".to_string()
        } else {
            format!("{} / {}", number(r.error), number(r.tolerance))
        },
        r.device_ms.map_or("-".to_string(), |ms| format!("{ms:.3}")),
    ]
}

/// The table and, below it, the notes of failed rows and the overlap figures.
pub fn render(report: &Report) -> String {
    let rows: Vec<[String; 7]> = report
        .runs
        .iter()
        .flat_map(|run| {
            let device = report.device_label(run);
            run.results.iter().map(move |r| cells(&run.backend, &device, r))
        })
        .collect();
    let mut widths = HEADERS.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let padded: Vec<String> = cells.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(&HEADERS.map(String::from));
    out += &line(&widths.map(|w| "-".repeat(w)));
    for row in &rows {
        out += &line(row);
    }
    for run in &report.runs {
        if let Some(note) = run.timing_note() {
            out += &format!("timing: {note}\n");
        }
    }
    for note in report.identity_notes().into_iter().chain(report.slow_notes()) {
        out += &format!("{note}\n");
    }
    for run in &report.runs {
        for r in &run.results {
            if let Some(note) = &r.note {
                out += &format!("note: {} {} {}: {note}\n", run.backend, r.workload.name(), r.variant);
            }
            if r.variant == "balanced-sync"
                && let (Some(every), Some(step), Some(copy)) =
                    (r.metrics.get("snapshot_every"), r.metrics.get("step_ms"), r.metrics.get("snapshot_copy_ms"))
            {
                out += &format!(
                    "balance: {} {}: one step {step:.4} ms, one snapshot copy {copy:.4} ms: a snapshot every {every} steps\n",
                    run.backend,
                    r.workload.name(),
                );
            }
            if let Some(devices) = r.metrics.get("devices") {
                let num = |x: Option<&f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
                let hidden = r
                    .metrics
                    .get("halo_hidden_fraction")
                    .map_or(String::new(), |h| format!(", {:.0}% of it hidden", h * 100.0));
                let hidden = match r.metrics.get("single_best_variant") {
                    Some(&v) if v > 0.0 => format!("{hidden}; declined: the fastest single-device variant ran again"),
                    _ => hidden,
                };
                out += &format!(
                    "split: {} {} {} on {devices} devices, halos every {} steps: {} ms (host enqueue {} ms), one device {} ms, speed-up {}x (one device overlapped {} ms, {}x), halo copies {} ms{hidden}\n",
                    run.backend,
                    r.workload.name(),
                    r.variant,
                    r.metrics.get("halo_steps").map_or("-".to_string(), |k| format!("{k}")),
                    num(r.device_ms.as_ref()),
                    num(r.metrics.get("enqueue_ms")),
                    num(r.metrics.get("single_ms")),
                    num(r.metrics.get("speedup_vs_single")),
                    num(r.metrics.get("single_overlapped_ms")),
                    num(r.metrics.get("speedup_vs_single_overlapped")),
                    num(r.metrics.get("halo_ms")),
                );
            }
            let Some(hidden) = r.metrics.get("hidden_copy_fraction") else { continue };
            let time = r.device_ms.unwrap_or(f64::NAN);
            match (r.metrics.get("speedup_vs_sync"), r.metrics.get("sync_ms")) {
                (Some(speedup), Some(sync)) => {
                    let ideal = match (r.metrics.get("ideal_ms"), r.metrics.get("of_ideal")) {
                        (Some(ideal), Some(of)) => format!(", ideal {ideal:.3} ms ({of:.2}x of it)"),
                        _ => String::new(),
                    };
                    out += &format!(
                        "overlap: {} {} {}: sync {sync:.3} ms, async {time:.3} ms{ideal}, speed-up {speedup:.2}x, {:.0}% of copy time hidden\n",
                        run.backend,
                        r.workload.name(),
                        r.variant,
                        hidden * 100.0
                    );
                }
                _ => {
                    out += &format!(
                        "overlap: {} {} {}: {time:.3} ms, {:.0}% of copy time hidden\n",
                        run.backend,
                        r.workload.name(),
                        r.variant,
                        hidden * 100.0
                    );
                }
            }
        }
    }
    for run in &report.runs {
        let Some(against) = run.results.iter().find_map(|r| r.comparison.as_ref().map(|c| c.against.clone())) else {
            continue;
        };
        let num = |x: Option<f64>| x.map_or("inf".to_string(), |v| format!("{v:.1e}"));
        let compared: Vec<String> = run
            .results
            .iter()
            .filter_map(|r| {
                let c = r.comparison.as_ref()?;
                Some(format!("{} {} {}/{}", r.workload.name(), r.variant, num(c.max_abs), num(c.max_rel)))
            })
            .collect();
        out += &format!("compare: {} vs {against}, max abs/rel difference: {}\n", run.backend, compared.join(", "));
    }
    for run in &report.runs {
        for r in &run.results {
            if let Some(why) = &r.not_compared {
                out += &format!("compare: {} {} {}: {why}\n", run.backend, r.workload.name(), r.variant);
            }
        }
    }
    for run in &report.runs {
        if let Some(base) = run.d2d_gbps {
            let clock = if run.device_timing_unavailable.is_some() { ", host clock" } else { "" };
            out += &format!("bandwidth: {} device-to-device copy {base:.1} GB/s (read + write{clock})", run.backend);
            let figures: Vec<String> = run
                .results
                .iter()
                .filter_map(|r| {
                    let gbps = r.metrics.get("gbps")?;
                    Some(format!("{} {} {gbps:.1} GB/s ({:.0}%)", r.workload.name(), r.variant, 100.0 * gbps / base))
                })
                .collect();
            if !figures.is_empty() {
                out += &format!("; {}", figures.join(", "));
            }
            out += "\n";
        }
    }
    for run in &report.runs {
        let Some(baseline) = &run.baseline else { continue };
        let ratios: Vec<String> = baseline
            .ratios
            .iter()
            .map(|r| {
                format!(
                    "{} {} {:.3} ms vs {} {:.3} ms ({:.2}x)",
                    r.workload, r.variant, r.hetero_ms, r.library, r.library_ms, r.ratio
                )
            })
            .collect();
        out += &format!("library: {}: {}\n", run.backend, ratios.join(", "));
    }
    for u in &report.unavailable {
        out += &format!("skipped: {}: {}\n", u.backend, u.reason);
    }
    out
}
