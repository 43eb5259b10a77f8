//! Regressions between two runs (`report compare OLD.json NEW.json`): the
//! results of the same backend, device (model and index), workload and
//! variant are paired, and every time slower than the old one by more
//! than a threshold, and every result whose verdict changed or that
//! disappeared, is flagged.
//!
//! Only reports of one schema version, size and seed compare: the work
//! must be the same for the times to mean anything.

use std::collections::BTreeMap;

use quick_junit::{NonSuccessKind, Report as JunitReport, TestCase, TestCaseStatus, TestSuite};

use crate::document::{Block, Cell};
use crate::report::{Report, ResultRecord, Run};

/// The default threshold: a time 10% longer than the old one is flagged.
pub const DEFAULT_THRESHOLD: f64 = 0.10;

/// What changed for one paired result.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Its time grew by more than the threshold.
    Slower {
        /// The old time, ms.
        old_ms: f64,
        /// The new time, ms.
        new_ms: f64,
    },
    /// Its verdict changed.
    Verdict {
        /// It passed before.
        old: bool,
        /// It passes now.
        new: bool,
    },
    /// The old report has it, the new one does not.
    Missing,
    /// In the new report its output differs from its peer's, a device of
    /// the same backend and model (node health).
    Disagrees {
        /// The peer.
        against: String,
        /// Largest absolute difference, where the shapes match.
        max_abs: Option<f64>,
    },
}

/// One flagged result.
#[derive(Debug, Clone, PartialEq)]
pub struct Flag {
    /// `backend device-name #index`.
    pub device: String,
    /// `workload/variant`.
    pub result: String,
    /// What changed.
    pub change: Change,
}

impl Flag {
    /// One line for a person.
    pub fn describe(&self) -> String {
        match &self.change {
            Change::Slower { old_ms, new_ms } => {
                format!("{:.3} ms -> {:.3} ms ({:+.1}%)", old_ms, new_ms, (new_ms / old_ms - 1.0) * 100.0)
            }
            Change::Verdict { old, new } => format!("{} -> {}", verdict(*old), verdict(*new)),
            Change::Missing => "in the old report only".into(),
            Change::Disagrees { against, max_abs: Some(abs) } => format!("differs from its peer {against} by {abs:e}"),
            Change::Disagrees { against, max_abs: None } => format!("differs from its peer {against} in shape"),
        }
    }
}

fn verdict(passed: bool) -> &'static str {
    if passed { "pass" } else { "FAIL" }
}

/// Everything the comparison found.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The threshold the times were judged by.
    pub threshold: f64,
    /// Results present in both reports.
    pub paired: usize,
    /// The flagged ones, in report order.
    pub flags: Vec<Flag>,
}

/// Checks a threshold given on the command line.
pub fn threshold(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        _ => Err(format!("`{text}` is not a threshold: give a fraction of at least 0, e.g. 0.1 for 10%")),
    }
}

type Key = (String, String, usize, String, String);

fn key(run: &Run, r: &ResultRecord) -> Key {
    (run.backend.clone(), run.device.name.clone(), run.device.ordinal, r.workload.name().to_string(), r.variant.clone())
}

/// Whether a run of `schema`, `size` and `seed` can be compared with
/// `old`, which must hold results; the error says why not. `conform
/// --against` asks before it runs, so that no finished run is lost to a
/// comparison that could never be made.
pub fn comparable(old: &Report, schema: u32, size: crate::workloads::Size, seed: u64) -> Result<(), String> {
    if !has_results(old) {
        return Err("the old report has no results: compare with a report of a run that checked something".into());
    }
    if old.schema_version != schema {
        return Err(format!(
            "the reports have schema versions {} and {schema}: rerun the old one with this conform",
            old.schema_version
        ));
    }
    if old.size != size {
        return Err(format!(
            "the reports ran size {} and size {}: compare runs of one size",
            old.size.name(),
            size.name()
        ));
    }
    if old.seed != seed {
        return Err(format!("the reports ran seeds {} and {seed}: compare runs of one seed", old.seed));
    }
    Ok(())
}

fn has_results(report: &Report) -> bool {
    report.runs.iter().any(|r| !r.results.is_empty())
}

/// Reads a `conform --json` report; the error names the file.
pub fn read(path: &std::path::Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str::<Report>(&text).map_err(|e| format!("{}: not a conform report: {e}", path.display()))
}

/// Compares `new` with `old`; an error says why the two cannot be compared.
pub fn compare(old: &Report, new: &Report, threshold: f64) -> Result<Comparison, String> {
    comparable(old, new.schema_version, new.size, new.seed)?;
    if !has_results(new) {
        return Err("the new report has no results".into());
    }
    let newer: BTreeMap<Key, &ResultRecord> =
        new.runs.iter().flat_map(|run| run.results.iter().map(move |r| (key(run, r), r))).collect();
    let mut flags = Vec::new();
    let mut paired = 0;
    for run in &old.runs {
        let device = format!("{} {} #{}", run.backend, run.device.name, run.device.ordinal);
        for was in &run.results {
            let result = format!("{}/{}", was.workload.name(), was.variant);
            let flag = |change| Flag { device: device.clone(), result: result.clone(), change };
            let Some(now) = newer.get(&key(run, was)) else {
                flags.push(flag(Change::Missing));
                continue;
            };
            paired += 1;
            if was.passed != now.passed {
                flags.push(flag(Change::Verdict { old: was.passed, new: now.passed }));
            }
            if let Some(peer) = now.peer.as_ref().filter(|p| !p.agree) {
                flags.push(flag(Change::Disagrees { against: peer.against.clone(), max_abs: peer.max_abs }));
            }
            if let (Some(old_ms), Some(new_ms)) = (was.device_ms, now.device_ms)
                && old_ms > 0.0
                && new_ms > old_ms * (1.0 + threshold)
            {
                flags.push(flag(Change::Slower { old_ms, new_ms }));
            }
        }
    }
    Ok(Comparison { threshold, paired, flags })
}

impl Comparison {
    /// What the Markdown and HTML pages show (`markdown::to_markdown`,
    /// `html::to_html`): the count, and a row per flag.
    pub fn document(&self) -> Vec<Block> {
        let mut blocks = vec![
            Block::Title("Regressions".into()),
            Block::Text(format!(
                "{} results paired; {} flagged (times more than {:.0}% longer, changed verdicts, missing results, outputs that differ from a peer of the same model).",
                self.paired,
                self.flags.len(),
                self.threshold * 100.0
            )),
        ];
        if !self.flags.is_empty() {
            let header = ["device", "workload / variant", "change"].map(String::from).to_vec();
            let rows = self
                .flags
                .iter()
                .map(|f| vec![Cell::plain(&f.device), Cell::plain(&f.result), Cell::plain(f.describe())])
                .collect();
            blocks.push(Block::Table { header, rows });
        }
        blocks
    }

    /// The comparison as JUnit XML: one failing test case per flag.
    pub fn junit(&self) -> Result<String, String> {
        let mut junit = JunitReport::new("hetero-regressions");
        let mut suite = TestSuite::new("report compare");
        if self.flags.is_empty() {
            suite.add_test_case(TestCase::new("no regression", TestCaseStatus::success()));
        }
        for f in &self.flags {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status.set_message(f.describe());
            let mut case = TestCase::new(format!("{} {}", f.device, f.result), status);
            case.set_classname("regression");
            suite.add_test_case(case);
        }
        junit.add_test_suite(suite);
        junit.to_string().map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{DeviceReport, SCHEMA_VERSION};
    use crate::workloads::{Size, Workload};

    fn result(variant: &str, ms: f64, passed: bool) -> ResultRecord {
        let mut r = ResultRecord::failure(Workload::Reduce, Size::Small, String::new());
        r.variant = variant.into();
        r.device_ms = Some(ms);
        r.passed = passed;
        r.note = None;
        r
    }

    fn report(results: Vec<ResultRecord>) -> Report {
        let device = DeviceReport::named("GPU");
        let run = Run {
            backend: "cuda".into(),
            device,
            d2d_gbps: None,
            device_timing_unavailable: None,
            baseline: None,
            results,
        };
        Report {
            schema_version: SCHEMA_VERSION,
            hetero_version: "0".into(),
            seed: 1,
            size: Size::Small,
            deterministic: false,
            runs: vec![run],
            unavailable: Vec::new(),
            node_health: Vec::new(),
        }
    }

    /// A time 20% longer is flagged, one 5% longer is not, a verdict that
    /// changed and a result that disappeared are flagged.
    #[test]
    fn slower_changed_and_missing_results_are_flagged() {
        let old = report(vec![
            result("a", 1.0, true),
            result("b", 1.0, true),
            result("c", 1.0, true),
            result("d", 1.0, true),
        ]);
        let new = report(vec![result("a", 1.2, true), result("b", 1.05, true), result("c", 1.0, false)]);
        let found = compare(&old, &new, DEFAULT_THRESHOLD).expect("comparable");
        let changes: Vec<(&str, &Change)> = found.flags.iter().map(|f| (f.result.as_str(), &f.change)).collect();
        assert_eq!(
            changes,
            [
                ("reduce/a", &Change::Slower { old_ms: 1.0, new_ms: 1.2 }),
                ("reduce/c", &Change::Verdict { old: true, new: false }),
                ("reduce/d", &Change::Missing),
            ]
        );
        assert_eq!(found.paired, 3);
        let text = format!("{:?}", found.document());
        assert!(text.contains("+20.0%"), "{text}");
        assert!(found.junit().expect("xml").contains("reduce/c"));
    }

    /// Reports of other sizes, seeds or schemas, or with no results, are
    /// refused with the reason; thresholds must be fractions of at least 0.
    #[test]
    fn mismatched_reports_and_bad_thresholds_are_refused() {
        let old = report(vec![result("a", 1.0, true)]);
        let mut other = old.clone();
        other.size = Size::Medium;
        assert!(compare(&old, &other, 0.1).unwrap_err().contains("size"));
        let mut other = old.clone();
        other.seed = 2;
        assert!(compare(&old, &other, 0.1).unwrap_err().contains("seeds"));
        let mut other = old.clone();
        other.schema_version += 1;
        assert!(compare(&old, &other, 0.1).unwrap_err().contains("schema"));
        assert!(compare(&old, &report(Vec::new()), 0.1).unwrap_err().contains("no results"));
        assert_eq!(threshold("0.2"), Ok(0.2));
        for bad in ["-0.1", "x", "NaN", "inf", ""] {
            assert!(threshold(bad).is_err(), "{bad}");
        }
    }

    /// Node health as data: a device whose output differs from its
    /// peer's is listed in the report's health, fails the report, and is
    /// flagged by `report compare` even when it failed before too.
    #[test]
    fn devices_that_disagree_are_data_a_job_can_read() {
        use crate::report::PeerCheck;
        let check = |agree: bool| PeerCheck {
            against: "cuda (GPU #0)".into(),
            max_abs: Some(if agree { 0.0 } else { 0.5 }),
            max_rel: None,
            allowed: 0.0,
            agree,
            time_ratio: Some(1.5),
        };
        let mut first = result("a", 1.0, true);
        first.peer = Some(check(true));
        let mut second = result("b", 1.0, false);
        second.peer = Some(check(false));
        let mut new = report(vec![first, second]);
        new.runs[0].device.ordinal = 1;
        let health = new.health();
        assert_eq!(health.len(), 1);
        assert_eq!((health[0].device, health[0].compared), (1, 2));
        assert_eq!(health[0].disagree, ["reduce/b"]);
        assert_eq!(health[0].time_ratio, Some(1.5));
        assert!(!new.passed(), "conform exits 1");
        let old = new.clone();
        let found = compare(&old, &new, DEFAULT_THRESHOLD).expect("comparable");
        let flagged: Vec<&Change> = found.flags.iter().map(|f| &f.change).collect();
        assert_eq!(flagged, [&Change::Disagrees { against: "cuda (GPU #0)".into(), max_abs: Some(0.5) }]);
        let json = serde_json::to_string(&Report { node_health: health, ..new }).expect("json");
        assert!(json.contains("\"node_health\"") && json.contains("\"disagree\":[\"reduce/b\"]"), "{json}");
    }
}
