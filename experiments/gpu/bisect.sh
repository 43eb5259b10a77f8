#!/usr/bin/env bash
# Bisects the OpenCL wave slowdown: conform binaries built at earlier
# commits (git worktree + cargo build --release --all-features -p conformance
# --bin conform, copied to .gpu/bisect/conform-<commit>) run the wave workload
# at large on NVIDIA's OpenCL one after another in one call:
#   bash experiments/gpu/bisect.sh [COMMIT...]   (default: head 7b1c171 e8e88d2 f42a786)
set -u
backends_for_env=opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
commits=${*:-head 7b1c171 e8e88d2 f42a786}
for c in $commits; do
  echo "== $c"
  /usr/bin/time -f "%e s" timeout 150 ".gpu/bisect/conform-$c" --backend opencl --size large --workload wave --json "$out/wave-$c.json" 2>&1 | grep -E "wave|PASS|FAIL| s$" | tee -a "$out/bisect.log"
done
