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
# A GPU is requested only for rows whose runner has one (`--gres=gpu:1`, on
# the partition ci/matrix.json names for the runner: `gpu` for NVIDIA,
# `amd` for AMD; edit `slurm_partition` there to match your cluster). SBATCH
# OPTIONS override the job script's requests, e.g. `--cpus-per-task=2` on
# nodes with fewer than its 8 CPUs, `--account=...`, `--time=...`. When the
# jobs are done, merge their reports:
#
#   cargo xtask report merge reports/*.json --markdown reports/summary.md
set -euo pipefail
cd "$(dirname "$0")/../.."
runners=${1:-all}
shift $(($# > 0 ? 1 : 0))

mkdir -p reports
cargo fetch --locked
cargo build --locked -p xtask
rows=$(cargo xtask ci-matrix --format slurm --runners "$runners")
# The builds `cargo xtask conform --backend B` makes in each job, one per
# backend the rows name.
awk '{print $1}' <<< "$rows" | sort -u | while read -r backend; do
  cargo build --release --locked -p conformance --bin conform --no-default-features --features "host,$backend"
done

while read -r backend runner required partition gpu; do
  gres=()
  if [ "$gpu" = 1 ]; then gres=(--gres=gpu:1); fi
  sbatch --partition="$partition" "${gres[@]}" --output="reports/slurm-%x-$backend-$runner-%j.out" \
    --export="ALL,BACKEND=$backend,RUNNER=$runner,REQUIRED=$required" "$@" ci/slurm/conform.sbatch
done <<< "$rows"
