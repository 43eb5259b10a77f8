# Wave designs timed with CuPy on the CUDA prelude plus the portable text, against
# the suite's device copy (1 GiB, 2^27 floats each way) and one field's (67 MB):
#   python3 experiments/gpu/wave_tiles.py kernels/src/prelude/cuda.h kernels/src/portable/common.kern \
#     kernels/src/portable/wave.kern experiments/gpu/wave_tile.kern $OUT/wave_tiles.json
"""Times wave.kern's wave_step, the same with restrict-qualified pointers, and a shared-memory tile."""
import sys, json
import cupy as cp

from wave_common import NX, NY, build as build_with, fields, median_ms

prelude = open(sys.argv[1]).read()
common = open(sys.argv[2]).read()
orig = open(sys.argv[3]).read()
tile = open(sys.argv[4]).read()
# wave_cell and WAVE_ROWS come from wave.kern; its wave_step is renamed away.
cell = orig.replace("KERNEL void wave_step(", "KERNEL void wave_step_unused(").replace("#define WAVE_ROWS 4", "")
restrict = (orig.replace("GLOBAL const float* u_prev", "GLOBAL const float* __restrict__ u_prev")
            .replace("GLOBAL const float* u,", "GLOBAL const float* __restrict__ u,")
            .replace("GLOBAL float* u_next", "GLOBAL float* __restrict__ u_next"))
assert restrict != orig

def build(src, name, defs=""):
    return build_with(prelude, common, src, name, defs)

nx, ny = NX, NY
u, up = fields()

def time(f, reps=50):
    return median_ms(f, reps, warmup=10)

def copy_gbps(n):
    src = cp.ones(n, dtype=cp.float32); dst = cp.empty_like(src)
    ms = time(lambda: dst.data.copy_from_device(src.data, src.nbytes))
    return 2 * 4 * n / ms / 1e6

big, field = copy_gbps(1 << 27), copy_gbps(nx * ny)
print(f"copy 2^27 floats {big:.0f} GB/s; copy one field {field:.0f} GB/s")
res = {"copy_1gib_gbps": big, "copy_field_gbps": field, "variants": []}
args = lambda out: (up, u, out, cp.uint32(nx), cp.uint32(ny), cp.float32(0.25), cp.uint32(nx // 2), cp.uint32(ny // 2), cp.float32(1.0))
ref = cp.zeros_like(u)
k0 = build(orig, "wave_step")
k0(((nx + 255) // 256, (ny + 3) // 4), (256, 1), args(ref))
cases = [("wave_step", k0, 256, 4, 0), ("wave_step", k0, 128, 4, 0), ("wave_step", k0, 512, 4, 0)]
kr = build(restrict, "wave_step")
cases += [("restrict", kr, bx, 4, 0) for bx in (128, 256, 512)]
for rows in (4, 8):
    kt = build(cell + "\n" + tile, "wave_tile", f"#define WAVE_ROWS {rows}\n")
    cases += [(f"tile{rows}", kt, bx, rows, (bx + 4) * (rows + 4) * 4) for bx in (64, 128, 256)]
for label, k, bx, rows, shared in cases:
    out = cp.zeros_like(u)
    grid = ((nx + bx - 1) // bx, (ny + rows - 1) // rows)
    f = lambda: k(grid, (bx, 1), args(out), shared_mem=shared)
    ms = time(f)
    same = bool(cp.all(out.view(cp.uint32) == ref.view(cp.uint32)))
    gbps = 12 * nx * ny / ms / 1e6
    print(f"{label:10s} {bx:4d}x1 rows {rows}: {ms:.4f} ms {gbps:6.0f} GB/s, {gbps / big:.3f} of the 1 GiB copy, "
          f"{gbps / field:.3f} of the field copy, bitwise_same={same}")
    res["variants"].append(dict(kernel=label, block=[bx, 1], rows=rows, ms=ms, gbps=gbps, of_copy_1gib=gbps / big,
                                of_copy_field=gbps / field, same=same))
json.dump(res, open(sys.argv[5], "w"), indent=1)
