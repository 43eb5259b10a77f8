#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it:
#
#   bash experiments/gpu/getdevice.sh
#
# Builds the HIP-on-NVIDIA harness and times the device queries
# (getdevice.c) into $OUT/getdevice.log.
set -uo pipefail
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
exec > >(tee -a "$out/getdevice.log") 2>&1
backends_for_env=hip
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
bin=$(mktemp -d)
gcc -O2 experiments/gpu/getdevice.c -o "$bin/getdevice" -ldl
"$bin/getdevice" libcuda.so.1 "$PWD/.gpu/hip/lib/libcudart.so.11.0" "$ROCM_PATH/lib/libamdhip64.so"
