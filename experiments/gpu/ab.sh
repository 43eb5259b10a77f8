#!/usr/bin/env bash
# Alternates two bench binaries on one machine, two rounds each, printing
# the CUDA and OpenCL rows: a before/after comparison within one call.
#
#   cp <old bench> .gpu/diag/bench-old; cp <new bench> .gpu/diag/bench-ab
#   bash experiments/gpu/ab.sh bench-old bench-ab
set -u
backends_for_env=cuda,opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh >/dev/null 2>&1
for round in 1 2; do
  for b in "$@"; do
    echo "== $b round $round"
    timeout 120 ".gpu/diag/$b" --backend cuda,opencl --rounds 9 --pull-repeats 1 --growth-groups 2 --pull-size small 2>&1 \
      | grep -E '^(cuda|opencl) |H2D|D2H|launch \(|cross|alloc|round trip'
  done
done
