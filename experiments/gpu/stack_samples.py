"""Summarises stack-sampler.c's output against an unstripped build.

    python3 stack_samples.py SAMPLES BINARY [--within REGEX] [--without REGEX] [--top N]

SAMPLES is a file stack-sampler.so wrote; BINARY the unstripped build of
the executable sampled (the same build: stripping keeps addresses). Frames
of BINARY are named by its symbol table (`nm -C`); frames of other objects
keep their object's name. With --within, only samples with a frame whose
name matches REGEX count (e.g. the split's enqueueing loop); with
--without, samples with a frame whose name matches it do not (e.g. the
split's trials, leaving its timed run).

Printed: the samples counted, then per function the share of them in which
it appears (inclusive), then the innermost frame of each sample given as
the deepest frame of BINARY and the object it called into (self time, by
where the executable handed over).
"""

import argparse
import bisect
import collections
import os
import re
import subprocess


def symbols(binary):
    out = subprocess.run(["nm", "-C", "--defined-only", "-n", binary], capture_output=True, text=True, check=True)
    table = []
    for line in out.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            table.append((int(parts[0], 16), re.sub(r"::h[0-9a-f]{16}$", "", parts[2])))
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("samples")
    ap.add_argument("binary")
    ap.add_argument("--within")
    ap.add_argument("--without")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    table = symbols(args.binary)
    addrs = [a for a, _ in table]
    exe = os.path.basename(args.binary)

    def name(frame):
        obj, _, off = frame.rpartition("+")
        # The sampled executable may be a stripped copy of BINARY whose name
        # BINARY's begins with (conform for conform-unstripped).
        if not exe.startswith(obj):
            return obj
        at = bisect.bisect_right(addrs, int(off, 16) - 1) - 1
        return table[at][1] if at >= 0 else frame

    within = re.compile(args.within) if args.within else None
    without = re.compile(args.without) if args.without else None
    total, inclusive, leaves = 0, collections.Counter(), collections.Counter()
    with open(args.samples) as f:
        header = f.readline().strip()
        for line in f:
            count, *frames = line.split()
            count = int(count)
            named = [(name(fr), fr.rpartition("+")[0]) for fr in frames]
            if within and not any(within.search(n) for n, _ in named):
                continue
            if without and any(without.search(n) for n, _ in named):
                continue
            total += count
            for n in {n for n, _ in named}:
                inclusive[n] += count
            own = next((i for i, (n, obj) in enumerate(named) if n != obj), None)
            leaf = named[own][0] if own is not None else "?"
            callee = named[own - 1][0] if own else "(itself)"
            leaves[f"{leaf}  ->  {callee}"] += count
    print(header)
    print(
        f"samples counted: {total}"
        + (f" (with a frame matching {args.within})" if within else "")
        + (f" (none matching {args.without})" if without else "")
    )
    print("\n== inclusive share, by function")
    for n, c in inclusive.most_common(args.top):
        print(f"{100 * c / max(total, 1):6.1f}%  {n}")
    print("\n== innermost frame of the executable, and what it called")
    for n, c in leaves.most_common(args.top):
        print(f"{100 * c / max(total, 1):6.1f}%  {n}")


if __name__ == "__main__":
    main()
