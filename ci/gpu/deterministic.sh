#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it: the deterministic
# mode's evidence (docs/results/deterministic-h100).
#
#   bash ci/gpu/deterministic.sh check    # bits: tests, digests at small and medium
#   bash ci/gpu/deterministic.sh strict   # floating point as written: tests/strict_float.rs
#   bash ci/gpu/deterministic.sh cost [WORKLOADS]   # the mode's cost at large, beside the default
#
# check:
# 1. The deterministic algorithm test (fixed-order sums, scans and
#    segmented sums against the CPU's bits at block sizes 256, 64 and 1)
#    with host, CUDA, HIP and OpenCL required.
# 2. conform --deterministic at small and medium, host (this machine's
#    cores), CUDA, HIP and OpenCL in one process each size (every output
#    compared bit for bit with the host's), then `report digests` over
#    those reports and the committed host reports made on a 2-core machine
#    (docs/results/deterministic-h100/host-2cores-*.json).
# strict:
#    tests/strict_float.rs (a * b + c unfused, fma fused, division and
#    square root correctly rounded, denormals kept, as Rust computes them)
#    with host, CUDA, HIP and OpenCL required.
# cost:
# 3. conform at large over WORKLOADS (default reduce,scan,pull,wave; pull
#    with 1 and 4 streams and 4 graph lanes), per backend in its own
#    process, in the default mode and then in the deterministic one
#    ($OUT/cost-WORKLOADS/<backend>-default.json and -deterministic.json),
#    `report digests` over the three deterministic reports, and the ratios
#    (ci/gpu/deterministic_cost.py; a device call lasts at most 10 minutes,
#    so the four workloads may be split over two calls).
# Everything printed goes to $OUT/deterministic-<stage>.log too.
set -uo pipefail
stage=${1:-check}
seed=424242
backends=cuda,hip,opencl
log_name=deterministic-$stage
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
status=0
workloads=reduce,scan,pull,wave
case $stage in
  check)
    echo "== deterministic algorithm test (required: host,$backends)"
    HETERO_REQUIRE="host,$backends" timeout 300 .gpu/bin/test-api --test-threads=1 algorithms_deterministic || status=1
    for size in small medium; do
      echo "== conform --deterministic --size $size on host,$backends ($(date -u +%T))"
      timeout 400 .gpu/bin/conform --deterministic --seed $seed --size $size --workload $workloads \
        --backend "host,$backends" --json "$out/deterministic-$size.json"
      code=$?
      echo "== conform exit $code"
      [ $code -eq 0 ] || status=1
      echo "== report digests, $size: this machine's runs and a 2-core host's"
      .gpu/bin/report digests "$out/deterministic-$size.json" docs/results/deterministic-h100/host-2cores-$size.json \
        || status=1
    done
    ;;
  strict)
    echo "== floating point as written (required: host,$backends)"
    HETERO_REQUIRE="host,$backends" timeout 200 .gpu/bin/test-strict_float || status=1
    ;;
  cost)
    workloads=${2:-$workloads}
    dir="$out/cost-${workloads//,/+}"
    mkdir -p "$dir"
    for backend in ${backends//,/ }; do
      for mode in default deterministic; do
        flag=
        [ $mode = deterministic ] && flag=--deterministic
        echo "== conform $flag --backend $backend --size large ($(date -u +%T))"
        # shellcheck disable=SC2086
        timeout 150 .gpu/bin/conform $flag --seed $seed --size large --workload $workloads --backend "$backend" \
          --pull-streams 1,4 --pull-threads 0 --pull-framework 0 --pull-graphs 4 \
          --json "$dir/$backend-$mode.json"
        code=$?
        echo "== conform exit $code"
        [ $code -eq 0 ] || status=1
      done
    done
    echo "== report digests, large"
    .gpu/bin/report digests "$dir"/*-deterministic.json || status=1
    echo "== cost: default over deterministic device time"
    python3 ci/gpu/deterministic_cost.py "$dir" --markdown "$dir/cost.md" || status=1
    ;;
  *)
    echo "usage: deterministic.sh check|strict|cost [WORKLOADS]" >&2
    exit 2
    ;;
esac
echo "== status $status"
exit $status
