#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .gpu/deb carried
# and DIR holding two builds: DIR/fifo/test-api (the API tests over a
# library that releases a buffer's sub-buffers oldest first) and
# DIR/fixed/{test-api,stress,conform} (newest first, the library as it is):
#
#   bash experiments/gpu/subbuf-ab.sh DIR
#
# On NVIDIA's OpenCL: the regression test for the sub-buffer release order
# with each build, stress with the algorithms mixed in (the run that found
# the crash), then `conform --device all --workload wave` at medium and
# large, whose processes died at exit before (reports in $OUT).
set -uo pipefail
dir=${1:?the folder of the two builds}
backends_for_env=opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh >/dev/null 2>&1
first=$(timeout 30 "$dir/fixed/stress" --seconds 1 --backend opencl 2>&1 | head -n 1)
echo "first OpenCL device: $first"
case "$first" in *NVIDIA*) ;; *) echo "NVIDIA's OpenCL is not the first device: stopping"; exit 1 ;; esac
for build in fifo fixed; do
  HETERO_REQUIRE=opencl timeout 60 "$dir/$build/test-api" --test-threads=1 overlapping_offsets --skip host:: --skip cuda:: --skip hip:: >"$out/regression-$build.txt" 2>&1
  echo "== test-api ($build) overlapping_offsets on opencl: exit $?"
  grep -E "^test |test result" "$out/regression-$build.txt"
done
for args in "--mix algorithms --threads 1 --streams 1" "--mix algorithms" "--mix all --inject-faults 0.02" "--mix all"; do
  # shellcheck disable=SC2086
  timeout 40 "$dir/fixed/stress" --seconds 8 --backend opencl $args >"$work/stress.txt" 2>&1
  echo "== stress (fixed) $args: exit $?"
  tail -n 3 "$work/stress.txt"
done
for size in medium large; do
  timeout 200 "$dir/fixed/conform" --backend opencl --device all --workload wave --size "$size" \
    --json "$out/wave-opencl-$size.json" --markdown "$out/wave-opencl-$size.md" >"$out/wave-opencl-$size.log" 2>&1
  echo "== conform (fixed) --backend opencl --device all --workload wave --size $size: exit $?"
  grep -E "^split|PASS|FAIL" "$out/wave-opencl-$size.log"
done
