#!/usr/bin/env bash
# Runs on a GPU machine with one GPU (or more), from the repository root,
# after ci/gpu/prepare.sh prepared .gpu/ here and the device call carried it:
#
#   bash ci/gpu/peer-one-gpu.sh [BACKENDS]
#
# Small peer copies with the GPU paired with a second context object of
# itself, so a copy takes the peer path with both buffers tracked: the
# bench's peer copies against the raw call (`cuMemcpyPeerAsync`,
# `hipMemcpyPeerAsync`) twice in one call (peer-one-gpu.json/.log and
# peer-one-gpu-2.*), then the two-device API tests for every backend
# (two-devices-B.log) and the CUDA ones under compute-sanitizer memcheck
# (memcheck-two-devices-cuda.log). Everything goes to $OUT.
set -uo pipefail
backends=${1:-cuda,hip,opencl}
status=0
bench_backends=$(echo "$backends" | tr ',' '\n' | grep -E '^(cuda|hip)$' | paste -sd, -)
for run in peer-one-gpu peer-one-gpu-2; do
  bash ci/gpu/bench.sh "$bench_backends" "$run" --peer-only --peer-bytes 4096,1048576 --peer-rounds 50 || status=1
done
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
for backend in ${backends//,/ }; do
  echo "== $backend: two-device API tests, the GPU paired with itself"
  HETERO_REQUIRE=$backend timeout 120 .gpu/bin/test-api --test-threads=1 "$backend::two_devices" \
    >"$out/two-devices-$backend.log" 2>&1 || status=1
  grep -E "^test result|FAILED|panicked" "$out/two-devices-$backend.log"
done
if [[ ",$backends," == *,cuda,* ]] && command -v compute-sanitizer >/dev/null; then
  echo "== cuda: the same under compute-sanitizer memcheck"
  HETERO_REQUIRE=cuda timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 \
    .gpu/bin/test-api --test-threads=1 cuda::two_devices >"$out/memcheck-two-devices-cuda.log" 2>&1 || status=1
  grep -E "^test result|ERROR SUMMARY|FAILED" "$out/memcheck-two-devices-cuda.log"
fi
exit $status
