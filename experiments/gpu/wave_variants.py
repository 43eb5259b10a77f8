# Wave designs timed with CuPy on the CUDA prelude plus the portable text:
#   python3 experiments/gpu/wave_variants.py kernels/src/prelude/cuda.h kernels/src/portable/common.kern \
#     kernels/src/portable/wave.kern experiments/gpu/wave_extra.kern $OUT/wave_variants2.json
"""Times wave_step designs on the GPU with CuPy (the CUDA prelude + portable text)."""
import sys, json
import cupy as cp

from wave_common import NX, NY, build as build_with, fields, median_ms

prelude = open(sys.argv[1]).read()
common = open(sys.argv[2]).read()
orig = open(sys.argv[3]).read()
extra = open(sys.argv[4]).read()

def build(src, name, defs=""):
    return build_with(prelude, common, src, name, defs)

nx, ny = NX, NY
u, up = fields()
out_ref = cp.zeros_like(u)

def time(f, reps=30):
    return median_ms(f, reps, warmup=5)

src = cp.empty_like(u); dst = cp.empty_like(u)
copy_ms = time(lambda: dst.data.copy_from_device(src.data, src.nbytes))
copy_gbps = 2 * 4 * nx * ny / copy_ms / 1e6
print(f"copy {copy_ms:.4f} ms {copy_gbps:.0f} GB/s")
res = {"copy_gbps": copy_gbps, "variants": []}
args = lambda out: (up, u, out, cp.uint32(nx), cp.uint32(ny), cp.float32(0.25), cp.uint32(nx // 2), cp.uint32(ny // 2), cp.float32(1.0))
k0 = build(orig, "wave_step")
k0((nx // 16, ny // 16), (16, 16), args(out_ref))
cases = []
for bx, by in [(16, 16), (64, 4), (128, 2)]:
    cases.append(("orig", k0, bx, by, 1))
for rows in [4, 8, 16]:
    for name in ["wave_rows", "wave_col"]:
        k = build(extra, name, f"#define WAVE_ROWS {rows}\n")
        for bx, by in [(32, 4), (64, 2), (128, 1), (256, 1), (32, 8), (64, 4)]:
            cases.append((f"{name}{rows}", k, bx, by, rows))
for label, k, bx, by, rows in cases:
    out = cp.zeros_like(u)
    grid = ((nx + bx - 1) // bx, (ny + by * rows - 1) // (by * rows))
    f = lambda: k(grid, (bx, by), args(out))
    ms = time(f)
    same = bool(cp.all(out.view(cp.uint32) == out_ref.view(cp.uint32)))
    gbps = 12 * nx * ny / ms / 1e6
    print(f"{label:24s} {bx:4d}x{by:<3d} {ms:.4f} ms {gbps:6.0f} GB/s {gbps/copy_gbps:.3f} of copy  bitwise_same={same}")
    res["variants"].append(dict(kernel=label, block=[bx, by], ms=ms, gbps=gbps, of_copy=gbps / copy_gbps, same=same))
json.dump(res, open(sys.argv[5], "w"), indent=1)
