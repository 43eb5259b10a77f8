#!/usr/bin/env bash
# Did a change make hetero's operations cheaper? Alternates bench binaries
# (in .gpu/diag/) on one machine, $RUNS rounds each (3 unless set), timing only the
# per-operation costs (pull, threads and growth cut to a minimum) on CUDA
# and OpenCL (or the backends in $BACKENDS), and prints each run's ratios
# (cost-ab.py).
#
#   cp <old bench> .gpu/diag/bench-old; cp <new bench> .gpu/diag/bench-new
#   OUT=... bash experiments/gpu/cost-ab.sh bench-old bench-new
#   BACKENDS=cuda,hip OUT=... bash experiments/gpu/cost-ab.sh bench-old bench-new
#   RUNS=6 BACKENDS=opencl OUT=... bash experiments/gpu/cost-ab.sh bench-new
#
# With one binary it measures how far one build's ratios move between
# processes: cost-ab.py prints each run, then the median over the runs.
set -u
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
backends=${BACKENDS:-cuda,opencl}
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh >/dev/null 2>&1
for round in $(seq 1 "${RUNS:-3}"); do
  for b in "$@"; do
    echo "== $b round $round"
    timeout 120 ".gpu/diag/$b" --backend "$backends" --rounds 9 --pull-repeats 1 --pull-size small \
      --thread-batches 0 --growth-groups 2 --json "$out/$b-$round.json" >"$out/$b-$round.log" 2>&1
    echo "exit $?"
  done
done
python3 experiments/gpu/cost-ab.py "$out"/*.json
