"""The device time of pull's copies alone, without hetero and without the
host: every batch's copies (the 7 host-to-device copies of its inputs from
pinned memory and the copy of its pull vectors back) captured into one
CUDA graph over N streams, as pull's lanes issue them, and replayed.

    conform --backend cuda --size large --workload pull --dump DIR
    python3 experiments/gpu/pull-copies.py DIR [--lanes 1,4]

DIR holds pull's inputs as .npy files (`--dump`); batches are 64
consecutive events, as in the workload. Prints the median of 5 replays per
lane count, in device milliseconds (CUDA events), for the copies in and
out together and for each direction alone.
"""

import argparse
import glob
import os
import statistics

import numpy as np
import torch

BATCH = 64


def find(root, name):
    paths = sorted(glob.glob(os.path.join(root, "**", f"*{name}*.npy"), recursive=True))
    pull = [p for p in paths if "pull" in p]
    if not (pull or paths):
        raise SystemExit(f"no {name} .npy under {root}")
    return (pull or paths)[0]


def batches(root):
    events = np.load(find(root, "events")).astype(np.int64)
    counts = np.load(find(root, "counts")).astype(np.int64)
    ends = np.concatenate([[0], np.cumsum(counts)])
    out = []
    for start in range(0, len(events), BATCH):
        chunk = events[start : start + BATCH]
        first_jet = int(chunk[0][0])
        jets = int(chunk[:, 1].sum())
        consts = int(ends[first_jet + jets] - ends[first_jet])
        out.append((first_jet, jets, int(ends[first_jet]), consts))
    return out


def measure(plan, lanes, directions):
    total_jets = max(b[0] + b[1] for b in plan)
    total_consts = max(b[2] + b[3] for b in plan)
    max_jets = max(b[1] for b in plan)
    max_consts = max(b[3] for b in plan)
    pin = dict(dtype=torch.float32, pin_memory=True)
    host_counts = torch.zeros(total_jets, dtype=torch.int32, pin_memory=True)
    host_jet = [torch.zeros(total_jets, **pin) for _ in range(3)]
    host_const = [torch.zeros(total_consts, **pin) for _ in range(3)]
    host_out = [torch.zeros(2 * total_jets, **pin) for _ in range(lanes)]
    dev = []
    for _ in range(lanes):
        dev.append(
            dict(
                counts=torch.zeros(max_jets, dtype=torch.int32, device="cuda"),
                jet=[torch.zeros(max_jets, device="cuda") for _ in range(3)],
                const=[torch.zeros(max_consts, device="cuda") for _ in range(3)],
                pull=torch.zeros(2 * max_jets, device="cuda"),
            )
        )
    streams = [torch.cuda.Stream() for _ in range(lanes)]
    graph = torch.cuda.CUDAGraph()
    capture = torch.cuda.Stream()
    with torch.cuda.stream(capture):
        graph.capture_begin()
        for s in streams:
            s.wait_stream(capture)
        for i, (fj, nj, fc, nc) in enumerate(plan):
            d, s = dev[i % lanes], streams[i % lanes]
            with torch.cuda.stream(s):
                if "in" in directions:
                    d["counts"][:nj].copy_(host_counts[fj : fj + nj], non_blocking=True)
                    for src, dst in zip(host_jet, d["jet"]):
                        dst[:nj].copy_(src[fj : fj + nj], non_blocking=True)
                    for src, dst in zip(host_const, d["const"]):
                        dst[:nc].copy_(src[fc : fc + nc], non_blocking=True)
                if "out" in directions:
                    host_out[i % lanes][2 * fj : 2 * (fj + nj)].copy_(d["pull"][: 2 * nj], non_blocking=True)
        for s in streams:
            capture.wait_stream(s)
        graph.capture_end()
    times = []
    for _ in range(6):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times[1:])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dump")
    parser.add_argument("--lanes", default="1,4")
    args = parser.parse_args()
    plan = batches(args.dump)
    jets = sum(b[1] for b in plan)
    consts = sum(b[3] for b in plan)
    bytes_in = 4 * (4 * jets + 3 * consts)
    bytes_out = 4 * 2 * jets
    print(f"{len(plan)} batches, {jets} jets, {consts} constituents")
    print(f"{8 * len(plan)} copies: {bytes_in / 1e6:.1f} MB in, {bytes_out / 1e6:.1f} MB out")
    for lanes in [int(x) for x in args.lanes.split(",")]:
        for name, directions in [("in + out", ("in", "out")), ("in", ("in",)), ("out", ("out",))]:
            ms = measure(plan, lanes, directions)
            print(f"lanes {lanes}, copies {name}: {ms:.3f} device ms (median of 5 graph replays)")


if __name__ == "__main__":
    main()
