#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .gpu/ carried:
# how often a process that copied between two device objects (the GPU
# paired with itself) and exits right after dropping them ends with an
# error or a signal, for two builds of tests/exit_after_peer.rs
# alternated (its `child_process`, run directly):
#
#   cp <test binary before> .gpu/diag/exit-old; cp <after> .gpu/diag/exit-new
#   [EXIT_CASES="hip opencl:shared"] bash experiments/gpu/exit-ab.sh [RUNS] [BINARIES...]
#
# Cases are backends, OpenCL with its context kind (`opencl:shared`).
# One line per round, build and case, and one per
# process that did not exit with 0 (its exit status; 139 is SIGSEGV).
set -u
runs=${1:-20}
shift || true
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(exit-old exit-new)
backends_for_env=cuda,hip,opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh >/dev/null 2>&1
for round in 1 2; do
  for bin in "${bins[@]}"; do
    for case in ${EXIT_CASES:-cuda hip opencl:auto opencl:shared}; do
      backend=${case%%:*}
      context=auto
      [[ $case == *:* ]] && context=${case#*:}
      bad=0
      for i in $(seq 1 "$runs"); do
        HETERO_OPENCL_CONTEXT=$context HETERO_EXIT_CHILD=$backend timeout 60 ".gpu/diag/$bin" \
          --exact child_process --ignored --test-threads=1 >/dev/null 2>&1
        rc=$?
        if [ "$rc" -ne 0 ]; then
          bad=$((bad + 1))
          echo "  round $round $bin $case process $i: exit status $rc"
        fi
      done
      echo "round $round $bin $case: $bad of $runs processes did not exit with 0"
    done
  done
done
