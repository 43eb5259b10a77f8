#!/usr/bin/env bash
# The CUDA backend against a driver of the long-term branch clusters run:
# Debian 12's non-free libcuda1 (535, CUDA 12.2), and the HIP backend
# against ROCm 5.2's runtime (libamdhip64-5), downloaded, not installed (no
# GPU needed). Their exported names go to the library's tests
# `a_real_drivers_exports_cover_every_call` and
# `a_real_runtimes_exports_cover_every_call`, which fail when a backend may
# call an entry point the library lacks (CUDA: and has no fallback for). Nothing
# of the system's apt configuration is changed: the package lists live in a
# scratch folder.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/archives/partial"
echo "deb http://deb.debian.org/debian bookworm main non-free" > "$work/sources.list"
apt_options=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/none"
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives" -o APT::Sandbox::User=root)
apt-get "${apt_options[@]}" update -qq
(cd "$work" && apt-get "${apt_options[@]}" download -qq libcuda1 libamdhip64-5)
dpkg -x "$work"/libcuda1_*.deb "$work/root"
lib=$(find "$work/root" -name 'libcuda.so.*' -type f | head -n 1)
[ -n "$lib" ] || { echo "driver-symbols: no libcuda.so in the libcuda1 package" >&2; exit 1; }
echo "driver-symbols: $(basename "$lib")"
nm -D --defined-only "$lib" | awk '{print $NF}' > "$work/exports.txt"
HETERO_CUDA_DRIVER_EXPORTS="$work/exports.txt" \
  cargo test -q -p hetero --all-features --lib a_real_drivers_exports_cover_every_call -- --nocapture

dpkg -x "$work"/libamdhip64-5_*.deb "$work/rocm"
hip=$(find "$work/rocm" -name 'libamdhip64.so.5*' -type f | head -n 1)
[ -n "$hip" ] || { echo "driver-symbols: no libamdhip64.so.5 in the libamdhip64-5 package" >&2; exit 1; }
echo "driver-symbols: $(basename "$hip")"
# Exported names carry symbol versions (`hipMalloc@@hip_4.2`): stripped.
nm -D --defined-only "$hip" | awk '{print $NF}' | sed 's/@.*//' > "$work/hip-exports.txt"
HETERO_HIP_RUNTIME_EXPORTS="$work/hip-exports.txt" \
  cargo test -q -p hetero --all-features --lib a_real_runtimes_exports_cover_every_call -- --nocapture
