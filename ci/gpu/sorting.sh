#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it: hetero's sort,
# histogram, select and one-to-many association against the vendor
# libraries, in one call.
#
#   bash ci/gpu/sorting.sh cuda,hip,opencl
#
# 1. The sorting tests (every key type, direction, bit range, edge shape;
#    histogram, select, unique, association) with every backend required.
# 2. CuPy's and torch's sorts, histograms and compactions at 2^28
#    ($OUT/sorting-torch.json) and the vendor baselines of the suite's sort
#    workload ($OUT/baseline.json, ci/gpu/baseline.py).
# 3. The bench's algorithm rows at 2^28 elements on every backend, with
#    the sort at 8 to 20 keys a thread ($OUT/bench-sorting.json; the sort
#    rows are in `algorithms`).
# 4. conform sort at large, each backend in its own process, against the
#    baselines ($OUT/sorting-<backend>.json and .md).
# Everything printed goes to $OUT/sorting.log too.
set -uo pipefail
backends=${1:-cuda,hip,opencl}
log_name=sorting
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
status=0
echo "== sorting tests (required: host,$backends)"
HETERO_REQUIRE="host,$backends" timeout 400 .gpu/bin/test-sorting --test-threads=4 || status=1
echo "== vendor libraries"
timeout 300 python3 ci/gpu/algorithms_torch.py --sorting-only --elements 268435456 --json "$out/sorting-torch.json" || status=1
timeout 300 python3 ci/gpu/baseline.py --size large --json "$out/baseline.json" || status=1
echo "== bench algorithm rows"
timeout 330 .gpu/bin/bench --backend "$backends" --rounds 5 --enqueues 200 --thread-batches 0 --peer-bytes 4096 \
  --pull-repeats 1 --growth-groups 2 --graph-rounds 0 --algorithms-elements 268435456 --sort-items 8,12,16,20 \
  --json "$out/bench-sorting.json" || status=1
for backend in ${backends//,/ }; do
  echo "== conform --backend $backend --workload sort --size large"
  timeout 300 .gpu/bin/conform --backend "$backend" --workload sort --size large \
    --baseline "$out/baseline.json" --json "$out/sorting-$backend.json" --markdown "$out/sorting-$backend.md"
  code=$?
  echo "== conform exit $code"
  [ $code -eq 0 ] || status=1
done
echo "== status $status"
exit $status
