#!/usr/bin/env bash
# Does per-batch cost grow with the batches already done, and is it the
# code or the machine? Alternates bench binaries (in .gpu/diag/) on one
# machine, two rounds each, timing 20 groups of 1000 pull-shaped batches
# on CUDA and OpenCL (the bench's growth measurement), and prints each
# group's cost.
#
#   cp <old bench> .gpu/diag/bench-old; cp <new bench> .gpu/diag/bench-new
#   OUT=... bash experiments/gpu/growth-ab.sh bench-old bench-new
set -u
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
backends_for_env=cuda,opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh >/dev/null 2>&1
for round in 1 2; do
  for b in "$@"; do
    echo "== $b round $round"
    timeout 150 ".gpu/diag/$b" --backend cuda,opencl --rounds 1 --warmup 0 --enqueues 250 --pull-repeats 1 \
      --pull-size small --thread-batches 0 --growth-groups 20 --json "$out/$b-$round.json" 2>&1 | grep -E '^growth'
    python3 -c 'import json, sys
for d in json.load(open(sys.argv[1]))["devices"]:
    print(d["backend"], " ".join(f"{v:.1f}" for v in d["growth"]["groups_us"]))' "$out/$b-$round.json"
  done
done
