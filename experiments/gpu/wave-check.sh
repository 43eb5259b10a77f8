#!/usr/bin/env bash
# Wave at large on every GPU backend after the column kernel and the OpenCL
# flush policy, then the per-operation benchmark.
set -u
backends_for_env=cuda,hip,opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
for b in cuda hip opencl; do
  echo "== conform --backend $b --size large --workload wave"
  timeout 150 .gpu/bin/conform --backend "$b" --size large --workload wave --json "$out/wave-$b-large.json" 2>&1 | grep -E "wave|PASS|FAIL|bandwidth"
done
echo "== conform --backend opencl --size medium"
timeout 100 .gpu/bin/conform --backend opencl --size medium --json "$out/opencl-medium.json" 2>&1 | tail -4
