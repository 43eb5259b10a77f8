# shellcheck shell=bash
# Sourced by the GPU scripts (from the repository root, .gpu/ carried):
# makes OpenCL find NVIDIA's driver, and, when $backends_for_env names hip,
# builds the HIP-on-NVIDIA harness and points ROCM_PATH at it.
# Sets $out (the output folder, logging to $out/$log_name.log) and $work
# (a scratch folder). Prints the machine first, for the log.
# Every script's output folder: $OUT, or /tmp/hetero-out; where the caller
# names $log_name, everything printed from here on also goes to
# $out/$log_name.log (scripts under experiments/ keep logs of their own).
out=${OUT:-/tmp/hetero-out}
mkdir -p "$out"
if [ -n "${log_name:-}" ]; then
  exec > >(tee -a "$out/$log_name.log") 2>&1
fi
echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
# OpenCL: unpack the ICD loader and register NVIDIA's driver with it.
work=$(mktemp -d)
for deb in .gpu/deb/*.deb; do dpkg -x "$deb" "$work/root"; done
export LD_LIBRARY_PATH="$work/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
driver=
for candidate in /usr/lib/libnvidia-opencl.so.1 /usr/local/nvidia/lib64/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1; do
  if [ -e "$candidate" ]; then driver=$candidate; break; fi
done
mkdir -p "$work/icd"
if [ -n "$driver" ]; then echo "$driver" > "$work/icd/nvidia.icd"; fi
export OCL_ICD_VENDORS="$work/icd"
# Only NVIDIA's driver: an image that lists others in OCL_ICD_FILENAMES
# (one listed PoCL first) would make "opencl" the CPU.
unset OCL_ICD_FILENAMES
echo "OpenCL driver: ${driver:-not found}"

# HIP: build the HIP-on-NVIDIA harness and point the hip backend at it.
case ",${backends_for_env:-}," in
  *,hip,*)
    bash ci/hip-nvidia/build.sh .gpu/hip "$work/rocm" && export ROCM_PATH="$work/rocm"
    ;;
esac

