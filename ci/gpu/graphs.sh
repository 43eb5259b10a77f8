#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it: the figures of
# graphs and pull's packed staging.
#
#   bash ci/gpu/graphs.sh cuda,hip,opencl small,medium pull,wave,bandwidth
#   bash ci/gpu/graphs.sh cuda,hip,opencl large pull,bandwidth bench
#
# Prints which path OpenCL graphs take on each device
# (ci/gpu/cl_command_buffers.py), runs the graph API tests with the
# backends required, `conform` for the workloads at each size (every
# backend in one run, $OUT/graphs-<size>.json and .md) and, with `bench`,
# the bench's graph rows ($OUT/bench-graphs.json). Everything printed goes
# to $OUT/graphs.log too.
set -uo pipefail
backends=${1:-cuda,hip,opencl}
sizes=${2:-small,medium}
workloads=${3:-pull,wave,bandwidth}
bench=${4:-}
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
exec > >(tee -a "$out/graphs.log") 2>&1
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
status=0
echo "== OpenCL command buffers"
python3 ci/gpu/cl_command_buffers.py
echo "== graph API tests (required: host,$backends)"
HETERO_REQUIRE="host,$backends" timeout 300 .gpu/bin/test-api --test-threads=1 graph || status=1
for size in ${sizes//,/ }; do
  echo "== conform --backend $backends --workload $workloads --size $size"
  timeout 540 .gpu/bin/conform --backend "$backends" --workload "$workloads" --size "$size" \
    --json "$out/graphs-$size.json" --markdown "$out/graphs-$size.md" || status=1
done
if [ "$bench" = bench ]; then
  echo "== bench graph rows"
  timeout 300 .gpu/bin/bench --backend "$backends" --rounds 5 --enqueues 500 --thread-batches 0 --peer-bytes 4096 \
    --pull-repeats 1 --growth-groups 2 --graph-rounds 9 --json "$out/bench-graphs.json" || status=1
fi
echo "== status $status"
exit $status
