"""hetero's Python package against PyTorch and CuPy on a CUDA GPU.

For each framework, on a 1 GiB array (2^28 int32):
  - zero copies: the pointer hetero imports is the framework's, and the
    tensor the framework takes back from hetero has the same pointer;
  - no device synchronisation: the framework's stream is held by a spin
    kernel (~0.3 s) followed by a fill; `hetero.from_dlpack` returns while
    that work is still queued, and hetero's reduce then sees the fill (it
    waited on the device, through the handshake's event);
  - host cost per exchange: the median wall time of `hetero.from_dlpack`
    (import) and of the framework's `from_dlpack` of a hetero array
    (export), each over many rounds; beside them the framework's own part
    of each, measured alone: its `__dlpack__` with hetero's stream (what
    an import calls), and its `from_dlpack` of one of its own arrays (the
    same protocol with the framework on both sides);
  - the device time of `hetero.scan(x, exclusive=True)` and
    `hetero.reduce(x, as_array=True)` on the framework's array, from
    events recorded on hetero's stream around ten calls in a row (so the
    host's cost per call overlaps the device's work, as in the bench),
    median of ten such groups after warm-up, for comparison with the same
    calls from Rust (`bench`, the same call of the machine).
Writes a JSON file and prints a summary.
"""

import argparse
import json
import statistics
import time
import warnings

import cupy
import torch

import hetero

N = 1 << 28
SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
"""


def median_us(samples):
    return statistics.median(samples) * 1e6


def exchange(name, make, spin, fill, still_queued, take_back, pointer, rounds):
    x = make()
    spin()
    fill(x)  # the producer's work, queued behind the spin
    t0 = time.perf_counter()
    a = hetero.from_dlpack(x)
    import_s = time.perf_counter() - t0
    queued = still_queued()
    total = hetero.reduce(a)
    back = take_back(a)
    result = {
        "framework": name,
        "elements": N,
        "bytes": N * 4,
        "import_returned_while_producer_queued": queued,
        "first_import_us": import_s * 1e6,
        "hetero_read_after_producer": int(total) == N,
        "reduce_result": int(total),
        "same_pointer_both_ways": pointer(back) == pointer(x),
    }
    del back, a
    imports, exports = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        a = hetero.from_dlpack(x)
        t1 = time.perf_counter()
        y = take_back(a)
        t2 = time.perf_counter()
        imports.append(t1 - t0)
        exports.append(t2 - t1)
        del a, y
    result["import_us_median"] = median_us(imports)
    result["export_us_median"] = median_us(exports)
    # The framework's own part of each.
    hetero_stream = hetero.device("cuda", 0).stream
    produce, own = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        capsule = x.__dlpack__(stream=hetero_stream, max_version=(1, 1))
        t1 = time.perf_counter()
        del capsule
        t2 = time.perf_counter()
        y = take_back(x)
        t3 = time.perf_counter()
        produce.append(t1 - t0)
        own.append(t3 - t2)
        del y
    result["framework_dlpack_us_median"] = median_us(produce)
    result["framework_own_round_trip_us_median"] = median_us(own)
    result["hetero_import_share_us"] = result["import_us_median"] - result["framework_dlpack_us_median"]
    result["hetero_export_share_us"] = result["export_us_median"] - result["framework_own_round_trip_us_median"]
    # Device time of the algorithms on the framework's array.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        stream = cupy.cuda.ExternalStream(hetero_stream)
    for label, call in [
        ("scan_exclusive_ms", lambda: hetero.scan(x, exclusive=True)),
        ("reduce_sum_ms", lambda: hetero.reduce(x, as_array=True)),
    ]:
        times = []
        for k in range(12):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(stream)
            outs = [call() for _ in range(10)]
            end.record(stream)
            end.synchronize()
            if k >= 2:
                times.append(cupy.cuda.get_elapsed_time(start, end) / 10)
            del outs
        result[label] = statistics.median(times)
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True)
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    cycles = int(torch.cuda.get_device_properties(0).clock_rate * 1e3 * 0.3) if hasattr(
        torch.cuda.get_device_properties(0), "clock_rate") else 600_000_000
    spin_kernel = cupy.RawKernel(SPIN, "spin")
    results = []

    def torch_make():
        x = torch.zeros(N, dtype=torch.int32, device="cuda")
        torch.cuda.synchronize()
        return x

    results.append(exchange(
        "torch",
        torch_make,
        lambda: torch.cuda._sleep(cycles),
        lambda x: x.fill_(1),
        lambda: not torch.cuda.current_stream().query(),
        torch.from_dlpack,
        lambda t: t.data_ptr(),
        args.rounds,
    ))
    torch.cuda.synchronize()

    def cupy_make():
        x = cupy.zeros(N, dtype=cupy.int32)
        cupy.cuda.Device().synchronize()
        return x

    results.append(exchange(
        "cupy",
        cupy_make,
        lambda: spin_kernel((1,), (1,), (cupy.int64(cycles),)),
        lambda x: x.fill(1),
        lambda: not cupy.cuda.get_current_stream().done,
        cupy.from_dlpack,
        lambda a: a.data.ptr,
        args.rounds,
    ))
    cupy.cuda.Device().synchronize()
    with open(args.json, "w") as f:
        json.dump({"results": results, "torch": torch.__version__, "cupy": cupy.__version__}, f, indent=2)
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
