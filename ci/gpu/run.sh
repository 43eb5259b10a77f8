#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it:
#
#   bash ci/gpu/run.sh opencl small,medium,large
#   bash ci/gpu/run.sh cuda none          # tests only
#
# For each backend and size it runs `conform` on every device of the
# backend and writes $OUT/<backend>-<size>.json and .md (with the vendor library's times from
# ci/gpu/baseline.py, $OUT/baseline-<size>.json, where torch can use the
# GPU); it also runs the API semantics and dialect tests, the custom-kernel
# and multi-device examples (their output in $OUT/custom-kernel.txt and
# multi-device.txt), the stress test and the
# sticky-fault test with the backends required. Everything printed goes to
# $OUT/run.log too; a summary table is printed last.
set -uo pipefail
backends=${1:-opencl}
sizes=${2:-small,medium,large}
[ "$sizes" = none ] && sizes=""
bin=.gpu/bin
log_name=run

backends_for_env=$backends
source ci/gpu/env.sh

# Every step has a time limit (exit 124 when it ran out), so one hang
# cannot take the whole call. The step-by-step probe goes first: a backend
# that cannot pass it would only fail (or hang) in everything after it.
echo "== probe ${backends//,/ }"
read -ra probe_backends <<< "${backends//,/ }"
timeout 90 "$bin/probe" "${probe_backends[@]}"
probe=$?
if [ $probe -ne 0 ]; then
  echo "probe failed (exit $probe): stopping before the conformance runs"
  exit 1
fi
status=0
# The vendor library on this device, at each size, when torch is here: each
# conform run gets a `baseline` section with hetero's ratio to it.
declare -A library
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  for size in ${sizes//,/ }; do
    echo "== vendor library baseline, size $size"
    if timeout 120 python3 ci/gpu/baseline.py --size "$size" --json "$out/baseline-$size.json"; then
      library[$size]="--baseline $out/baseline-$size.json"
    fi
  done
fi
declare -A verdict
for backend in ${backends//,/ }; do
  for size in ${sizes//,/ }; do
    echo "== conform --backend $backend --device all --size $size"
    # shellcheck disable=SC2086 # split on purpose: the option and its file, or nothing
    timeout 300 "$bin/conform" --backend "$backend" --device all --size "$size" --json "$out/$backend-$size.json" \
      --markdown "$out/$backend-$size.md" ${library[$size]:-}
    code=$?
    verdict[$backend-$size]=$code
    [ $code -eq 0 ] || status=1
  done
done

echo "== API semantics tests (required: host,${backends})"
# One test at a time, each test's lines in order in the log (the suite
# passes on 16 threads too: experiments/gpu/gates.sh). The forgotten-gate
# tests leave a stream held for the rest of their process by design (a
# forgotten UserEvent keeps its device alive): each runs in a process of
# its own.
HETERO_REQUIRE="host,${backends}" timeout 300 "$bin/test-api" --test-threads=1 --skip forgotten_gate
api=$?
for backend in ${backends//,/ }; do
  for name in $("$bin/test-api" --list 2>/dev/null | sed -n "s/: test\$//p" | grep "^$backend::.*forgotten_gate"); do
    HETERO_REQUIRE="$backend" timeout 60 "$bin/test-api" --exact "$name" || api=1
  done
done

echo "== dialect test and the custom-kernel example (required: host,${backends})"
HETERO_REQUIRE="host,${backends}" timeout 120 "$bin/test-dialect" --test-threads=1 || api=1
# One line per device, each ending in `ok`; kept with the report.
timeout 120 "$bin/custom-kernel" > "$out/custom-kernel.txt"
custom=$?
cat "$out/custom-kernel.txt"
for backend in ${backends//,/ }; do
  grep -q "^$backend (.*): ok\$" "$out/custom-kernel.txt" || custom=1
done
[ $custom -eq 0 ] || api=1
# One line per ordered pair of devices (a device to itself on one GPU).
echo "== multi-device example"
timeout 120 "$bin/multi-device" > "$out/multi-device.txt"
multi=$?
cat "$out/multi-device.txt"
for backend in ${backends//,/ }; do
  grep -q "^$backend .*: ok\$" "$out/multi-device.txt" || multi=1
done
# With several GPUs, the peer paths from a device to itself too: the
# example and the two-device API tests with one GPU visible.
if [ "$(nvidia-smi -L | wc -l)" -gt 1 ]; then
  echo "== one GPU visible: multi-device example and two-device API tests, a device to itself"
  CUDA_VISIBLE_DEVICES=0 timeout 120 "$bin/multi-device" > "$out/multi-device-one-gpu.txt"
  one=$?
  cat "$out/multi-device-one-gpu.txt"
  for backend in ${backends//,/ }; do
    grep -q "^$backend 0 .* -> 0 .*: ok\$" "$out/multi-device-one-gpu.txt" || one=1
    CUDA_VISIBLE_DEVICES=0 HETERO_REQUIRE="$backend" timeout 120 "$bin/test-api" --test-threads=1 "$backend::two_devices" || one=1
  done
  [ $one -eq 0 ] || multi=1
fi
[ $multi -eq 0 ] || api=1

echo "== stress test (required: ${backends})"
timeout 120 "$bin/stress" --seconds 20 --backend "$backends"
stress=$?
# The device side of the same traffic under NVIDIA's memory checker.
if [[ ",$backends," == *,cuda,* ]] && command -v compute-sanitizer >/dev/null; then
  echo "== stress test on cuda under compute-sanitizer memcheck"
  timeout 180 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/stress" --seconds 5 --backend cuda || stress=1
fi
# One process per backend: a fault poisons the GPU context for the rest of
# the process, and HIP on NVIDIA shares CUDA's primary context.
fault=0
for backend in ${backends//,/ }; do
  case $backend in cuda) case_name=Cuda ;; hip) case_name=Hip ;; *) continue ;; esac
  echo "== sticky-fault test on $backend"
  HETERO_REQUIRE="$backend" timeout 60 "$bin/test-sticky_fault" --nocapture "Backend__$case_name" || fault=1
done
[ $api -eq 0 ] && [ $fault -eq 0 ] && [ $stress -eq 0 ] || status=1

# Each size's reports on one HTML page (their verdicts are the runs' above).
for size in ${sizes//,/ }; do
  reports=()
  for backend in ${backends//,/ }; do
    [ -e "$out/$backend-$size.json" ] && reports+=("$out/$backend-$size.json")
  done
  [ ${#reports[@]} -gt 0 ] && "$bin/report" merge "${reports[@]}" --html "$out/$size.html" \
    --markdown "$out/$size-merged.md" >/dev/null
done

echo "== summary (conform exit status: 0 pass, 1 fail, 2 cannot run)"
printf '%-10s %-8s %s\n' backend size exit
for backend in ${backends//,/ }; do
  for size in ${sizes//,/ }; do
    printf '%-10s %-8s %s\n' "$backend" "$size" "${verdict[$backend-$size]}"
  done
done
echo "api tests exit: $api, stress exit: $stress, sticky-fault test exit: $fault"
exit $status
