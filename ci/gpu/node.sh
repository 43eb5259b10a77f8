#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it:
#
#   bash ci/gpu/node.sh cuda,hip large
#
# The node at one size: how its GPUs are linked (nvidia-smi topo),
# torch's figures at that size (ci/gpu/baseline.py, with the bandwidth
# workload's), `conform --device all` with every workload on each backend
# (the split wave and peer copies when there are two or more devices),
# written to $OUT/node-<backend>-<size>.{json,md,html}; then peer copies
# between every ordered pair of devices (a device to itself on one GPU)
# through hetero and the vendor's call (`bench --peer-only`, $OUT/bench-peer.json)
# and through torch (ci/gpu/peer_torch.py, $OUT/peer-torch.json).
set -uo pipefail
backends=${1:-cuda,hip,opencl}
size=${2:-large}
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
bin=.gpu/bin
exec > >(tee -a "$out/node-$size.log") 2>&1
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
echo "== topology"
nvidia-smi topo -m
nvidia-smi topo -p2p r

status=0
library=()
echo "== vendor library baseline, size $size"
if timeout 120 python3 ci/gpu/baseline.py --size "$size" --json "$out/baseline-$size.json"; then
  library=(--baseline "$out/baseline-$size.json")
fi
for backend in ${backends//,/ }; do
  echo "== conform --backend $backend --device all --size $size"
  timeout 240 "$bin/conform" --backend "$backend" --device all --size "$size" "${library[@]}" \
    --json "$out/node-$backend-$size.json" --markdown "$out/node-$backend-$size.md" \
    --html "$out/node-$backend-$size.html" || status=1
done
echo "== peer copies: bench --peer-only --backend $backends"
timeout 180 "$bin/bench" --backend "$backends" --peer-only --json "$out/bench-peer.json" || status=1
echo "== peer copies: torch"
timeout 60 python3 ci/gpu/peer_torch.py --json "$out/peer-torch.json" || status=1
exit $status
