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
            // A time a Duration cannot hold (a report edited by hand, or
            // corrupted) is left out rather than ending the program.
            if let Some(time) = r.device_ms.and_then(|ms| Duration::try_from_secs_f64(ms / 1e3).ok()) {
                case.set_time(time);
            }
            let mut out = numbers;
            if let Some(ratio) = r.slower_than_peers {
                out += &format!("; slow: {ratio:.2}x its peers' median time");
            }
            if let Some(why) = &r.not_compared {
                out += &format!("; {why}");
            }
            case.set_system_out(out);
            suite.add_test_case(case);
        }
        junit.add_test_suite(suite);
    }
    junit.to_string().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Defect found by the `report` fuzz target: a device time too large
    /// for a `Duration` (here 4.4e76 ms) panicked in `Duration::from_secs_f64`.
    #[test]
    fn a_time_no_duration_holds_is_left_out() {
        let text = include_str!("../../fuzz/corpus/report/host-medium.json");
        let mut report: Report = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        let times = [Some(4.4e76), Some(f64::NAN), Some(-1.0), Some(f64::INFINITY), Some(2.5)];
        for (i, r) in report.runs[0].results.iter_mut().enumerate() {
            r.device_ms = times.get(i).copied().flatten();
        }
        let xml = render(&report).unwrap_or_else(|e| panic!("{e}"));
        let timed: Vec<&str> = xml.lines().filter(|l| l.contains("<testcase") && l.contains("time=")).collect();
        assert_eq!(timed.len(), 1, "only the time a Duration holds:\n{xml}");
        assert!(timed[0].contains("time=\"0.003\""), "{xml}");
    }
}
