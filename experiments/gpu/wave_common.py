"""What the wave experiments share: kernel builds, inputs and CUDA-event timing."""
import statistics

import cupy as cp

NX = NY = 4096


def build(prelude, common, src, name, defs=""):
    """A kernel of the CUDA prelude plus portable text, as hetero assembles it."""
    return cp.RawKernel(defs + prelude + "\n" + common + "\n" + src, name, options=("-std=c++17",))


def fields():
    """u and u_prev at NX x NY, from a fixed seed."""
    rng = cp.random.default_rng(1)
    u = rng.standard_normal(NX * NY, dtype=cp.float32)
    up = rng.standard_normal(NX * NY, dtype=cp.float32)
    return u, up


def median_ms(f, reps, warmup):
    """Median milliseconds of f() between two CUDA events, after `warmup` untimed calls."""
    for _ in range(warmup):
        f()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(); f(); b.record(); b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b))
    return statistics.median(ts)
