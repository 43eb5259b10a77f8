#!/usr/bin/env bash
# Runs on a GPU machine with two or more GPUs, from the repository root,
# after ci/gpu/prepare.sh prepared .gpu/ here and the device call carried it:
#
#   bash ci/gpu/scaling.sh [BACKENDS] [PARTS]
#
# How the split wave scales, in parts (PARTS, comma-separated, default
# `large,medium,tests`; a device call of ten minutes holds about two):
# `large` is ci/gpu/node.sh at large (wave and bandwidth: topology, peer
# copies against the raw call, torch's baseline, then `conform --device
# all`), `medium` the wave alone at medium on every device, `tests` the
# API tests across two devices (two-devices.log).
# Everything goes to $OUT/scaling.tgz (node-*.json/md, node-large.log), a
# table of the split's speed-ups (from the JSON reports, with python3) to
# $OUT/summary.txt and the output.
set -uo pipefail
backends=${1:-cuda,hip,opencl}
parts=,${2:-large,medium,tests},
bin=.gpu/bin
status=0
final=${OUT:-/tmp/hetero-out}
export OUT=$final/scaling
mkdir -p "$OUT"
if [[ $parts == *,large,* ]]; then
  bash ci/gpu/node.sh "$backends" large wave,bandwidth 240 > "$OUT/node-large.log" 2>&1 || status=1
fi
backends_for_env=$backends
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
if [[ $parts == *,medium,* ]]; then
  for backend in ${backends//,/ }; do
    echo "== conform --backend $backend --device all --workload wave --size medium"
    timeout 90 "$bin/conform" --backend "$backend" --device all --workload wave --size medium \
      --json "$out/node-$backend-medium.json" --markdown "$out/node-$backend-medium.md" >>"$out/node-medium.log" 2>&1 || status=1
  done
fi
if [[ $parts == *,tests,* ]]; then
  echo "== API tests across two devices (peer copies, waits, staging)"
  HETERO_REQUIRE=$backends timeout 240 "$bin/test-api" --test-threads=1 two_devices >"$out/two-devices.log" 2>&1 || status=1
  grep -E "^test result|FAILED|panicked" "$out/two-devices.log"
fi
python3 - "$out" <<'PY' | tee "$final/summary.txt"
import glob, json, sys
print(f"{'report':<28}{'variant':<15}{'devices':>8}{'k':>4}{'ms':>10}{'vs best 1':>10}{'vs sync':>9}{'hidden':>8}{'enqueue':>9}")
for path in sorted(glob.glob(sys.argv[1] + "/node-*-*.json")):
    report = json.load(open(path))
    for run in report["runs"]:
        for r in run["results"]:
            if r["workload"] == "wave" and r["variant"].startswith("split"):
                m = r["metrics"]
                print(f"{path.split('/')[-1]:<28}{r['variant']:<15}{m.get('devices', 0):>8.0f}{m.get('halo_steps', 0):>4.0f}"
                      f"{r['device_ms'] or 0:>10.2f}{m.get('speedup_vs_single_best', 0):>10.2f}{m.get('speedup_vs_single', 0):>9.2f}"
                      f"{m.get('halo_hidden_fraction', 0):>8.2f}{m.get('enqueue_ms', 0):>9.1f}  {'pass' if r['passed'] else 'FAIL'}")
                trials = sorted((int(k.split('_')[1]), v) for k, v in m.items() if k.endswith('_trial_step_ms'))
                if trials and r["variant"] == "split-overlap":
                    print("  rounds tried (steps: ms a step): " + ", ".join(f"{k}: {v:.4f}" for k, v in trials))
    for h in report.get("node_health", []):
        print(f"  health {h['backend']} #{h['device']} vs {h['against']}: {h['compared']} compared, "
              f"{len(h['disagree'])} differ, time ratio {h.get('time_ratio')}")
PY
tar czf "$final/scaling.tgz" -C "$final" scaling
exit $status
