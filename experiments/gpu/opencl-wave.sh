#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it:
#
#   bash experiments/gpu/opencl-wave.sh [CONFORM_RUNS]   # default 2
#
# Is NVIDIA's OpenCL wave slowness hetero's or the runtime's? First the raw
# program opencl-wave.c (hetero's wave kernel and the synchronous variant's
# commands, no hetero) at the default large grid and at the balanced
# schedule, many runs in one process; then `conform --workload wave` on
# OpenCL CONFORM_RUNS times (the last with the direct allocator), each with
# a Perfetto trace, and the per-step intervals of each variant summarised
# (experiments/gpu/wave_steps.py). Everything printed goes to
# $OUT/opencl-wave.log.
set -uo pipefail
runs=${1:-2}
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
exec > >(tee -a "$out/opencl-wave.log") 2>&1
backends_for_env=opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)"

echo "== raw OpenCL wave (experiments/gpu/opencl-wave.c)"
gcc -O2 experiments/gpu/opencl-wave.c -o "$work/opencl-wave" "$work/root/usr/lib/x86_64-linux-gnu/libOpenCL.so.1"
for args in "8 4096 1000 100" "8 4096 340 17"; do
  echo "-- opencl-wave kernels/src $args"
  # shellcheck disable=SC2086
  timeout 120 "$work/opencl-wave" kernels/src $args
done

status=0
for run in $(seq 1 "$runs"); do
  allocator=caching
  if [ "$run" -eq "$runs" ] && [ "$runs" -gt 1 ]; then allocator=direct; fi
  echo "== conform --backend opencl --size large --workload wave (run $run, HETERO_ALLOCATOR=$allocator)"
  HETERO_ALLOCATOR=$allocator timeout 200 .gpu/bin/conform --backend opencl --size large --workload wave \
    --json "$out/wave-$run.json" --trace "$out/wave-$run.trace.json" | grep -E "wave|PASS|FAIL" || status=1
  python3 experiments/gpu/wave_steps.py "$out/wave-$run.trace.json" || status=1
done
exit $status
