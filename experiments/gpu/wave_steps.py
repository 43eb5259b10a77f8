"""Summarises the wave steps of a `conform --trace` file, per variant: how
long the steps took on the device and how long the device sat between them.

    python3 wave_steps.py TRACE.json[.gz]

A slow run whose steps take their usual time spent the difference in gaps
(the device waited for commands); one whose steps are slow spent it in the
kernels themselves.
"""

import gzip
import json
import statistics
import sys
from collections import defaultdict


def main(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        events = json.load(f)
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    names = {}
    steps = defaultdict(list)
    copies = defaultdict(float)
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    for e in events:
        if e.get("ph") != "X":
            continue
        track = names.get((e["pid"], e["tid"]), str(e["tid"]))
        if not track.startswith("wave "):
            continue
        variant = track[len("wave "):].split(" / ")[0]
        if e["name"] == "wave_step":
            steps[variant].append((e["ts"] / 1e3, e["dur"] / 1e3))
        elif e.get("cat") == "copy":
            copies[variant] += e["dur"] / 1e3
    print(f"{path}: wave steps per variant (ms)")
    print(f"{'variant':24} {'steps':>6} {'span':>9} {'steps sum':>10} {'median':>8} {'max':>8} {'gaps sum':>9} {'copies':>8}")
    for variant, spans in steps.items():
        spans.sort()
        durations = [d for _, d in spans]
        gaps = sum(max(0.0, b[0] - (a[0] + a[1])) for a, b in zip(spans, spans[1:]))
        span = spans[-1][0] + spans[-1][1] - spans[0][0]
        print(
            f"{variant:24} {len(spans):6d} {span:9.3f} {sum(durations):10.3f} {statistics.median(durations):8.4f}"
            f" {max(durations):8.3f} {gaps:9.3f} {copies[variant]:8.3f}"
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: wave_steps.py TRACE.json")
    main(sys.argv[1])
