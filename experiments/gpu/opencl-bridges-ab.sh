#!/usr/bin/env bash
# Runs on a machine with two GPUs, from the repository root, after
# ci/gpu/prepare.sh with a conform built from a tree with
# experiments/gpu/bridge-stats.patch applied:
#
#   bash experiments/gpu/opencl-bridges-ab.sh [CAP...]   # default: 64 1024
#
# Is OpenCL's split wave on NVIDIA slow when its cross-context waits
# outnumber the bridge threads? The patched build prints, on stderr, each
# time the count of bridges that went by completion callback (the
# threads all busy) reaches a power of two, with the count by thread and
# the most threads live, and takes the cap on threads from
# HETERO_EXP_MAX_WAITERS (hetero's is 64). First opencl-wait-cost (what
# waiting costs the host, one GPU), then the split at large twice and at
# medium once per cap, the caps alternating; each run's wall, user and
# system time, its split line and its last bridge counts.
set -uo pipefail
log_name=opencl-bridges-ab
backends_for_env=opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
caps=("$@")
[ ${#caps[@]} -eq 0 ] && caps=(64 1024)
gcc -O2 experiments/gpu/opencl-wait-cost.c -o "$work/opencl-wait-cost" \
  "$work/root/usr/lib/x86_64-linux-gnu/libOpenCL.so.1" -lpthread
echo "== opencl-wait-cost 50 7"
"$work/opencl-wait-cost" 50 7
conform=.gpu/bin/conform
variants=graph,split-overlap
args=(--backend opencl --device all --workload wave --wave-variants "$variants")
TIMEFORMAT="wall %R s, user %U s, system %S s"
for size in large medium large; do
  for cap in "${caps[@]}"; do
    name=wave-opencl-$size-cap$cap
    [ -e "$out/$name.log" ] && name=$name-run2
    echo "== HETERO_EXP_MAX_WAITERS=$cap conform ${args[*]} --size $size"
    { time HETERO_EXP_MAX_WAITERS=$cap timeout 200 "$conform" "${args[@]}" --size "$size" \
      --json "$out/$name.json" >"$out/$name.log" 2>&1; } 2>&1
    grep -E "^split:" "$out/$name.log"
    grep -E "^exp-bridge" "$out/$name.log" | tail -n 1
    grep -E "^(PASS|FAIL)" "$out/$name.log"
  done
done
