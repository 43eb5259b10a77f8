#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it:
#
#   bash ci/gpu/bench.sh cuda,hip,opencl
#
# Per-operation host cost through hetero and through each vendor API in
# the same process (`bench`), written to $OUT/bench.json and bench.log.
set -uo pipefail
backends=${1:-cuda,hip,opencl}
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
exec > >(tee -a "$out/bench.log") 2>&1
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
echo "== bench --backend $backends"
timeout 500 .gpu/bin/bench --backend "$backends" --rounds 9 --pull-size large --json "$out/bench.json"
