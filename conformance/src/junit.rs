//! `--junit FILE`: one test suite per device run, one test case per
//! workload variant; failures carry the numbers.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Report as JunitReport, TestCase, TestCaseStatus, TestSuite};

use crate::report::Report;

/// The JUnit XML of `report`.
pub fn render(report: &Report) -> Result<String, String> {
    let mut junit = JunitReport::new("hetero-conformance");
    for run in &report.runs {
        let mut suite = TestSuite::new(format!("{} / {}", run.backend, report.device_label(run)));
        let timing = run.timing_note();
        let notes: Vec<String> = run.device.identity().into_iter().chain(timing.clone()).collect();
        if !notes.is_empty() {
            suite.set_system_out(notes.join("\n"));
        }
        let clock = if timing.is_some() { "host wall-clock time" } else { "device time" };
        for r in &run.results {
            let name = format!("{}/{}/{}", r.workload.name(), r.variant, r.size.name());
            let numbers = format!(
                "error {} vs tolerance {}; {clock} {} ms",
                r.error.map_or("-".to_string(), |e| format!("{e:e}")),
                r.tolerance.map_or("-".to_string(), |t| format!("{t:e}")),
                r.device_ms.map_or("-".to_string(), |t| format!("{t:.3}")),
            );
            let status = if r.passed {
                TestCaseStatus::success()
            } else {
                let mut failure = TestCaseStatus::non_success(NonSuccessKind::Failure);
                failure.set_message(match &r.note {
                    Some(note) => format!("{numbers}; {note}"),
                    None => numbers.clone(),
                });
                failure
            };
            let mut case = TestCase::new(name, status);
            case.set_classname(format!("{}.{}", run.backend, r.workload.name()));
            if let Some(ms) = r.device_ms.filter(|ms| ms.is_finite() && *ms >= 0.0) {
                case.set_time(Duration::from_secs_f64(ms / 1e3));
            }
            match r.slower_than_peers {
                Some(ratio) => case.set_system_out(format!("{numbers}; slow: {ratio:.2}x its peers' median time")),
                None => case.set_system_out(numbers),
            };
            suite.add_test_case(case);
        }
        junit.add_test_suite(suite);
    }
    junit.to_string().map_err(|e| e.to_string())
}
