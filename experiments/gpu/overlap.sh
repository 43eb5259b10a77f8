#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it:
#
#   bash experiments/gpu/overlap.sh [SIZE]   # default large
#
# First the raw OpenCL program opencl-overlap.c (copy/compute overlap
# without hetero, in several arrangements), then `conform` with the
# overlapping workloads (pull and wave) on CUDA, HIP and OpenCL, each
# writing JSON, Markdown, HTML (timelines) and a Perfetto trace to $OUT,
# and the three merged into one comparison (merged.json, merged.md).
# Everything printed goes to $OUT/overlap.log.
set -uo pipefail
size=${1:-large}
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
exec > >(tee -a "$out/overlap.log") 2>&1
backends_for_env=cuda,hip,opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh

echo "== raw OpenCL overlap (experiments/gpu/opencl-overlap.c)"
gcc -O2 experiments/gpu/opencl-overlap.c -o "$work/opencl-overlap" "$work/root/usr/lib/x86_64-linux-gnu/libOpenCL.so.1"
for args in "64 20" "8 50"; do
  echo "-- opencl-overlap $args"
  # shellcheck disable=SC2086
  timeout 120 "$work/opencl-overlap" $args
done

status=0
for backend in cuda hip opencl; do
  echo "== conform --backend $backend --size $size --workload pull,wave"
  timeout 240 .gpu/bin/conform --backend "$backend" --size "$size" --workload pull,wave \
    --json "$out/$backend.json" --markdown "$out/$backend.md" --html "$out/$backend.html" \
    --trace "$out/$backend.trace.json" || status=1
done
echo "== merged"
.gpu/bin/report merge "$out"/cuda.json "$out"/hip.json "$out"/opencl.json \
  --json "$out/merged.json" --markdown "$out/merged.md" || status=1
cat "$out/merged.md"
exit $status
