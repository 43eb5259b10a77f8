"""torch's reduce, scan and segmented sum on the GPU node, per dtype, for
the `bench --algorithms-elements` rows of the same call, and the vendor
sorts, histograms and compactions of its sort rows (`sorting_rows`).

    python3 ci/gpu/algorithms_torch.py --elements 268435456 --json $OUT/algorithms-torch.json

Times with CUDA events (median of repeated runs after warm-up) the device's
own copy of the same bytes (clone into a preallocated tensor), `torch.sum`,
`torch.amax`, `torch.cumsum` and `torch.segment_reduce` (sum over segments
of 64, as the bench's segmented rows), each with the bytes it must move at
least and that figure over the copy's (reads plus writes): the convention
of hetero's bench. torch has no 32-bit unsigned sums; int32 moves the same
bytes. CuPy's rows (`library: cupy`) are `cupy.cumsum` and the segmented
sums `cupy.add.reduceat` over segments of 1, 64 and 4096 (`segmented-sum-1`,
`segmented-sum`, `segmented-sum-4096`, as the bench names them), timed the
same way: CuPy and torch both run on the legacy default stream here.
"""

import argparse
import json

import torch

from baseline import timed  # ci/gpu/baseline.py: median CUDA-event ms after warm-up

SEGMENT = 64
# The bench's segment lengths and its row names.
SEGMENTS = [(1, "segmented-sum-1"), (64, "segmented-sum"), (4096, "segmented-sum-4096")]


def cupy_rows(x, y, n, size, name, copy_gbps, rows):
    """CuPy's scan and segmented sums on torch's tensors (no copy: DLPack)."""
    try:
        import cupy
    except ImportError as e:
        print(f"skipped: cupy: {e}")
        return
    cx, cy = cupy.from_dlpack(x), cupy.from_dlpack(y)
    figures = [("scan-inclusive", 2 * n * size, timed(lambda: cupy.cumsum(cx, out=cy)))]
    for length, algorithm in SEGMENTS:
        segments = n // length
        starts = cupy.arange(0, segments * length, length, dtype=cupy.int64)
        head = cx[: segments * length]
        bytes_ = n * size + (segments + 1) * 4 + segments * size
        figures.append((algorithm, bytes_, timed(lambda: cupy.add.reduceat(head, starts))))
        # Segments of one length are rows: CuPy's reduction over an axis.
        rows_view = head.reshape(segments, length)
        figures.append((algorithm + " rows", bytes_, timed(lambda: rows_view.sum(axis=1))))
        del starts
    for algorithm, bytes_, ms in figures:
        gbps = bytes_ / (ms * 1e6)
        rows.append({"library": "cupy", "dtype": name, "algorithm": algorithm, "elements": n, "device_ms": ms,
                     "gbps": gbps, "of_copy": gbps / copy_gbps})
        print(f"cupy  {name:8} {algorithm:18} {ms:9.3f} ms {gbps:8.1f} GB/s {gbps / copy_gbps:6.2f} of copy")


def sorting_rows(n, rows):
    """The vendor rows of the bench's sort, histogram and select rows, on
    random inputs: cupy.sort (CUB's radix sort) of uint32, uint64 and
    float32 keys, torch.sort of float32 and int32 keys with their int64
    indices, 256-bin histograms (cupy.histogram, torch.histc) and
    boolean-mask compaction (about half kept), each with the bytes hetero's
    row counts and that over the copy's. Sorts also give keys per second."""
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(54)

    def row(library, name, algorithm, bytes_, ms, copy_gbps, keys=False):
        gbps = bytes_ / (ms * 1e6)
        r = {"library": library, "dtype": name, "algorithm": algorithm, "elements": n, "device_ms": ms,
             "gbps": gbps, "of_copy": gbps / copy_gbps}
        if keys:
            r["gkeys"] = n / (ms * 1e6)
        rows.append(r)
        extra = f" {r['gkeys']:6.2f} Gkeys/s" if keys else ""
        print(f"{library:5} {name:8} {algorithm:15} {ms:9.3f} ms {gbps:8.1f} GB/s {gbps / copy_gbps:6.2f} of copy{extra}")

    for name, size in [("float32", 4), ("int32", 4), ("int64", 8)]:
        if name == "float32":
            x = torch.rand(n, device=dev, generator=gen) * 2 - 1
        else:
            x = torch.randint(-2**31, 2**31 - 1, (n,), device=dev, generator=gen, dtype=torch.int64)
            x = x.to(torch.int32) if size == 4 else (x << 24)
        y = torch.empty_like(x)
        copy_gbps = 2 * n * size / (timed(lambda: y.copy_(x)) * 1e6)
        row("torch", name, "sort-pairs", 2 * n * (size + 8), timed(lambda: torch.sort(x)), copy_gbps, keys=True)
        row("torch", name, "sort-stable", 2 * n * (size + 8), timed(lambda: torch.sort(x, stable=True)), copy_gbps,
            keys=True)
        if name == "float32":
            row("torch", name, "histogram-256", n * size, timed(lambda: torch.histc(x, 256, -1.0, 1.0)), copy_gbps)
        kept = int((x < 0).sum())
        row("torch", name, "select", (n + kept) * size, timed(lambda: x[x < 0]), copy_gbps)
        try:
            import cupy
        except ImportError as e:
            print(f"skipped: cupy: {e}")
            continue
        cx = cupy.from_dlpack(x)
        keys = [(name, cx)]
        if name == "int32":
            keys.append(("uint32", cx.view(cupy.uint32)))
        if name == "int64":
            keys.append(("uint64", cx.view(cupy.uint64)))
        for key_name, k in keys:
            row("cupy", key_name, "sort", 2 * n * size, timed(lambda: cupy.sort(k)), copy_gbps, keys=True)
        if name == "float32":
            row("cupy", name, "histogram-256", n * size, timed(lambda: cupy.histogram(cx, 256, (-1.0, 1.0))), copy_gbps)
        row("cupy", name, "select", (n + kept) * size, timed(lambda: cx[cx < 0]), copy_gbps)
        del cx, keys
        del x, y
        torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", type=int, default=1 << 28)
    parser.add_argument("--json", required=True)
    parser.add_argument("--sorting-only", action="store_true", help="only the sort, histogram and select rows")
    args = parser.parse_args()
    n = args.elements
    dev = torch.device("cuda")
    rows = []
    dtypes = [(torch.int32, "int32"), (torch.float32, "float32"), (torch.int64, "int64"), (torch.float64, "float64")]
    for dtype, name in [] if args.sorting_only else dtypes:
        size = torch.tensor([], dtype=dtype).element_size()
        x = torch.zeros(n, device=dev, dtype=dtype)
        y = torch.empty_like(x)
        copy_ms = timed(lambda: y.copy_(x))
        copy_gbps = 2 * n * size / (copy_ms * 1e6)
        segments = n // SEGMENT
        lengths = torch.full((segments,), SEGMENT, device=dev, dtype=torch.int64)
        head = x[: segments * SEGMENT]
        figures = [
            ("reduce-sum", n * size, timed(lambda: torch.sum(x))),
            ("reduce-max", n * size, timed(lambda: torch.amax(x))),
            ("scan-inclusive", 2 * n * size, timed(lambda: torch.cumsum(x, 0, out=y))),
        ]
        if dtype.is_floating_point:
            # segment_reduce takes floating point only.
            figures.append(("segmented-sum", n * size + segments * (8 + size),
                            timed(lambda: torch.segment_reduce(head, "sum", lengths=lengths))))
        for algorithm, bytes_, ms in figures:
            gbps = bytes_ / (ms * 1e6)
            rows.append({"library": "torch", "dtype": name, "algorithm": algorithm, "elements": n, "device_ms": ms, "gbps": gbps,
                         "of_copy": gbps / copy_gbps})
            print(f"torch {name:8} {algorithm:15} {ms:9.3f} ms {gbps:8.1f} GB/s {gbps / copy_gbps:6.2f} of copy")
        cupy_rows(x, y, n, size, name, copy_gbps, rows)
        del x, y
        torch.cuda.empty_cache()
    sorting_rows(n, rows)
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
