#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it: what hetero's
# profiler markers cost with no profiler attached, and whether NVIDIA's own
# tools receive them.
#
#   bash ci/gpu/markers.sh cuda,hip,opencl
#
# 1. The bench's per-operation rows and its `markers` row (a range's cost
#    against the cheapest operation that opens one), every backend in one
#    process ($OUT/bench-markers.json).
# 2. Nsight Compute with NVTX filtering: only kernels launched inside
#    hetero's `conform reduce` range are profiled, and ncu prints the NVTX
#    ranges around each ($OUT/ncu-nvtx.txt).
# 3. Nsight Systems, where a binary is found: the ranges' names in what it
#    recorded ($OUT/nsys-nvtx.txt).
# Everything printed goes to $OUT/markers.log too.
set -uo pipefail
backends=${1:-cuda,hip,opencl}
log_name=markers
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
status=0

echo "== bench, no profiler attached"
timeout 400 .gpu/bin/bench --backend "$backends" --rounds 9 --enqueues 1000 --thread-batches 0 --peer-bytes 4096 \
  --pull-repeats 1 --growth-groups 2 --graph-rounds 1 --json "$out/bench-markers.json" || status=1

echo "== ncu --nvtx"
ncu=$(command -v ncu || true)
for candidate in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
  if [ -z "$ncu" ] && [ -x "$candidate" ]; then ncu=$candidate; fi
done
if [ -n "$ncu" ]; then
  echo "ncu: $ncu ($("$ncu" --version | tail -1))"
  # Kernels inside the suite's reduce phase only: the copy-bandwidth
  # phase's kernels before it must not be profiled.
  timeout 300 "$ncu" --nvtx --nvtx-include "conform reduce small on cuda #0/" --launch-count 3 \
    --section LaunchStats .gpu/bin/conform --backend cuda --size small --workload reduce > "$out/ncu-nvtx.txt" 2>&1
  echo "ncu exit $?"
  grep -E "==PROF==|NVTX|hetero|conform |reduce_|fill|copy" "$out/ncu-nvtx.txt" | head -60
else
  echo "skipped: no ncu"
fi

echo "== nsys"
nsys=$(command -v nsys || true)
for candidate in /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys /opt/nvidia/nsight-systems/*/bin/nsys; do
  if [ -z "$nsys" ] && [ -x "$candidate" ]; then nsys=$candidate; fi
done
if [ -n "$nsys" ]; then
  echo "nsys: $nsys"
  timeout 300 "$nsys" profile --trace=nvtx,cuda --force-overwrite=true --output "$work/prof" \
    .gpu/bin/conform --backend cuda --size small --workload reduce 2>&1 | tail -5
  echo "nsys exit $?"
  # The control: the same run with markers off.
  mkdir -p "$work/off"
  HETERO_MARKERS=off timeout 300 "$nsys" profile --trace=nvtx,cuda --force-overwrite=true --output "$work/off/prof" \
    .gpu/bin/conform --backend cuda --size small --workload reduce 2>&1 | tail -2
  python3 - "$work" "$work/off" > "$out/nsys-nvtx.txt" <<'PY'
import glob, sys
names = ["hetero launch reduce_partial", "hetero launch reduce_atomic", "hetero copy", "hetero fill",
         "hetero event synchronize", "hetero build_module", "conform copy bandwidth small on cuda #0",
         "conform reduce small on cuda #0"]
for run, folder in zip(["markers on", "HETERO_MARKERS=off"], sys.argv[1:]):
  for path in glob.glob(folder + "/prof*"):
    data = open(path, "rb").read()
    print(f"{run}: {path.rsplit('/', 1)[-1]}, {len(data)} bytes; occurrences of each range name (UTF-8, UTF-16):")
    for name in names:
        print(f"  {data.count(name.encode()):6d} {data.count(name.encode('utf-16-le')):6d}  {name}")
PY
  cat "$out/nsys-nvtx.txt"
else
  echo "skipped: no nsys"
fi
echo "== status $status"
exit $status
