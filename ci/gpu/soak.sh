#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it: the stress test as a
# soak, every backend at once on the one GPU (a process each, all sharing
# it), each reporting resident memory, allocator bytes and live handles
# before and after (see conformance/src/bin/stress.rs).
#
#   bash ci/gpu/soak.sh cuda,hip,opencl 540
#
# $OUT/soak-<backend>.log per backend; everything printed goes to
# $OUT/soak.log too.
set -uo pipefail
backends=${1:-cuda,hip,opencl}
seconds=${2:-540}
log_name=soak
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
pids=()
for backend in ${backends//,/ }; do
  .gpu/bin/stress --backend "$backend" --seconds "$seconds" --max-rss-growth-mib 64 > "$out/soak-$backend.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
for backend in ${backends//,/ }; do
  echo "== $backend"
  cat "$out/soak-$backend.log"
done
echo "== status $status"
exit $status
