#!/usr/bin/env bash
# Runs on a machine with two GPUs, from the repository root, after
# ci/gpu/prepare.sh:
#
#   bash experiments/gpu/opencl-split-ab.sh ROUNDS CONFORM...
#
# OpenCL's split wave on NVIDIA, before and after a change: each CONFORM
# binary (a path) runs `conform --backend opencl --device all --workload
# wave --wave-variants graph,split-overlap` at large, ROUNDS times, the
# binaries alternating, then at medium once each. Printed per run: its
# wall, user and system time (the host's cores the process kept busy:
# NVIDIA's driver spins a core for each thread waiting in
# clWaitForEvents) and its split line; the reports go to $OUT as
# wave-opencl-SIZE-NAME[-runN].{json,log}, NAME the binary's file name.
set -uo pipefail
log_name=opencl-split-ab
backends_for_env=opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
rounds=$1
shift
variants=graph,split-overlap
args=(--backend opencl --device all --workload wave --wave-variants "$variants")
TIMEFORMAT="wall %R s, user %U s, system %S s"
sizes=()
for ((r = 1; r <= rounds; r++)); do sizes+=(large); done
sizes+=(medium)
run=0
for size in "${sizes[@]}"; do
  run=$((run + 1))
  for conform in "$@"; do
    name=wave-opencl-$size-$(basename "$conform")-run$run
    echo "== $conform ${args[*]} --size $size"
    { time timeout 200 "$conform" "${args[@]}" --size "$size" --json "$out/$name.json" >"$out/$name.log" 2>&1; } 2>&1
    grep -E "^split:" "$out/$name.log"
    grep -E "^exp-bridge" "$out/$name.log" | tail -n 1
    grep -E "^(PASS|FAIL)" "$out/$name.log"
  done
done
