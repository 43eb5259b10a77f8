#!/usr/bin/env bash
# The Python package as a user gets it: a wheel built with maturin (the
# stable ABI, Python 3.9 on), installed with NumPy into a fresh virtual
# environment, and its tests run there on the host backend.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! python3 -m venv "$work/build"; then
  apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  python3 -m venv "$work/build"
fi
"$work/build/bin/pip" install -q "maturin>=1.9,<2"
# The workspace's target directory and dev profile: the dependencies the
# test suite built are reused.
(cd python && "$work/build/bin/maturin" build --profile dev --out "$work/wheels" --target-dir ../target)

python3 -m venv "$work/test"
"$work/test/bin/pip" install -q "$work"/wheels/hetero-*.whl numpy pytest
# From the tests' folder, so `import hetero` finds the installed wheel.
(cd python/tests && "$work/test/bin/python" -m pytest -q -p no:cacheprovider .)
