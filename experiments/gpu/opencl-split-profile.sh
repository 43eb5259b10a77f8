#!/usr/bin/env bash
# Runs on a machine with two GPUs, from the repository root, after
# ci/gpu/prepare.sh (or a release build of conform copied to .gpu/bin):
#
#   bash experiments/gpu/opencl-split-profile.sh [SIZE...]   # default: medium large
#
# Where OpenCL's split wave spends the host's time on NVIDIA's driver:
# for each size, `conform --device all --workload wave --wave-variants
# graph,split-overlap` once plain (reports wave-opencl-SIZE.{json,md,log})
# and once with stack-sampler.so preloaded (the stacks of the main thread
# and of the threads conform starts, every millisecond, in
# wave-opencl-SIZE-samples.txt.PID, with that run's reports -sampled).
# Summarise a samples file here with the unstripped build of the same
# conform:
#
#   python3 experiments/gpu/stack_samples.py FILE target/release/conform --within in_rounds
set -uo pipefail
log_name=opencl-split-profile
backends_for_env=opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(medium large)
gcc -O2 -shared -fPIC experiments/gpu/stack-sampler.c -o "$work/stack-sampler.so" -ldl -lrt -lpthread
conform=.gpu/bin/conform
variants=graph,split-overlap
args=(--backend opencl --device all --workload wave --wave-variants "$variants")
for size in "${sizes[@]}"; do
  name=wave-opencl-$size
  echo "== conform ${args[*]} --size $size"
  timeout 240 "$conform" "${args[@]}" --size "$size" --json "$out/$name.json" --markdown "$out/$name.md" \
    >"$out/$name.log" 2>&1
  echo "exit $?"
  grep -E "^(overlap|split|PASS|FAIL)" "$out/$name.log" | tail -n 12
  echo "== the same, stacks sampled"
  sampler=(LD_PRELOAD="$work/stack-sampler.so" SAMPLER_THREADS=all SAMPLER_US=1000 SAMPLER_OUT="$out/$name-samples.txt")
  timeout 240 env "${sampler[@]}" "$conform" "${args[@]}" --size "$size" --json "$out/$name-sampled.json" \
    >"$out/$name-sampled.log" 2>&1
  echo "exit $?"
  grep -E "^(split|PASS|FAIL)" "$out/$name-sampled.log" | tail -n 6
done
