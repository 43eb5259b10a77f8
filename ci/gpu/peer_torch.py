"""torch's peer copies on the GPU node, in the shape of hetero's bench
(`bench --peer-only`): for every ordered pair of CUDA devices (on one
device, that device to itself), each size, one direction and both at
once, the median host time from enqueueing the copy (both copies) to
their completion, after one untimed round.

    python3 ci/gpu/peer_torch.py --json $OUT/peer-torch.json

Each copy is `dst.copy_(src, non_blocking=True)` on the destination's
current stream; both directions at once put the second copy on the other
device's stream. Which devices reach each other directly is
`torch.cuda.can_device_access_peer`, recorded in the file.
"""

import argparse
import json
import statistics
import time

import torch


def median_us(rounds, round_fn):
    round_fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        round_fn()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True)
    parser.add_argument("--bytes", default="4096,1073741824")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    sizes = [int(b) for b in args.bytes.split(",")]
    count = torch.cuda.device_count()
    pairs = [(a, b) for a in range(count) for b in range(count) if a != b] or [(0, 0)]
    access = {f"{a}->{b}": torch.cuda.can_device_access_peer(a, b) for a in range(count) for b in range(count) if a != b}
    results = {"devices": [torch.cuda.get_device_name(i) for i in range(count)], "torch": torch.__version__,
               "can_access_peer": access, "rounds": args.rounds, "entries": []}
    print("pair    bytes        both   torch us      GB/s")
    for a, b in pairs:
        da, db = torch.device("cuda", a), torch.device("cuda", b)
        sa, sb = torch.cuda.Stream(da), torch.cuda.Stream(db)
        for size in sizes:
            words = size // 4
            src_a, dst_b = torch.zeros(words, dtype=torch.int32, device=da), torch.empty(words, dtype=torch.int32, device=db)
            src_b, dst_a = torch.zeros(words, dtype=torch.int32, device=db), torch.empty(words, dtype=torch.int32, device=da)
            for both in (False, True):
                def round_fn():
                    with torch.cuda.stream(sb):
                        dst_b.copy_(src_a, non_blocking=True)
                    if both:
                        with torch.cuda.stream(sa):
                            dst_a.copy_(src_b, non_blocking=True)
                        sa.synchronize()
                    sb.synchronize()

                us = median_us(args.rounds, round_fn)
                moved = size * (2 if both else 1)
                gbps = moved / (us * 1e3)
                results["entries"].append({"from": a, "to": b, "bytes": size, "both": both, "median_us": us, "gbps": gbps})
                print(f"{a}->{b}  {size:>11}  {'yes' if both else 'no':>5} {us:10.1f} {gbps:9.2f}")
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
