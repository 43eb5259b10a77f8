#!/usr/bin/env bash
# Is a wave variant slower on blocks the allocator has never handed out
# before? On two GPUs, OpenCL's split at medium declines and runs the
# one-device `graph` again after trimming the allocator's caches, and that
# second run was slower than the first (0.64-0.87x, docs/results/
# multi-device-h200x2/). Here, on one device: `conform --workload wave`
# with the caching allocator (the variant's fields and buffers come from
# blocks the `sync` run before it used) alternated with the direct one
# (every block new), RUNS rounds, and each run's variant times printed.
#
#   OUT=... bash experiments/gpu/allocator-ab.sh CONFORM BACKENDS SIZE VARIANTS [RUNS]
#   e.g. bash experiments/gpu/allocator-ab.sh .gpu/ab/conform opencl,cuda medium graph 3
set -u
conform=$1 backends=$2 size=$3 variants=$4 runs=${5:-3}
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
status=0
for run in $(seq 1 "$runs"); do
  for backend in ${backends//,/ }; do
    for allocator in caching direct; do
      name="$backend-$size-$allocator-$run"
      HETERO_ALLOCATOR=$allocator timeout 200 "$conform" --backend "$backend" --size "$size" --workload wave \
        --wave-variants "$variants" --json "$out/$name.json" >"$out/$name.log" 2>&1 || status=1
      python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["runs"]:
    print(sys.argv[2], " ".join("%s %.3f" % (x["variant"], x["device_ms"]) for x in r["results"] if x.get("device_ms")))' \
        "$out/$name.json" "$name" || status=1
    done
  done
done
exit $status
