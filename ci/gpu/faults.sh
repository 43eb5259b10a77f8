#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it: the API test of gate
# reuse on every backend, then the stress test under injected driver
# failures (`stress --inject-faults`), every backend at once on the one GPU
# (a process each), each accounting for every fault it injected.
#
#   bash ci/gpu/faults.sh cuda,hip,opencl 120 0.02
#
# $OUT/faults-<backend>.log per backend; everything printed goes to
# $OUT/faults.log too.
set -uo pipefail
backends=${1:-cuda,hip,opencl}
seconds=${2:-120}
rate=${3:-0.02}
log_name=faults
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
status=0
echo "== api: gate reuse"
HETERO_REQUIRE=$backends .gpu/bin/test-api gate_reuse || status=1
pids=()
for backend in ${backends//,/ }; do
  .gpu/bin/stress --backend "$backend" --seconds "$seconds" --inject-faults "$rate" > "$out/faults-$backend.log" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
for backend in ${backends//,/ }; do
  echo "== $backend"
  cat "$out/faults-$backend.log"
done
echo "== status $status"
exit $status
