#!/usr/bin/env bash
# One device's wave variants, builds and allocators alternated: each
# CONFORM binary runs `conform --workload wave --wave-variants VARIANTS`
# on BACKENDS at SIZE with each allocator of ALLOCATORS (default
# `caching`), RUNS rounds; printed per run, the variants' device times.
# The reports go to $OUT as NAME-BACKEND-SIZE-ALLOCATOR-RUN.{json,log},
# NAME the binary's file name.
#
#   OUT=... bash experiments/gpu/one-device-ab.sh BACKENDS SIZE VARIANTS RUNS CONFORM...
#   e.g. ALLOCATORS="caching direct" bash experiments/gpu/one-device-ab.sh opencl medium graph 3 .gpu/ab/conform
#
# With `direct`, every block a variant allocates is new; with `caching`,
# the variant's fields come from blocks the `sync` run before it used. On
# two GPUs, OpenCL's declined split reruns the one-device `graph` after
# trimming the allocator's caches, and that rerun was slower than the
# first run (docs/results/multi-device-h200x2/).
set -u
backends=$1 size=$2 variants=$3 runs=$4
shift 4
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
status=0
for run in $(seq 1 "$runs"); do
  for backend in ${backends//,/ }; do
    for conform in "$@"; do
      for allocator in ${ALLOCATORS:-caching}; do
        name="$(basename "$conform")-$backend-$size-$allocator-$run"
        HETERO_ALLOCATOR=$allocator timeout 200 "$conform" --backend "$backend" --size "$size" --workload wave \
          --wave-variants "$variants" --json "$out/$name.json" >"$out/$name.log" 2>&1 || status=1
        python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["runs"]:
    print(sys.argv[2], " ".join("%s %.3f" % (x["variant"], x["device_ms"]) for x in r["results"] if x.get("device_ms")))' \
          "$out/$name.json" "$name" || status=1
      done
    done
  done
done
exit $status
