//! `--trace FILE`: the report's device intervals as Chrome trace-event JSON.

/// Chrome trace-event JSON (opens in Perfetto): one process per device run,
/// one thread per workload variant and stream, one complete event per operation.
pub fn chrome_trace(report: &crate::report::Report) -> serde_json::Value {
    let mut events = Vec::new();
    for (pid, run) in report.runs.iter().enumerate() {
        let process = format!("{} ({})", run.backend, report.device_label(run));
        events.push(serde_json::json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": process}}));
        let mut tracks: Vec<String> = Vec::new();
        for r in &run.results {
            for i in &r.intervals {
                let track = format!("{} {} / {}", r.workload.name(), r.variant, i.track);
                let tid = tracks.iter().position(|t| *t == track).unwrap_or_else(|| {
                    tracks.push(track.clone());
                    tracks.len() - 1
                });
                events.push(serde_json::json!({
                    "name": i.name, "cat": i.kind, "ph": "X", "pid": pid, "tid": tid,
                    "ts": i.start_ms * 1e3, "dur": ((i.end_ms - i.start_ms) * 1e3).max(0.0),
                }));
            }
        }
        for (tid, track) in tracks.iter().enumerate() {
            events.push(
                serde_json::json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": track}}),
            );
        }
    }
    serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}
