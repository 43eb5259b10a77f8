#!/usr/bin/env bash
# Which earlier two-device API test makes `a_gated_peer_copy_holds_no_other_stream`
# stop returning: the test alone, after each of the three before it that gate or copy from
# two threads, and after
# all eight (caching and direct allocation); then whether the hardware work
# queues streams share decide it (CUDA_DEVICE_MAX_CONNECTIONS: the test alone
# on one queue, and after all eight on 32). Two GPUs, after ci/gpu/prepare.sh:
#   bash experiments/gpu/gate-bisect.sh [BACKEND] [PARTS]   (PARTS: order,queues, the default)
# Logs go to $OUT/gate/; one line a run is printed.
set -u
b=${1:-cuda}
parts=,${2:-order,queues},
bin=.gpu/bin
backends_for_env=$b
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
dir=$out/gate
mkdir -p "$dir"
t=$b::two_devices::case_09_gated_copy_holds_no_other
names=(01_copies_both_ways 02_event_waits 03_gate_holds_the_other 04_drops_with_peer_work 05_buffer_refused
  06_fault_reaches_the_other 07_routes 08_opposite_copies)
run() {
  local label=$1
  shift
  local started=$SECONDS
  HETERO_REQUIRE=$b timeout 45 "$bin/test-api" --test-threads=1 --exact "$@" >"$dir/$label.log" 2>&1
  echo "$label: rc $? in $((SECONDS - started)) s, $(grep -c '\.\.\. ok' "$dir/$label.log") ok," \
    "$(grep -c '\.\.\. FAILED' "$dir/$label.log") failed"
}
all=()
for n in "${names[@]}"; do all+=("$b::two_devices::case_$n"); done
if [[ $parts == *,order,* ]]; then
  run alone "$t"
  run after-all-8 "${all[@]}" "$t"
  HETERO_ALLOCATOR=direct run after-all-8-direct "${all[@]}" "$t"
  for n in "${names[@]}"; do
    case $n in 03_* | 04_* | 08_*) run "after-$n" "$b::two_devices::case_$n" "$t" ;; esac
  done
fi
if [[ $parts == *,queues,* ]]; then
  CUDA_DEVICE_MAX_CONNECTIONS=1 run alone-1-connection "$t"
  CUDA_DEVICE_MAX_CONNECTIONS=32 run after-all-8-32-connections "${all[@]}" "$t"
fi
