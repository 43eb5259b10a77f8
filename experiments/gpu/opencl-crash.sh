#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/prepare.sh
# prepared .gpu/ here and the device call carried it:
#
#   bash experiments/gpu/opencl-crash.sh [STRESS...]   # default .gpu/bin/stress
#
# Why `stress --mix algorithms` died of SIGSEGV on NVIDIA's OpenCL:
# 1. opencl-subbuf.c: raw OpenCL, every case it knows (the sequences that
#    found the trigger: sub-buffers released oldest first, where a later
#    one overlapping an earlier one was made after the earlier one ran a
#    kernel);
# 2. each STRESS binary with --mix algorithms on one thread and stream under
#    several stack limits (a driver thread's default stack is the soft
#    limit: a fault that moves with it is a stack exhausted), its exit
#    status and run time;
# 3. the same with segv-trace.so preloaded (an alternate signal stack on
#    every thread, a backtrace of the faulting one).
# Everything printed goes to $OUT/opencl-crash.log.
set -uo pipefail
log_name=opencl-crash
backends_for_env=opencl
# shellcheck source=ci/gpu/env.sh
source ci/gpu/env.sh
stresses=("$@")
[ ${#stresses[@]} -eq 0 ] && stresses=(.gpu/bin/stress)
cl=$work/root/usr/lib/x86_64-linux-gnu/libOpenCL.so.1
gcc -O2 -Wno-unused-function experiments/gpu/opencl-subbuf.c -o "$work/opencl-subbuf" "$cl"
gcc -O2 -shared -fPIC experiments/gpu/segv-trace.c -o "$work/segv-trace.so" -ldl -lpthread

echo "== opencl-subbuf (raw OpenCL)"
timeout 60 "$work/opencl-subbuf"
timeout 60 "$work/opencl-subbuf" seq:c1,u1,f,c2,u2,f,r1,r2,R seq:c1,u1,f,c2,u2,f,r2,r1,R seq:c1,c2,u1,u2,f,r1,r2,R \
  seq:c3,u3,f,c4,u4,f,r3,r4,R seq:c3,u3,f,c5,u5,f,r3,r5,R

args=(--seconds 4 --backend opencl --mix algorithms --threads 1 --streams 1)
for stress in "${stresses[@]}"; do
  for limit in 1024 8192 65536 1048576; do
    start=$EPOCHREALTIME
    (ulimit -s "$limit" && timeout 30 "$stress" "${args[@]}" >"$work/stress.txt" 2>&1)
    code=$?
    printf '== %s %s, ulimit -s %s: exit %s after %.1f s\n' "$stress" "${args[*]}" "$limit" "$code" \
      "$(awk "BEGIN { print $EPOCHREALTIME - $start }")"
    tail -n 2 "$work/stress.txt"
  done
  echo "== $stress ${args[*]}, segv-trace.so preloaded"
  LD_PRELOAD=$work/segv-trace.so timeout 30 "$stress" "${args[@]}" 2>&1 | tail -n 40
  echo "exit ${PIPESTATUS[0]}"
done
