# How a wave step's cost scales with the rows one launch computes, the
# question behind the split wave's speed-up (a band of half the rows should
# take half a step): wave.kern's wave_rows timed with CuPy over bands of
# 4096 cells' rows, 100 launches back to back between two CUDA events (the
# per-launch mean, gaps included), median of five, launched one by one and
# as one captured CUDA graph of the 100 (as the split's rounds run them),
# with each mode's fit of time = fixed + per-row cost; then the half bands
# on every GPU at once.
#   python3 experiments/gpu/wave_bands.py kernels/src/prelude/cuda.h kernels/src/portable/common.kern \
#     kernels/src/portable/wave.kern $OUT/wave_bands.json
"""Times wave_rows over bands of rows, on one GPU and on every GPU at once."""
import json
import statistics
import sys

import cupy as cp

from wave_common import NX, build

prelude, common, src = (open(p).read() for p in sys.argv[1:4])
LAUNCHES, REPEATS = 100, 5
BLOCK, ROWS_PER_THREAD = 256, 4


def setup(rows):
    """Fields of `rows` rows and the launch of every row, on the current device."""
    kernel = build(prelude, common, src, "wave_rows")
    rng = cp.random.default_rng(1)
    u_prev = rng.standard_normal(NX * rows, dtype=cp.float32)
    u = rng.standard_normal(NX * rows, dtype=cp.float32)
    out = cp.zeros_like(u)
    grid = ((NX + BLOCK - 1) // BLOCK, (rows + ROWS_PER_THREAD - 1) // ROWS_PER_THREAD)
    # row_begin, row_end, out_first, u_first: all rows of whole fields.
    args = (u_prev, u, out, cp.uint32(NX), cp.uint32(rows), cp.uint32(0), cp.uint32(rows), cp.uint32(0), cp.uint32(0),
            cp.float32(0.25), cp.uint32(NX // 2), cp.uint32(rows // 2), cp.float32(1.0))
    return lambda: kernel(grid, (BLOCK, 1), args)


def per_launch_ms(launches):
    """Median over REPEATS of the mean launch time, each device's launches timed on its own events."""
    for f, dev in launches:
        with cp.cuda.Device(dev):
            for _ in range(10):
                f()
    times = {dev: [] for _, dev in launches}
    for _ in range(REPEATS):
        marks = []
        for f, dev in launches:
            with cp.cuda.Device(dev):
                a, b = cp.cuda.Event(), cp.cuda.Event()
                a.record()
                marks.append((dev, a, b))
        for _ in range(LAUNCHES):
            for f, dev in launches:
                with cp.cuda.Device(dev):
                    f()
        for dev, a, b in marks:
            with cp.cuda.Device(dev):
                b.record()
        for dev, a, b in marks:
            with cp.cuda.Device(dev):
                b.synchronize()
                times[dev].append(cp.cuda.get_elapsed_time(a, b) / LAUNCHES)
    return {dev: statistics.median(t) for dev, t in times.items()}


def graph_launch_ms(f):
    """Median over REPEATS of the mean launch time of LAUNCHES launches of f captured as one CUDA graph."""
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        f()
        stream.synchronize()
        stream.begin_capture()
        for _ in range(LAUNCHES):
            f()
        graph = stream.end_capture()
        for _ in range(3):
            graph.launch(stream)
        times = []
        for _ in range(REPEATS):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record(stream)
            graph.launch(stream)
            b.record(stream)
            b.synchronize()
            times.append(cp.cuda.get_elapsed_time(a, b) / LAUNCHES)
    return statistics.median(times)


def fit(points):
    """Least-squares (fixed ms, ms a row) of time against rows."""
    n = len(points)
    mx = sum(r for r, _ in points) / n
    my = sum(t for _, t in points) / n
    slope = sum((r - mx) * (t - my) for r, t in points) / sum((r - mx) ** 2 for r, _ in points)
    return my - slope * mx, slope


res = {"nx": NX, "block": BLOCK, "one_gpu": [], "every_gpu": []}
full = full_graph = None
for rows in (4096, 2088, 2048, 1064, 1024, 552, 512):
    with cp.cuda.Device(0):
        f = setup(rows)
        ms = per_launch_ms([(f, 0)])[0]
        graph_ms = graph_launch_ms(f)
    full, full_graph = full or ms, full_graph or graph_ms
    gbps = 12 * NX * rows / ms / 1e6
    print(f"one GPU, {rows:5d} rows: {ms:.4f} ms a step, {gbps:5.0f} GB/s, {ms / full:.3f} of 4096 rows "
          f"(ideal {rows / 4096:.3f}); in a graph {graph_ms:.4f} ms, {graph_ms / full_graph:.3f} of 4096 rows")
    res["one_gpu"].append(dict(rows=rows, ms=ms, gbps=gbps, of_full=ms / full, graph_ms=graph_ms,
                               graph_of_full=graph_ms / full_graph))
for mode, key in (("one by one", "ms"), ("in a graph", "graph_ms")):
    fixed, per_row = fit([(p["rows"], p[key]) for p in res["one_gpu"]])
    print(f"fit, launched {mode}: {fixed * 1e3:.2f} us a launch + {per_row * 1e6:.2f} ns a row")
    res[f"fit_{key}"] = dict(fixed_ms=fixed, ms_per_row=per_row)
gpus = cp.cuda.runtime.getDeviceCount()
for n in sorted({2, gpus} - {1}):
    if n > gpus:
        continue
    rows = 4096 // n
    launches = []
    for dev in range(n):
        with cp.cuda.Device(dev):
            launches.append((setup(rows), dev))
    ms = per_launch_ms(launches)
    print(f"{n} GPUs at once, {rows} rows each: " + ", ".join(f"GPU {d} {t:.4f} ms" for d, t in ms.items()))
    res["every_gpu"].append(dict(gpus=n, rows=rows, ms=[ms[d] for d in sorted(ms)]))
json.dump(res, open(sys.argv[4], "w"), indent=1)
