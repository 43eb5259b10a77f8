#!/usr/bin/env bash
# Runs on a machine with two GPUs, from the repository root, with `conform`
# (built with `cargo build --release --all-features -p conformance --bin
# conform`) at CONFORM and .gpu/deb (and .gpu/hip for HIP) carried:
#
#   bash experiments/gpu/split-current.sh CONFORM ROUNDS BACKENDS SIZES
#
# The split wave against the one-device `graph`, for each backend and size
# (comma-separated), ROUNDS runs of `conform --device all --workload wave
# --wave-variants graph,split-overlap`, the backends alternating within a
# round. Reports go to $OUT as wave-BACKEND-SIZE-runN.{json,md,log};
# printed per run: GPU 0's and GPU 1's `graph`, the split's line and the
# verdict.
set -uo pipefail
log_name=split-current
conform=$1
rounds=$2
IFS=, read -r -a backends <<<"$3"
IFS=, read -r -a sizes <<<"$4"
backends_for_env=$3
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
status=0
for size in "${sizes[@]}"; do
  for ((r = 1; r <= rounds; r++)); do
    for backend in "${backends[@]}"; do
      name=wave-$backend-$size-run$r
      echo "== $backend $size run $r"
      timeout 200 "$conform" --backend "$backend" --device all --workload wave --size "$size" \
        --wave-variants graph,split-overlap --json "$out/$name.json" --markdown "$out/$name.md" \
        >"$out/$name.log" 2>&1 || status=1
      grep -E "#[01] +wave +graph " "$out/$name.log" | awk '{print "graph " $3 " " $NF " ms"}'
      grep -E "^(split:|PASS|FAIL)" "$out/$name.log"
    done
  done
done
exit $status
