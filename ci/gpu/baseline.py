"""Vendor-library baselines on the GPU node, for the conformance workloads.

    python3 ci/gpu/baseline.py --size large --json $OUT/baseline.json
    conform --size large --baseline $OUT/baseline.json ...

Times, with CUDA events, the medians of repeated runs after warm-up of:
the device's own copy (device to device, the bandwidth roof), the bandwidth
workload's kernels and pinned copies each way, the f32 sum
through torch and CuPy (CUB underneath), and the prefix sum of u32 counts
through torch and CuPy (inclusive cumsum in int32, which moves the same
bytes as hetero's exclusive scan), and the sort workload's variants
(`sort_workload`), at the element count of `conform --size`. The file is the `baseline` section of docs/report-schema.md;
`conform --baseline` attaches it to the runs on this device with hetero's
ratio to each figure.
"""

import argparse
import json
import statistics

import torch

# Elements of reduce and scan at each `conform --size` (conformance/src/workloads/mod.rs).
ELEMENTS = {"small": 1 << 20, "medium": 1 << 24, "large": 1 << 28}
# Floats per array of the bandwidth workload (conformance/src/workloads/bandwidth.rs).
BANDWIDTH_ELEMENTS = {"small": 1 << 23, "medium": 1 << 25, "large": 1 << 27}
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


def bandwidth(n, dev, add):
    """The bandwidth workload's figures through torch, bytes counted as
    BabelStream counts them: BabelStream's five kernels as torch calls, and
    pinned copies each way (the `variant` each is set against)."""
    scalar = 0.4
    a, b, c = (torch.full((n,), v, device=dev, dtype=torch.float32) for v in (0.1, 0.2, 0.0))
    word = 4
    add("bandwidth", "torch copy_ (d2d)", timed(lambda: c.copy_(a)), 2 * word * n, "copy")
    add("bandwidth", "torch.mul out=", timed(lambda: torch.mul(c, scalar, out=b)), 2 * word * n, "mul")
    add("bandwidth", "torch.add out=", timed(lambda: torch.add(a, b, out=c)), 3 * word * n, "add")
    add("bandwidth", "torch.add alpha out=", timed(lambda: torch.add(b, c, alpha=scalar, out=a)), 3 * word * n, "triad")
    add("bandwidth", "torch.dot", timed(lambda: torch.dot(a, b)), 2 * word * n, "dot")
    host = torch.empty(n, dtype=torch.float32, pin_memory=True)
    add("bandwidth", "torch copy_ pinned", timed(lambda: a.copy_(host, non_blocking=True)), word * n, "h2d")
    add("bandwidth", "torch copy_ pinned", timed(lambda: host.copy_(a, non_blocking=True)), word * n, "d2h")


def sort_workload(n, dev, add):
    """The sort workload's variants through torch and CuPy, on hits like
    its own (modules in 0..4000, inner ones busier; exponential charges),
    each with the bytes hetero's variant counts, so that the ratio is one
    of times (conformance/src/workloads/sort.rs)."""
    gen = torch.Generator(device=dev).manual_seed(54)
    u = torch.rand(n, device=dev, generator=gen)
    modules = (u * u * 4000).to(torch.int32)
    charges = -torch.log(torch.rand(n, device=dev, generator=gen).clamp_min(1e-7)) * 15
    kept = int((charges > 20).sum())
    add("sort", "torch.sort int32 (stable)", timed(lambda: torch.sort(modules, stable=True)), 2 * 8 * n, "pairs")
    add("sort", "torch.histc 256 bins", timed(lambda: torch.histc(charges, 256, 0.0, 100.0)), 4 * n, "histogram")
    add("sort", "torch mask compaction", timed(lambda: charges[charges > 20]), 4 * (n + kept), "select")

    def assoc():
        torch.cumsum(torch.bincount(modules, minlength=4000), 0)
        return torch.sort(modules, stable=True)

    add("sort", "torch bincount+cumsum+sort", timed(assoc), 2 * 8 * n, "assoc")
    try:
        import cupy
        cm, cq = cupy.from_dlpack(modules).view(cupy.uint32), cupy.from_dlpack(charges)
        add("sort", "cupy.sort uint32 (CUB)", timed(lambda: cupy.sort(cm)), 2 * 4 * n, "keys")
        add("sort", "cupy.argsort uint32", timed(lambda: cupy.argsort(cm)), 2 * 8 * n, "pairs")
        add("sort", "cupy.histogram 256 bins", timed(lambda: cupy.histogram(cq, 256, (0.0, 100.0))), 4 * n, "histogram")
        add("sort", "cupy mask compaction", timed(lambda: cq[cq > 20]), 4 * (n + kept), "select")
    except Exception as e:  # CuPy is optional: torch's numbers still stand
        print(f"skipped: cupy sort: {e}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True)
    parser.add_argument("--size", choices=sorted(ELEMENTS), default="large")
    args = parser.parse_args()
    n = ELEMENTS[args.size]
    dev = torch.device("cuda")
    results = {"device": torch.cuda.get_device_name(0), "elements": n, "warmup": WARMUP, "repeats": REPEATS,
               "versions": {"torch": torch.__version__}, "entries": []}

    def add(workload, library, ms, bytes_moved, variant=None):
        gbps = bytes_moved / (ms * 1e6)
        entry = {"workload": workload, "library": library, "ms": ms, "gbps": gbps}
        if variant is not None:
            entry["variant"] = variant
        results["entries"].append(entry)
        print(f"{variant or workload:<8} {library:<26} {ms:9.4f} ms {gbps:9.1f} GB/s")

    x = torch.rand(n, device=dev, dtype=torch.float32) * 2 - 1
    y = torch.empty_like(x)
    add("copy", "torch copy_ (d2d)", timed(lambda: y.copy_(x)), 2 * 4 * n)
    add("reduce", "torch.sum", timed(lambda: torch.sum(x)), 4 * n)
    counts = torch.randint(0, 8, (n,), device=dev, dtype=torch.int32)
    add("scan", "torch.cumsum int32", timed(lambda: torch.cumsum(counts, 0, dtype=torch.int32)), 8 * n)
    bandwidth(BANDWIDTH_ELEMENTS[args.size], dev, add)
    sort_workload(n, dev, add)
    try:
        import cupy
        cx = cupy.asarray(x)
        cc = cupy.asarray(counts)
        add("reduce", "cupy.sum (CUB)", timed(lambda: cupy.sum(cx)), 4 * n)
        add("scan", "cupy.cumsum int32", timed(lambda: cupy.cumsum(cc, dtype=cupy.int32)), 8 * n)
        results["versions"]["cupy"] = cupy.__version__
    except Exception as e:  # CuPy is optional: torch's numbers still stand
        print(f"skipped: cupy: {e}")
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
