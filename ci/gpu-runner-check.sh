#!/usr/bin/env bash
# Checks, before anything is built, that a GPU CI job landed where its
# vendor's GPU and user space are visible, and fails with what is missing:
#
#   bash ci/gpu-runner-check.sh nvidia|amd
#
# On NVIDIA it also registers the driver's OpenCL library with the ICD
# loader when the container has the library but no registration.
set -euo pipefail
runner=${1:?usage: gpu-runner-check.sh nvidia|amd}
fail() {
  echo "gpu-runner-check: $1" >&2
  exit 1
}
has_lib() { ldconfig -p | grep -q "$1"; }

case $runner in
  nvidia)
    [ -e /dev/nvidiactl ] || fail "no /dev/nvidiactl: this job needs a runner tagged nvidia that passes its GPU to the container (NVIDIA container toolkit, gpus = \"all\" in the runner's config)"
    has_lib libcuda.so.1 || fail "libcuda.so.1 is not visible: the container toolkit must mount the driver (NVIDIA_DRIVER_CAPABILITIES=compute,utility)"
    has_lib libnvrtc || [ -n "$(find /usr/local/cuda*/ -name 'libnvrtc.so*' -print -quit 2>/dev/null)" ] \
      || fail "NVRTC is missing: use an image with the CUDA toolkit (nvidia/cuda:*-devel)"
    if has_lib libnvidia-opencl.so.1 && [ ! -e /etc/OpenCL/vendors/nvidia.icd ]; then
      if mkdir -p /etc/OpenCL/vendors 2>/dev/null && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd; then
        echo "gpu-runner-check: registered NVIDIA's OpenCL driver with the ICD loader"
      else
        echo "gpu-runner-check: note: NVIDIA's OpenCL driver is not registered (/etc/OpenCL/vendors is not writable); the opencl job will report it missing"
      fi
    fi
    ;;
  amd)
    [ -e /dev/kfd ] || fail "no /dev/kfd: this job needs a runner tagged amd that passes /dev/kfd and /dev/dri to the container"
    has_lib libamdhip64 || [ -e /opt/rocm/lib/libamdhip64.so ] || fail "libamdhip64 is missing: use a ROCm image (rocm/dev-ubuntu-*)"
    ;;
  *) fail "unknown runner kind '$runner' (nvidia or amd)" ;;
esac
echo "gpu-runner-check: $runner runner ready"
