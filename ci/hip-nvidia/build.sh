#!/usr/bin/env bash
# Builds the HIP-on-NVIDIA harness on a machine with an NVIDIA driver and
# CUDA 12+ (for libnvrtc), from the inputs `cargo xtask hip-inputs` fetched:
#
#   bash ci/hip-nvidia/build.sh INPUTS OUT_DIR
#   export ROCM_PATH=OUT_DIR      # the hip backend then loads OUT_DIR/lib/lib{amdhip64,hiprtc}.so
#
# INPUTS holds HIP 5.2.3's headers (include/hip), CUDA 11.8 headers
# (include/) and libcudart.so.11.0 (lib/).
set -euo pipefail
inputs=$(cd "$1" && pwd)
out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/lib"

# Find a library in the ldconfig cache, LD_LIBRARY_PATH or the usual driver folders.
find_lib() {
  local hit
  hit=$(ldconfig -p | awk -v n="$1" '$1 == n {print $NF; exit}')
  if [ -z "$hit" ]; then
    for d in ${LD_LIBRARY_PATH//:/ } /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/local/cuda/targets/x86_64-linux/lib; do
      [ -e "$d/$1" ] && { hit="$d/$1"; break; }
    done
  fi
  echo "$hit"
}
cuda=$(find_lib libcuda.so.1)
nvrtc=$(find_lib libnvrtc.so)
[ -n "$nvrtc" ] || nvrtc=$(find_lib libnvrtc.so.13)
if [ -z "$cuda" ] || [ -z "$nvrtc" ]; then
  echo "build.sh: need libcuda.so.1 and libnvrtc.so (found: '${cuda}' '${nvrtc}')" >&2
  exit 2
fi
driver_dir=$(dirname "$cuda")

# Every hetero_<name> wrapper becomes the exported HIP name.
read -ra defsyms <<< "$(grep -o 'hetero_hip[A-Za-z0-9_]*' "$here/wrapper.cpp" | sort -u | sed 's/^hetero_\(.*\)$/-Wl,--defsym=\1=hetero_\1/' | tr '\n' ' ')"

g++ -std=c++17 -O2 -fPIC -shared -w -D__HIP_PLATFORM_NVIDIA__ \
  -I"$inputs/include" "$here/wrapper.cpp" -o "$out/lib/libamdhip64.so" \
  "${defsyms[@]}" \
  -L"$inputs/lib" -l:libcudart.so.11.0 -Wl,-rpath,"$inputs/lib" \
  -L"$driver_dir" -l:libcuda.so.1 -Wl,-rpath,"$driver_dir" \
  "$nvrtc"
cp "$out/lib/libamdhip64.so" "$out/lib/libhiprtc.so"
echo "harness: $out/lib/libamdhip64.so and libhiprtc.so ($(nm -D --defined-only "$out/lib/libamdhip64.so" | grep -c ' hip') HIP symbols)"
