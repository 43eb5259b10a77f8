//! `report digests A.json B.json ...`: whether every output is the same
//! bits in every run of every report (the deterministic mode's promise,
//! checked across CI jobs and machines).

use std::collections::BTreeMap;

use crate::report::Report;

/// One line per output (workload, variant, size) with the runs that have
/// it, and whether their digests are all equal; `true` when every output
/// is equal everywhere and there was at least one.
pub fn check(reports: &[(String, Report)]) -> (String, bool) {
    let mut outputs: BTreeMap<(String, String, String), Vec<(String, String)>> = BTreeMap::new();
    for (file, report) in reports {
        for run in &report.runs {
            for r in &run.results {
                if let Some(digest) = &r.digest {
                    let key = (r.workload.name().to_string(), r.variant.clone(), r.size.name().to_string());
                    let label = format!("{file}: {} ({})", run.backend, report.device_label(run));
                    outputs.entry(key).or_default().push((label, digest.clone()));
                }
            }
        }
    }
    let mut text = String::new();
    let mut differing = 0;
    for ((workload, variant, size), runs) in &outputs {
        let first = &runs[0].1;
        if runs.iter().all(|(_, d)| d == first) {
            text += &format!(
                "equal   {workload} {variant} {size}: {} runs, {}\n",
                runs.len(),
                &first[..16.min(first.len())]
            );
        } else {
            differing += 1;
            text += &format!("DIFFER  {workload} {variant} {size}:\n");
            for (label, digest) in runs {
                text += &format!("          {digest}  {label}\n");
            }
        }
    }
    let runs: usize = reports.iter().map(|(_, r)| r.runs.len()).sum();
    text += &format!("{} outputs over {runs} runs in {} reports: {differing} differ\n", outputs.len(), reports.len());
    if outputs.is_empty() {
        text += "no output carries a digest (reports written before digests, or no variant kept its output)\n";
    }
    (text, differing == 0 && !outputs.is_empty())
}
