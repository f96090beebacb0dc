#!/usr/bin/env bash
# dpbench under a real Slurm: a one-node cluster (Debian's munge and slurm-wlm: munged, slurmctld
# and slurmd, their state in a temporary folder) is started here, then `srun -n 2|4 --mpi=none`
# (the ranks meet at rank 0 without MPI) and `srun --mpi=pmix` (through MPI) run the distributed
# strategies on the reference backend: each trains bit for bit what one process with as many
# devices trains, the result names srun; a task killed mid-run ends the job with one line.
# Usage: test_slurm.sh DPBENCH   (exit 77, skipped: Slurm or munge missing, or not root)
set -uo pipefail
dpbench=${1:?usage: test_slurm.sh DPBENCH}
dpbench=$(realpath "$dpbench")
for tool in munged slurmctld slurmd srun sinfo; do
  command -v "$tool" >/dev/null || { echo "skip: $tool is not installed (apt-get install slurm-wlm munge)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "skip: the one-node cluster runs its daemons as root"; exit 77; }

work=$(mktemp -d)
daemons=()
cleanup() {
  for pid in "${daemons[@]}"; do kill "$pid" 2>/dev/null; done
  [ -f "$work/munge/munged.pid" ] && kill "$(cat "$work/munge/munged.pid")" 2>/dev/null
  sleep 1
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=tests/scripts/result_checks.sh
source "$(dirname "$0")/result_checks.sh"

# munge: a key of our own and a socket in the work folder (its daemon refuses to run as root
# without --force).
mkdir -p "$work/munge" "$work/state" "$work/spool"
chmod 700 "$work/munge"
dd if=/dev/urandom bs=1 count=1024 of="$work/munge/munge.key" 2>/dev/null
chmod 400 "$work/munge/munge.key"
munged --force --key-file="$work/munge/munge.key" --socket="$work/munge/munge.socket" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" --seed-file="$work/munge/seed" ||
  { echo "FAIL: munged did not start: $(tail -n 3 "$work/munge/munged.log")"; exit 1; }

node=$(hostname -s)
port=$((26000 + RANDOM % 10000))
cat >"$work/slurm.conf" <<EOF
ClusterName=dpbenchtest
SlurmctldHost=$node
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$node CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
export SLURM_CONF=$work/slurm.conf
slurmctld -D >"$work/slurmctld.out" 2>&1 &
daemons+=($!)
slurmd -D >"$work/slurmd.out" 2>&1 &
daemons+=($!)
for _ in $(seq 60); do
  sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix)' && break
  sleep 0.5
done
sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix)' ||
  { echo "FAIL: the one-node cluster did not come up: $(tail -n 3 "$work/slurmctld.log" "$work/slurmd.log" 2>&1)"; exit 1; }

common=(--device=cpu --num_batches=3 --num_warmup_batches=1)
small_rnnlm=(--model=rnnlm --vocab_size=50 --embedding_dim=8 --num_units=8 --seq_len=6 --batch_size=4)
compare() {  # tasks, srun's --mpi, distributed strategy, single-process strategy, model flags...
  local tasks=$1 mpi=$2 distributed=$3 single=$4
  shift 4
  local tag="${mpi}_${distributed}_${tasks}"
  # --overcommit: more tasks than the machine's CPUs (CI has two).
  if ! timeout 120 srun --overcommit -n "$tasks" --mpi="$mpi" "$dpbench" "${common[@]}" "$@" --variable_update="$distributed" \
      --result_file="$work/$tag.json" >"$work/$tag.log" 2>&1; then
    fail "$tag: srun failed: $(tail -n 3 "$work/$tag.log")"
    return
  fi
  "$dpbench" "${common[@]}" "$@" --num_gpus="$tasks" --variable_update="$single" --result_file="$work/$tag.one.json" \
    >/dev/null 2>&1 || { fail "$tag: one process failed"; return; }
  local a b
  a=$(norm "$work/$tag.json")
  b=$(norm "$work/$tag.one.json")
  [ "$a" = "$b" ] || fail "$tag: param_norm $a (srun) != $b ($single, one process)"
  [ "$(field "$work/$tag.json" 'd["environment"]["launcher"]')" = srun ] || fail "$tag: environment.launcher"
  [ "$(field "$work/$tag.json" 'd["summary"]["num_devices"]')" = "$tasks" ] || fail "$tag: num_devices"
}
for tasks in 2 4; do
  compare "$tasks" none distributed_all_reduce replicated --model=trivial --batch_size=8
  compare "$tasks" none distributed_replicated parameter_server "${small_rnnlm[@]}"
done
if srun --mpi=list 2>&1 | grep -q pmix; then
  compare 2 pmix distributed_all_reduce replicated "${small_rnnlm[@]}"
else
  echo "skip: srun --mpi=pmix (this Slurm has no PMIx plugin)"
fi

# A task killed mid-run: the job ends with one line naming it.
srun --overcommit -n 2 --mpi=none "$dpbench" --device=cpu --model=trivial --num_batches=1000000 --num_warmup_batches=0 \
  --display_every=100000 --variable_update=distributed_all_reduce --result_file= --seed=4711 >"$work/killed.log" 2>&1 &
job=$!
victim=""
for _ in $(seq 100); do
  for pid in $(pgrep -f -- "--seed=4711" || true); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "SLURM_PROCID=1" && victim=$pid
  done
  [ -n "$victim" ] && break
  sleep 0.1
done
if [ -z "$victim" ]; then
  fail "killed task: task 1 was not found"
  kill "$job" 2>/dev/null
else
  sleep 2
  kill -9 "$victim"
  for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2>/dev/null; then
    fail "killed task: the job still runs 30 s later"
    kill -9 "$job" 2>/dev/null
  fi
  if wait "$job"; then fail "killed task: srun exited 0"; fi
  [ "$(grep -c "rank 1 ($(hostname)) ended without finishing" "$work/killed.log")" = 1 ] ||
    fail "killed task: expected one line naming rank 1: $(tail -n 3 "$work/killed.log")"
fi

finish "srun agrees"
