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
# backends required, `conform` for the workloads at each size (each
# backend in its own run, $OUT/graphs-<backend>-<size>.json and .md) and, with `bench`,
# the bench's graph rows ($OUT/bench-graphs.json). SKIP_TESTS=1 skips the
# tests; COMBINED=1 also runs every backend in one `conform` process under
# cuda-gdb. Everything printed goes to $OUT/graphs.log too.
set -uo pipefail
backends=${1:-cuda,hip,opencl}
sizes=${2:-small,medium}
workloads=${3:-pull,wave,bandwidth}
bench=${4:-}
log_name=graphs
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
status=0
echo "== OpenCL command buffers"
python3 ci/gpu/cl_command_buffers.py
if [ -z "${SKIP_TESTS:-}" ]; then
  echo "== graph API tests (required: host,$backends)"
  HETERO_REQUIRE="host,$backends" timeout 300 .gpu/bin/test-api --test-threads=1 graph || status=1
fi
for size in ${sizes//,/ }; do
  for backend in ${backends//,/ }; do
    # One process per backend, as run.sh does.
    echo "== conform --backend $backend --workload $workloads --size $size"
    timeout 400 .gpu/bin/conform --backend "$backend" --workload "$workloads" --size "$size" \
      --json "$out/graphs-$backend-$size.json" --markdown "$out/graphs-$backend-$size.md"
    code=$?
    echo "== conform exit $code"
    [ $code -eq 0 ] || status=1
  done
done
if [ "$bench" = bench ]; then
  echo "== bench graph rows"
  timeout 300 .gpu/bin/bench --backend "$backends" --rounds 5 --enqueues 500 --thread-batches 0 --peer-bytes 4096 \
    --pull-repeats 1 --growth-groups 2 --graph-rounds 9 --json "$out/bench-graphs.json" || status=1
fi
if [ -n "${COMBINED:-}" ] && command -v cuda-gdb >/dev/null; then
  # Every backend in one process, under the debugger: where it stops, if it does.
  echo "== conform --backend $backends in one process, under cuda-gdb"
  timeout 300 cuda-gdb -q -batch -ex run -ex bt --args .gpu/bin/conform --backend "$backends" --workload pull \
    --size small 2>&1 | tail -40
fi
echo "== status $status"
exit $status
