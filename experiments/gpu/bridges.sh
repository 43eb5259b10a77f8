#!/usr/bin/env bash
# How OpenCL's waits across contexts are bridged (HETERO_OPENCL_BRIDGE):
# a thread waiting for each bridged event, against
# completion callbacks. On one GPU the bench pairs the device with a second
# context of itself, so a peer copy is staged by hetero through pinned host
# memory with three bridges (its read, its write and the near stream's
# follow-up); on two GPUs it runs across them. Rounds alternate the two
# modes, then the OpenCL API tests across two devices run under each mode.
# After ci/gpu/prepare.sh:
#   bash experiments/gpu/bridges.sh [ROUNDS]   (2, the default)
# Outputs go to $OUT/bridges/; a table is printed last.
set -u
rounds=${1:-2}
bin=.gpu/bin
backends_for_env=opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
dir=$out/bridges
mkdir -p "$dir"
TIMEFORMAT='%R s wall, %U s user, %S s system'
for round in $(seq "$rounds"); do
  for mode in callback thread; do
    echo "== round $round: HETERO_OPENCL_BRIDGE=$mode bench --peer-only"
    { time HETERO_OPENCL_BRIDGE=$mode timeout 240 "$bin/bench" --backend opencl --peer-only \
      --peer-bytes 4096,1048576,67108864 --peer-rounds 20 --json "$dir/peer-$mode-$round.json" \
      >"$dir/peer-$mode-$round.log" 2>&1; } 2>&1
  done
done
for mode in callback thread; do
  HETERO_OPENCL_BRIDGE=$mode HETERO_REQUIRE=opencl timeout 120 "$bin/test-api" --test-threads=1 opencl::two_devices \
    >"$dir/two-devices-$mode.log" 2>&1
  echo "two_devices, $mode: rc $?, $(grep -E '^test result' "$dir/two-devices-$mode.log")"
done
python3 - "$dir" <<'PY'
import glob, json, os, sys
rows = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "peer-*.json"))):
    mode, rnd = os.path.basename(path)[5:-5].rsplit("-", 1)
    for r in (r for d in json.load(open(path))["devices"] for r in d["peer"]):
        key = (r["from"], r["to"], r["bytes"], r["both"])
        rows.setdefault(key, {}).setdefault((r["path"] if r["path"] == "raw" else mode), []).append(r["median_us"])
print(f"{'pair':>6} {'bytes':>10} {'both':>5} {'callback us':>22} {'thread us':>22} {'raw us':>22}")
for (f, t, b, both), by in sorted(rows.items()):
    cell = lambda k: ", ".join(f"{v:.1f}" for v in by.get(k, []))
    print(f"{f}->{t:<3} {b:>10} {'yes' if both else 'no':>5} {cell('callback'):>22} {cell('thread'):>22} {cell('raw'):>22}")
PY
