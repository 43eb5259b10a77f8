#!/usr/bin/env bash
# Small peer copies through two bench binaries, alternated on one machine
# (three rounds each, 1000 copies a figure), the GPU paired with itself:
# a before/after comparison of the tracked peer copy within one call,
# each figure beside the raw call's in the same process.
#
#   cp <old bench> .gpu/diag/bench-old; cp <new bench> .gpu/diag/bench-new
#   bash experiments/gpu/peer-ab.sh bench-old bench-new
set -u
backends_for_env=cuda,hip
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh >/dev/null 2>&1
for round in 1 2 3; do
  for b in "$@"; do
    echo "== $b round $round"
    timeout 100 ".gpu/diag/$b" --backend cuda,hip --peer-only --peer-bytes 4096,65536 --peer-rounds 1000 2>&1 \
      | grep -E "^(cuda|hip) +0->0|rror"
  done
done
