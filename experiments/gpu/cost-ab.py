"""Per-operation ratios of bench JSON files, one line per file and operation.

    python3 experiments/gpu/cost-ab.py RUN.json...

For each file (one bench run) and backend: hetero against its baseline,
as the bench pairs them (OpenCL: untimed streams against the raw calls
flushed as hetero flushes; CUDA: default streams against cudarc; HIP:
untimed streams against hetero's CUDA in the same run, and raw HIP
against raw CUDA), and the typed layer's share (untimed streams against
the trait path), for the operations the per-operation targets name.
Medians in microseconds.

Then, per binary (the file name up to its last `-`: `bench-new-2.json`
is a run of `bench-new`), the median ratio over its runs with their
range, also for OpenCL's default (timed) streams against raw calls on
profiling queues: a single run's ratio moves by about +-0.1 between runs.
"""

import json
import statistics
import sys
from collections import defaultdict

OPS = ["launch", "launch_tracked", "copy_h2d", "copy_h2d_tracked", "copy_d2h", "alloc_free1_m", "round_trip"]
BASELINE = {"opencl": ("hetero-untimed", "raw-flushed"), "cuda": ("hetero", "cudarc")}


def costs(device):
    return {p["path"]: dict((op, c["median_us"]) for op, c in p["costs"]) for p in device["paths"]}


def ratios(a, b, untimed=None, trait=None):
    """`op a/b=ratio` for each operation both have, followed by the typed
    layer's share (`untimed` less `trait`) where both are given and have it."""
    untimed, trait = untimed or {}, trait or {}
    cells = []
    for op in OPS:
        if op in a and op in b:
            share = f" layer {untimed[op] - trait[op]:+.2f}" if op in trait and op in untimed else ""
            cells.append(f"{op} {a[op]:.2f}/{b[op]:.2f}={a[op] / b[op]:.2f}x{share}")
    return "; ".join(cells)


# Each comparison the summary gives: backend, hetero path, baseline path.
SUMMARY = [("opencl", "hetero-untimed", "raw-flushed"), ("opencl", "hetero", "raw-prof"), ("cuda", "hetero", "cudarc")]


def summary(files):
    """Per binary and comparison: each operation's median ratio over the runs, and their range."""
    runs = defaultdict(list)
    for name in files:
        runs[name.rsplit("/", 1)[-1].rsplit("-", 1)[0]].append(name)
    for binary, names in sorted(runs.items()):
        devices = [{d["backend"]: costs(d) for d in json.load(open(n))["devices"]} for n in names]
        for backend, ours, theirs in SUMMARY:
            cells = []
            for op in OPS:
                r = sorted(
                    d[backend][ours][op] / d[backend][theirs][op]
                    for d in devices
                    if backend in d and op in d[backend].get(ours, {}) and op in d[backend].get(theirs, {})
                )
                if r:
                    cells.append(f"{op} {statistics.median(r):.2f}x ({r[0]:.2f}-{r[-1]:.2f})")
            if cells:
                print(f"{binary}, {len(names)} runs, {backend} {ours} vs {theirs}: " + "; ".join(cells))


def main(files):
    for name in files:
        devices = {d["backend"]: costs(d) for d in json.load(open(name))["devices"]}
        short = name.rsplit("/", 1)[-1]
        if "hip" in devices and "cuda" in devices:
            hip, cuda = devices["hip"], devices["cuda"]
            for path in ("hetero-untimed", "raw"):
                print(f"{short} hip vs cuda, {path}: " + ratios(hip.get(path, {}), cuda.get(path, {})))
        for backend, by_path in devices.items():
            if backend not in BASELINE:
                continue
            ours, theirs = BASELINE[backend]
            cells = ratios(
                by_path.get(ours, {}), by_path.get(theirs, {}), by_path.get("hetero-untimed"), by_path.get("trait")
            )
            print(f"{short} {backend} {ours} vs {theirs}: " + cells)


if __name__ == "__main__":
    main(sys.argv[1:])
    summary(sys.argv[1:])
