#!/usr/bin/env bash
# Submits hetero's conformance matrix (ci/matrix.json) as Slurm jobs, one per
# backend and runner kind, from the repository root on a login node:
#
#   bash ci/slurm/submit.sh [RUNNERS] [SBATCH OPTIONS...]
#   bash ci/slurm/submit.sh gpu --account=myproject
#
# RUNNERS is a comma list for `cargo xtask ci-matrix --runners` (default
# all). Crates are fetched and every backend is built here first, since
# compute nodes often have no network; the jobs then build nothing new.
# A GPU is requested only for rows whose runner has one. When the jobs are
# done, merge their reports:
#
#   cargo xtask report merge reports/*.json --markdown reports/summary.md
set -euo pipefail
cd "$(dirname "$0")/../.."
runners=${1:-all}
shift $(($# > 0 ? 1 : 0))

mkdir -p reports
cargo fetch --locked
# The builds `cargo xtask conform --backend B` makes in each job, one per backend.
for backend in host opencl cuda hip; do
  cargo build --release --locked -p conformance --bin conform --no-default-features --features "host,$backend"
done
cargo build --release --locked -p xtask

cargo xtask ci-matrix --format slurm --runners "$runners" | while read -r backend runner required partition gpu; do
  gres=()
  if [ "$gpu" = 1 ]; then gres=(--gres=gpu:1); fi
  sbatch --partition="$partition" "${gres[@]}" --output="reports/slurm-%x-$backend-$runner-%j.out" \
    --export="ALL,BACKEND=$backend,RUNNER=$runner,REQUIRED=$required" "$@" ci/slurm/conform.sbatch
done
