#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, with files of its own under a
# scratch folder (no system file is read or changed but the binaries), and
# the conformance matrix submitted to it exactly as the README tells users:
#
#   bash ci/slurm/local-cluster.sh [RUNNERS] [SBATCH OPTIONS...]
#   bash ci/slurm/local-cluster.sh cpu --cpus-per-task=1
#
# Needs slurm-wlm and munge (Debian 12: `apt-get install slurm-wlm munge`)
# and root (the daemons run as root here). It starts munged, slurmctld and
# slurmd on ports of its own, runs `ci/slurm/submit.sh RUNNERS OPTIONS...`,
# waits for every job, merges the reports into reports/summary.md and
# reports/merged.xml (reports/ must be empty or absent), and exits 0 only when every job completed and every
# merged check passed. A job that failed or was cancelled is listed in the
# summary with its state. The daemons are stopped on every exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
runners=${1:-cpu}
shift $(($# > 0 ? 1 : 0))
for tool in munged slurmctld slurmd sbatch squeue scontrol sinfo; do
  command -v "$tool" >/dev/null || { echo "local-cluster: $tool is missing: apt-get install slurm-wlm munge" >&2; exit 2; }
done

# The jobs write reports/ and everything there is merged: earlier reports
# would be merged too, and are not this script's to delete.
if [ -n "$(ls -A reports 2>/dev/null)" ]; then
  echo "local-cluster: reports/ is not empty; move it away first" >&2
  exit 2
fi

work=$(mktemp -d /tmp/hetero-slurm.XXXXXX)
chmod 755 "$work"
pids=()
step=setup
# shellcheck disable=SC2317 # called by the EXIT trap
stop() {
  local code=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  if [ "$code" -ne 0 ]; then
    echo "local-cluster: failed at: $step (exit $code); logs:" >&2
    tail -n 5 "$work"/*.log >&2 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap stop EXIT

step="munge key"
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge.key"
step="munged"
munged --force --key-file="$work/munge.key" --socket="$work/munge.socket" --pid-file="$work/munged.pid" \
  --log-file="$work/munged.log" --seed-file="$work/munged.seed"
pids+=("$(cat "$work/munged.pid")")

host=$(hostname -s)
cpus=$(nproc)
port=${HETERO_SLURM_PORT:-16817}
mkdir -p "$work/state" "$work/spool"
cat > "$work/slurm.conf" <<EOF
ClusterName=hetero-ci
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge.socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=3600
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$work/slurm.conf

step="slurmctld (port $port)"
slurmctld -f "$SLURM_CONF"
for _ in $(seq 50); do [ -s "$work/slurmctld.pid" ] && break; sleep 0.1; done
pids+=("$(cat "$work/slurmctld.pid")")
step="slurmd (port $((port + 1)))"
slurmd -f "$SLURM_CONF"
for _ in $(seq 50); do [ -s "$work/slurmd.pid" ] && break; sleep 0.1; done
pids+=("$(cat "$work/slurmd.pid")")
step="the node coming up"
for _ in $(seq 100); do
  state=$(sinfo -h -n "$host" -o %t 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || { echo "local-cluster: node $host is '$state', not idle" >&2; exit 1; }
echo "local-cluster: $host up, $cpus CPUs, partition cpu"

step="submit.sh $runners $*"
bash ci/slurm/submit.sh "$runners" "$@" | tee "$work/submitted.txt"
mapfile -t jobs < <(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' "$work/submitted.txt")
[ "${#jobs[@]}" -gt 0 ] || { echo "local-cluster: no job was submitted" >&2; exit 1; }

step="waiting for jobs ${jobs[*]}"
deadline=$((SECONDS + ${HETERO_SLURM_WAIT:-1800}))
while [ -n "$(squeue -h -j "$(IFS=,; echo "${jobs[*]}")" -t PENDING,RUNNING,CONFIGURING,COMPLETING 2>/dev/null)" ]; do
  [ $SECONDS -lt $deadline ] || { echo "local-cluster: jobs still running after the wait" >&2; exit 1; }
  sleep 2
done

step="merging the reports"
status=0
{
  echo "## Slurm jobs"
  echo
  echo "| job | name | state | exit |"
  echo "|---|---|---|---|"
  for job in "${jobs[@]}"; do
    info=$(scontrol show job -o "$job")
    state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<< "$info")
    code=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<< "$info")
    out=$(sed -n 's/.*StdOut=\([^ ]*\).*/\1/p' <<< "$info")
    echo "| $job | $(basename "$out" .out) | $state | $code |"
    [ "$state" = COMPLETED ] || status=1
  done
} > "$work/jobs.md"
cat "$work/jobs.md"
shopt -s nullglob
reports=(reports/*.json)
if [ "${#reports[@]}" -eq 0 ]; then
  echo "local-cluster: no job left a report" >&2
  cp "$work/jobs.md" reports/summary.md
  exit 1
fi
merged=0
cargo xtask report merge "${reports[@]}" --markdown "$work/merged.md" --junit reports/merged.xml || merged=$?
cat "$work/merged.md" "$work/jobs.md" > reports/summary.md
[ "$merged" -eq 0 ] || status=1
echo "local-cluster: ${#jobs[@]} jobs, ${#reports[@]} reports merged into reports/summary.md (exit $status)"
step="done"
exit $status
