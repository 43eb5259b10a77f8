#!/usr/bin/env bash
# The GitLab template's CPU jobs run here, as a GitLab runner would run
# them, by gitlab-ci-local (npm: `npm install -g gitlab-ci-local`; 4.70 runs
# on Node 20) with the shell executor: the conform-cpu matrix, then the
# report job merging their artifacts. GPU jobs are left out by the
# template's own rules (trusted pipelines only). Cargo's registry and the
# build folder of this checkout are shared with the jobs, as a runner's
# cache would be. Exits non-zero when a job fails.
#
#   bash ci/gitlab/local.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v gitlab-ci-local >/dev/null || { echo "gitlab/local: gitlab-ci-local is missing: npm install -g gitlab-ci-local@4.70" >&2; exit 2; }
# gitlab-ci-local works in .gitlab-ci-local/, removed at the end: one that
# is there already is not this script's.
if [ -e .gitlab-ci-local ]; then
  echo "gitlab/local: .gitlab-ci-local/ exists; move it away first" >&2
  exit 2
fi
home=$(mktemp -d)
trap 'rm -rf "$home" .gitlab-ci-local' EXIT
gitlab-ci-local --file ci/gitlab/conformance.gitlab-ci.yml --home "$home" --force-shell-executor \
  --variable "CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}" --variable "CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}" \
  conform-cpu report
summary=.gitlab-ci-local/artifacts/report/reports/summary.md
[ -f "$summary" ] || { echo "gitlab/local: the report job left no summary" >&2; exit 1; }
grep -q "^PASS" "$summary" || { echo "gitlab/local: the merged report did not pass" >&2; cat "$summary" >&2; exit 1; }
head -n 3 "$summary"
