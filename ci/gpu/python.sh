#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# built .gpu/ (the wheel among it) and the device call carried it: hetero's
# Python package with PyTorch and CuPy.
#
#   bash ci/gpu/python.sh
#
# 1. The wheel installed (no network: --no-deps) into a folder of its own,
#    put on the path of the machine's Python, which has torch, CuPy, NumPy
#    and pytest (that Python is itself a virtual environment, whose
#    packages a `--system-site-packages` environment made from it would
#    not see); the package's NumPy tests run there.
# 2. ci/gpu/python_exchange.py: zero-copy exchange both ways with torch and
#    CuPy, no device synchronisation, host cost per exchange, and the
#    device time of scan and reduce on their arrays ($OUT/python.json).
# 3. The same two calls from Rust: the bench's algorithm rows at 2^28
#    elements on CUDA ($OUT/bench-algorithms.json).
set -uo pipefail
log_name=python
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
status=0
python3 -m pip install -q --no-deps --target "$work/site" .gpu/wheels/hetero-*.whl || status=1
export PYTHONPATH="$work/site"
echo "== NumPy tests"
(cd python/tests && timeout 300 python3 -m pytest -q -p no:cacheprovider .) || status=1
echo "== exchange with torch and CuPy"
timeout 400 python3 ci/gpu/python_exchange.py --json "$out/python.json" || status=1
echo "== the same calls from Rust (bench)"
timeout 300 .gpu/bin/bench --backend cuda --rounds 9 --enqueues 200 --thread-batches 0 --peer-bytes 4096 \
  --pull-repeats 1 --growth-groups 2 --graph-rounds 0 --algorithms-elements 268435456 \
  --json "$out/bench-algorithms.json" || status=1
echo "== status $status"
exit $status
