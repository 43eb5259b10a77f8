#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it:
#
#   bash experiments/gpu/wave-staging.sh
#
# The wave workload with its snapshot staging: balanced (2048² cells, a
# snapshot every 10 steps) on CUDA, HIP and OpenCL, and the default large
# grid on CUDA. Writes $OUT/<backend>-balanced.json, cuda-large.json and
# wave.log.
set -uo pipefail
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
backends_for_env=cuda,hip,opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh > "$out/env.log" 2>&1
for b in cuda hip opencl; do
  timeout 100 .gpu/bin/conform --backend "$b" --size large --workload wave --wave-grid 2048 --snapshot-every 10 \
    --json "$out/$b-balanced.json" 2>&1 | grep -E "wave |overlap" | tee -a "$out/wave.log"
done
timeout 120 .gpu/bin/conform --backend cuda --size large --workload wave --json "$out/cuda-large.json" 2>&1 \
  | grep -E "wave |overlap" | tee -a "$out/wave.log"
