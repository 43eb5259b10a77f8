#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it:
#
#   bash ci/gpu/node.sh cuda,hip large [WORKLOADS [SECONDS]]
#
# The node at one size: how its GPUs are linked (nvidia-smi topo); peer
# copies between every ordered pair of devices (a device to itself on one
# GPU) through hetero and the vendor's call (`bench --peer-only`,
# $OUT/bench-peer-<backend>.json, 4 KiB and 1 GiB; 64 MiB on OpenCL) and
# through torch (ci/gpu/peer_torch.py, $OUT/peer-torch.json); torch's figures at that size (ci/gpu/baseline.py,
# with the bandwidth workload's); then `conform --device all` with
# WORKLOADS (default all) on each backend, at most SECONDS (default 240)
# each (the split wave and peer copies when there are two or more
# devices), written to $OUT/node-<backend>-<size>.{json,md}, and all of
# them merged into $OUT/node-<size>.html.
set -uo pipefail
backends=${1:-cuda,hip,opencl}
size=${2:-large}
workloads=${3:-reduce,scan,pull,wave,bandwidth}
seconds=${4:-240}
bin=.gpu/bin
log_name=node-$size
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
echo "== topology"
nvidia-smi topo -m
nvidia-smi topo -p2p r

status=0
for backend in ${backends//,/ }; do
  # OpenCL stages every copy across contexts through host memory, seconds
  # for 1 GiB: its rows copy 64 MiB.
  bytes=4096,1073741824
  [ "$backend" = opencl ] && bytes=4096,67108864
  echo "== peer copies: bench --peer-only --backend $backend --peer-bytes $bytes"
  timeout 90 "$bin/bench" --backend "$backend" --peer-only --peer-bytes "$bytes" \
    --json "$out/bench-peer-$backend.json" || status=1
done
echo "== peer copies: torch"
timeout 45 python3 ci/gpu/peer_torch.py --json "$out/peer-torch.json" || status=1
library=()
echo "== vendor library baseline, size $size"
if timeout 60 python3 ci/gpu/baseline.py --size "$size" --json "$out/baseline-$size.json"; then
  library=(--baseline "$out/baseline-$size.json")
fi
for backend in ${backends//,/ }; do
  echo "== conform --backend $backend --device all --workload $workloads --size $size"
  timeout "$seconds" "$bin/conform" --backend "$backend" --device all --workload "$workloads" --size "$size" \
    "${library[@]}" --json "$out/node-$backend-$size.json" --markdown "$out/node-$backend-$size.md" || status=1
done
# Every backend's report on one HTML page (its verdict is the runs' above).
reports=("$out"/node-*-"$size".json)
[ -e "${reports[0]}" ] && "$bin/report" merge "${reports[@]}" --html "$out/node-$size.html" \
  --markdown "$out/node-$size-merged.md" >/dev/null
exit $status
