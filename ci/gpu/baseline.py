"""Vendor-library baselines on the GPU node, for the conformance workloads.

    python3 ci/gpu/baseline.py --json $OUT/baseline.json

Times, with CUDA events, the medians of repeated runs after warm-up of:
the device's own copy (device to device, the bandwidth roof), the f32 sum
of 2^28 elements through torch and CuPy (CUB underneath), and the
exclusive prefix sum of 2^28 u32 through torch and CuPy (inclusive cumsum
in int32, which moves the same bytes). Sizes are those of `conform --size
large`; reports compare hetero's times from that run with these.
"""

import argparse
import json
import statistics

import torch

N = 1 << 28
WARMUP, REPEATS = 3, 11


def timed(fn):
    """Median device milliseconds of fn() after warm-up (CUDA events)."""
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(REPEATS):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    dev = torch.device("cuda")
    results = {"device": torch.cuda.get_device_name(0), "n": N, "warmup": WARMUP, "repeats": REPEATS,
               "torch": torch.__version__, "entries": []}

    def add(workload, library, ms, bytes_moved):
        gbps = bytes_moved / (ms * 1e6)
        results["entries"].append({"workload": workload, "library": library, "ms": ms, "gbps": gbps})
        print(f"{workload:<8} {library:<22} {ms:9.4f} ms {gbps:9.1f} GB/s")

    x = torch.rand(N, device=dev, dtype=torch.float32) * 2 - 1
    y = torch.empty_like(x)
    add("copy", "torch copy_ (d2d)", timed(lambda: y.copy_(x)), 2 * 4 * N)
    add("reduce", "torch.sum", timed(lambda: torch.sum(x)), 4 * N)
    counts = torch.randint(0, 8, (N,), device=dev, dtype=torch.int32)
    add("scan", "torch.cumsum int32", timed(lambda: torch.cumsum(counts, 0, dtype=torch.int32)), 8 * N)
    try:
        import cupy
        cx = cupy.asarray(x)
        cc = cupy.asarray(counts)
        add("reduce", "cupy.sum (CUB)", timed(lambda: cupy.sum(cx)), 4 * N)
        add("scan", "cupy.cumsum int32", timed(lambda: cupy.cumsum(cc, dtype=cupy.int32)), 8 * N)
        results["cupy"] = cupy.__version__
    except Exception as e:  # CuPy is optional: torch's numbers still stand
        print(f"skipped: cupy: {e}")
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
