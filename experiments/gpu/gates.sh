#!/usr/bin/env bash
# Whether a closed gate holds streams that never waited on it: the API test
# `a_closed_gate_holds_no_other_stream` (40 streams beside a gated one, each
# synchronised before the gate opens) on one hardware work queue and on the
# default eight (CUDA_DEVICE_MAX_CONNECTIONS), with the test binary of this
# build and, where prepared, of the build before gates held their work on
# the host (.gpu/bin/test-api-before: this tree's tests over the earlier
# library); then the whole API suite on 16 test threads at once, which the
# gate tests used to stop on CUDA. One GPU, after ci/gpu/prepare.sh:
#   bash experiments/gpu/gates.sh [BACKENDS]   (cuda,hip, the default)
# Logs go to $OUT/gates/; one line a run is printed.
set -u
backends=${1:-cuda,hip}
bin=.gpu/bin
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
dir=$out/gates
mkdir -p "$dir"
run() {
  local label=$1 limit=$2
  shift 2
  local started=$SECONDS
  timeout "$limit" "$@" >"$dir/$label.log" 2>&1
  echo "$label: rc $? in $((SECONDS - started)) s, $(grep -c '\.\.\. ok' "$dir/$label.log") ok," \
    "$(grep -c '\.\.\. FAILED' "$dir/$label.log") failed"
}
for b in ${backends//,/ }; do
  for build in before after; do
    exe=$bin/test-api
    [ "$build" = before ] && exe=$bin/test-api-before
    if [ ! -x "$exe" ]; then
      echo "$b-$build: skipped: $exe was not prepared"
      continue
    fi
    name=$("$exe" --list 2>/dev/null | sed -n 's/: test$//p' | grep "^$b::api::.*gate_holds_no_other")
    # Passes in seconds; a held host is stopped after 30 s (rc 124).
    for queues in 1 8; do
      CUDA_DEVICE_MAX_CONNECTIONS=$queues HETERO_REQUIRE=$b run "$b-$build-$queues-queues" 30 \
        "$exe" --exact "$name"
    done
  done
done
# Tests that leave a gate closed on purpose run in processes of their own
# (ci/gpu/run.sh).
HETERO_REQUIRE="host,$backends" run api-16-threads 150 "$bin/test-api" --test-threads=16 --skip forgotten_gate
grep -E '^test result|panicked|FAILED' "$dir/api-16-threads.log" | head -20
