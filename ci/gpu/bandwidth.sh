#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it:
#
#   bash ci/gpu/bandwidth.sh cuda,hip,opencl large
#
# The bandwidth workload on every device of each backend, set against
# torch in the same call (ci/gpu/baseline.py: BabelStream's kernels as
# torch calls, torch's pinned copy_ each way), written to
# $OUT/bandwidth-<backend>-<size>.json and .md; then the benchmark's peer
# copies (every ordered pair of devices, a device to itself on one GPU;
# hetero against the vendor's own peer call) to $OUT/bench-peer.json and
# .log. The benchmark's other rows run one short round only.
set -uo pipefail
backends=${1:-cuda,hip,opencl}
size=${2:-large}
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
bin=.gpu/bin
exec > >(tee -a "$out/bandwidth.log") 2>&1
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh

status=0
library=()
echo "== vendor library baseline, size $size"
if timeout 180 python3 ci/gpu/baseline.py --size "$size" --json "$out/baseline-$size.json"; then
  library=(--baseline "$out/baseline-$size.json")
fi
for backend in ${backends//,/ }; do
  echo "== conform --backend $backend --device all --workload bandwidth --size $size"
  timeout 240 "$bin/conform" --backend "$backend" --device all --workload bandwidth --size "$size" \
    --json "$out/bandwidth-$backend-$size.json" --markdown "$out/bandwidth-$backend-$size.md" "${library[@]}" \
    || status=1
done
echo "== bench peer copies (--backend $backends)"
timeout 300 "$bin/bench" --backend "$backends" --rounds 1 --warmup 0 --thread-batches 0 --growth-groups 2 \
  --pull-repeats 1 --json "$out/bench-peer.json" || status=1
exit $status
