"""Per-operation ratios of bench JSON files, one line per file and operation.

    python3 ci/gpu/experiments/cost-ab.py RUN.json...

For each file (one bench run) and backend: hetero against its baseline,
as the bench pairs them (OpenCL: untimed streams against the raw calls
flushed as hetero flushes; CUDA: default streams against cudarc), and
the typed layer's share (untimed streams against the trait path), for
the operations the per-operation targets name. Medians in microseconds.
"""

import json
import sys

OPS = ["launch", "launch_tracked", "copy_h2d", "copy_h2d_tracked", "copy_d2h", "alloc_free1_m", "round_trip"]
BASELINE = {"opencl": ("hetero-untimed", "raw-flushed"), "cuda": ("hetero", "cudarc")}


def costs(device):
    return {p["path"]: dict((op, c["median_us"]) for op, c in p["costs"]) for p in device["paths"]}


def main(files):
    for name in files:
        for device in json.load(open(name))["devices"]:
            backend = device["backend"]
            by_path = costs(device)
            if backend not in BASELINE:
                continue
            ours, theirs = BASELINE[backend]
            hetero, base = by_path.get(ours, {}), by_path.get(theirs, {})
            untimed, trait = by_path.get("hetero-untimed", {}), by_path.get("trait", {})
            cells = []
            for op in OPS:
                if op in hetero and op in base:
                    share = f" layer {untimed[op] - trait[op]:+.2f}" if op in trait and op in untimed else ""
                    cells.append(f"{op} {hetero[op]:.2f}/{base[op]:.2f}={hetero[op] / base[op]:.2f}x{share}")
            print(f"{name.rsplit('/', 1)[-1]} {backend} {ours} vs {theirs}: " + "; ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
