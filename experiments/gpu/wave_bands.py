# How a wave step's cost scales with the rows one launch computes, the
# question behind the split wave's speed-up (a band of half the rows should
# take half a step): wave.kern's wave_rows timed with CuPy over bands of
# 4096 cells' rows, 100 launches back to back between two CUDA events (the
# per-launch mean, gaps included, as a graph replay runs them), median of
# five; then the half bands on every GPU at once.
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
    args = (u_prev, u, out, cp.uint32(NX), cp.uint32(rows), cp.uint32(0), cp.uint32(rows), cp.uint32(0),
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


res = {"nx": NX, "block": BLOCK, "one_gpu": [], "every_gpu": []}
full = None
for rows in (4096, 2088, 2048, 1064, 1024, 552, 512):
    with cp.cuda.Device(0):
        ms = per_launch_ms([(setup(rows), 0)])[0]
    full = full or ms
    gbps = 12 * NX * rows / ms / 1e6
    print(f"one GPU, {rows:5d} rows: {ms:.4f} ms a step, {gbps:5.0f} GB/s, {ms / full:.3f} of 4096 rows "
          f"(ideal {rows / 4096:.3f})")
    res["one_gpu"].append(dict(rows=rows, ms=ms, gbps=gbps, of_full=ms / full))
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
