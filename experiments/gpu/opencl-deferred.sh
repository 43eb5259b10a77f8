#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .gpu/deb carried
# (ci/gpu/prepare.sh, or only its ICD loader download):
#
#   bash experiments/gpu/opencl-deferred.sh [N] [REPS] [MIB...]
#
# Builds experiments/gpu/opencl-deferred.c against the carried ICD loader
# and runs it with N launches (default 100), REPS runs a case (default 7),
# once for each MIB (default "24 6"). Everything printed goes to
# $OUT/opencl-deferred.log.
set -uo pipefail
n=${1:-100}
reps=${2:-7}
shift 2 2>/dev/null || shift $#
sizes=${*:-24 6}
backends_for_env=opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
exec > >(tee -a "$out/opencl-deferred.log") 2>&1
gcc -O2 experiments/gpu/opencl-deferred.c -o "$work/opencl-deferred" \
  "$work/root/usr/lib/x86_64-linux-gnu/libOpenCL.so.1" -lpthread
status=0
for mib in $sizes; do
  echo "-- opencl-deferred $n $reps $mib"
  timeout 120 "$work/opencl-deferred" "$n" "$reps" "$mib" || status=1
done
exit $status
