//! Report JSON as `report merge` and `report compare` read it: two reports
//! from one input (split at the first NUL byte), parsed, merged, compared
//! and rendered in every format, never a panic.

#![no_main]

use conformance::report::Report;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (a, b) = match data.iter().position(|&c| c == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, data),
    };
    let (Ok(a), Ok(b)) = (serde_json::from_slice::<Report>(a), serde_json::from_slice::<Report>(b)) else {
        return;
    };
    let _ = conformance::compare::compare(&a, &b, conformance::compare::DEFAULT_THRESHOLD);
    for report in [&a, &b] {
        let _ = conformance::markdown::render(report);
        let _ = conformance::html::render(report);
        let _ = conformance::table::render(report);
        let _ = conformance::junit::render(report);
    }
    if let Ok(merged) = conformance::report::merge(vec![a, b]) {
        let _ = conformance::markdown::render(&merged);
    }
});
