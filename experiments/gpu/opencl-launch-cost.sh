#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .gpu/deb carried
# (ci/gpu/prepare.sh, or only its ICD loader download):
#
#   bash experiments/gpu/opencl-launch-cost.sh [N...]   # default "256 64"
#
# Builds experiments/gpu/opencl-launch-cost.c against the carried ICD
# loader and runs it once for each N (launches a run). Everything printed
# goes to $OUT/opencl-launch-cost.log.
set -uo pipefail
counts=${*:-256 64}
backends_for_env=opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
exec > >(tee -a "$out/opencl-launch-cost.log") 2>&1
gcc -O2 experiments/gpu/opencl-launch-cost.c -o "$work/opencl-launch-cost" \
  "$work/root/usr/lib/x86_64-linux-gnu/libOpenCL.so.1" -lpthread
status=0
for n in $counts; do
  echo "-- opencl-launch-cost $n"
  timeout 120 "$work/opencl-launch-cost" "$n" 21 || status=1
done
exit $status
