#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it:
#
#   bash ci/gpu/bench.sh cuda,hip,opencl
#   bash ci/gpu/bench.sh cuda,hip,opencl bench-250 --enqueues 250
#
# Per-operation host cost through hetero and through each vendor API in
# the same process (`bench`), written to $OUT/bench.json and bench.log (or
# $OUT/NAME.json and NAME.log, with further arguments passed to `bench`).
set -uo pipefail
backends=${1:-cuda,hip,opencl}
name=${2:-bench}
shift $(($# < 2 ? $# : 2))
log_name=$name
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
echo "== bench --backend $backends --rounds 9 --pull-size large $*"
timeout 500 .gpu/bin/bench --backend "$backends" --rounds 9 --pull-size large --json "$out/$name.json" "$@"
