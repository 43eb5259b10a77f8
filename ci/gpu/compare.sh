#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it:
#
#   bash ci/gpu/compare.sh medium
#
# Runs every backend of the node side by side (`conform --backend all`) and
# writes $OUT/all.{json,xml,md,html} and the device timelines $OUT/trace.json.
set -uo pipefail
size=${1:-medium}
log_name=run
backends_for_env=hip
source ci/gpu/env.sh
HETERO_REQUIRE=host,opencl,cuda,hip timeout 500 .gpu/bin/conform --backend all --size "$size" \
  --json "$out/all.json" --junit "$out/all.xml" --markdown "$out/all.md" --trace "$out/trace.json" \
  --html "$out/all.html"
