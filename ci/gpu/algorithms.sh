#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it: the figures of
# hetero::algorithms against the device's copy bandwidth and torch.
#
#   bash ci/gpu/algorithms.sh cuda,hip,opencl
#
# 1. The algorithm API tests and the dialect's collectives (every word,
#    type and operator) with every backend required.
# 2. torch's sum, amax, cumsum and segment_reduce, CuPy's cumsum and
#    segmented sums (segments of 1, 64, 4096), per dtype at 2^28
#    ($OUT/algorithms-torch.json), and the vendor baselines of the suite
#    ($OUT/baseline.json, ci/gpu/baseline.py).
# 3. The bench's algorithm rows at 2^28 elements on every backend
#    ($OUT/bench-algorithms.json).
# 4. conform reduce and scan at large, each backend in its own process,
#    against the baselines ($OUT/algorithms-<backend>.json and .md).
# Everything printed goes to $OUT/algorithms.log too.
set -uo pipefail
backends=${1:-cuda,hip,opencl}
log_name=algorithms
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
status=0
echo "== algorithm API tests (required: host,$backends)"
HETERO_REQUIRE="host,$backends" timeout 300 .gpu/bin/test-api --test-threads=1 algorithms || status=1
echo "== collectives tests (required: host,$backends)"
HETERO_REQUIRE="host,$backends" timeout 300 .gpu/bin/test-collectives --test-threads=4 || status=1
echo "== torch"
timeout 300 python3 ci/gpu/algorithms_torch.py --elements 268435456 --json "$out/algorithms-torch.json" || status=1
timeout 300 python3 ci/gpu/baseline.py --size large --json "$out/baseline.json" || status=1
echo "== bench algorithm rows"
timeout 400 .gpu/bin/bench --backend "$backends" --rounds 9 --enqueues 200 --thread-batches 0 --peer-bytes 4096 \
  --pull-repeats 1 --growth-groups 2 --graph-rounds 0 --algorithms-elements 268435456 --scan-items 8,12,16,20,24,32 \
  --json "$out/bench-algorithms.json" || status=1
for backend in ${backends//,/ }; do
  echo "== conform --backend $backend --workload reduce,scan --size large"
  timeout 300 .gpu/bin/conform --backend "$backend" --workload reduce,scan --size large \
    --baseline "$out/baseline.json" --json "$out/algorithms-$backend.json" --markdown "$out/algorithms-$backend.md"
  code=$?
  echo "== conform exit $code"
  [ $code -eq 0 ] || status=1
done
echo "== status $status"
exit $status
