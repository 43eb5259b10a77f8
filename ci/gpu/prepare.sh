#!/usr/bin/env bash
# Builds what the GPU machine runs and fetches what it lacks, into .gpu/
# (ignored by git; the device call carries it). The GPU machine has no Rust
# and no network, so everything is prepared here.
#
#   ci/gpu/prepare.sh && <device run, carrying .gpu> bash ci/gpu/run.sh BACKENDS SIZES
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.gpu
rm -rf "$out"
mkdir -p "$out/bin" "$out/deb"

cargo build --release --all-features -p conformance --bin conform --bin stress --bin report
cp target/release/conform target/release/stress target/release/report "$out/bin/"
# Per-operation cost, hetero against the vendor APIs (ci/gpu/bench.sh).
cargo build --release --all-features -p bench
cp target/release/bench "$out/bin/"
# A step-by-step smoke test that shows where a new machine fails or hangs.
cargo build --release --all-features -p hetero --example probe
cp target/release/examples/probe "$out/bin/"

# A crate's own kernels on every device (examples/custom-kernel).
cargo build --release -p custom-kernel
cp target/release/custom-kernel "$out/bin/"
# Peer copies and cross-device waits between every pair of devices
# (examples/multi-device).
cargo build --release -p multi-device
cp target/release/multi-device "$out/bin/"

# Test binaries: the API semantics tests (the same bodies CI runs on host
# and PoCL) and the sticky-fault test (its own process).
for test in api sticky_fault dialect collectives strict_float sorting; do
  cargo test --release --all-features -p hetero --test "$test" --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$test" \
    | xargs -I{} cp {} "$out/bin/test-$test"
done

# The Python package's wheel (ci/gpu/python.sh installs it there).
python3 -m venv "$out/maturin" && "$out/maturin/bin/pip" install -q "maturin>=1.9,<2"
(cd python && "../$out/maturin/bin/maturin" build --release --strip --out "../$out/wheels" --target-dir ../target)
rm -rf "$out/maturin"

# An OpenCL ICD loader: the GPU machine has NVIDIA's OpenCL driver but no loader.
(cd "$out/deb" && apt-get download -q ocl-icd-libopencl1 >/dev/null)

# What the HIP-on-NVIDIA harness builds against (ci/hip-nvidia/).
cargo xtask hip-inputs "$out/hip"

# Symbols are not needed there; the carried folder must stay small.
strip "$out"/bin/*
du -sh "$out"

ls -l "$out/bin" "$out/deb"
