#!/usr/bin/env bash
# The TCP rendezvous trusts no stranger (Note [what the rendezvous trusts]): while a 2-rank job
# started with torchrun's variables meets, a stranger (tests/scripts/rendezvous_stranger.py)
# connects and sends garbage, a forged hello (right shape, no proof), another job's proven
# hello, the right ids without the job's token, a length of 2^34; holds idle connections open, or
# opens a new one every 0.3 s. In every case the job finishes with the param_norm of an
# undisturbed run, and the stranger was refused. A second job on the same port fails with one
# line per process while the first meets, and runs on its own once the first has met (rank 0
# stops listening). Under srun's variables without MASTER_PORT, a squatter on the first derived
# port sends the job to the next one.
# Usage: test_rendezvous_trust.sh DPBENCH
set -uo pipefail
dpbench=${1:?usage: test_rendezvous_trust.sh DPBENCH}
here=$(cd "$(dirname "$0")" && pwd)
stranger_py=$here/rendezvous_stranger.py
# shellcheck source=tests/scripts/background_jobs.sh
source "$here/background_jobs.sh"
# shellcheck source=tests/scripts/result_checks.sh
source "$here/result_checks.sh"
# new_port: a port nobody listens on in $p, different for every job of this script.
p=$((20000 + RANDOM % 20000))
new_port() { p=$((p + 2)); }

run_id=trust-test
token=0123456789abcdef0123456789abcdef
# --collective_timeout below what idle strangers cost before (10 s each, one after another).
job=(--device=cpu --model=trivial --batch_size=8 --num_warmup_batches=1)
flags=("${job[@]}" --variable_update=distributed_all_reduce --num_batches=4 --collective_timeout=15)

# rank TAG R PORT COMMAND...: rank R of a 2-process job with torchrun's variables, in the
# background; output in $work/TAG.R.log, pid in $!. A command may begin with env NAME=VALUE to
# change a variable (DPBENCH_RENDEZVOUS_TOKEN= with nothing leaves the token unset).
rank() {
  local tag=$1 r=$2 p=$3
  shift 3
  if [ "${1:-}" = env ] && [ "${2:-}" = DPBENCH_RENDEZVOUS_TOKEN= ]; then shift 2; fi
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$p \
    TORCHELASTIC_RUN_ID=$run_id "$@" >"$work/$tag.$r.log" 2>&1 &
  pids+=($!)
}
# finished PID SECONDS: its exit code, 124 when it still ran (then killed).
finished() {
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
  if kill -0 "$1" 2>/dev/null; then
    kill -9 "$1"
    wait "$1" 2>/dev/null
    return 124
  fi
  wait "$1"
}
stop() { kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null; }
# stranger MODE PORT [IDENTITY [TOKEN]]: in the background once connected; its report in
# $work/MODE.stranger, its pid in $stranger.
stranger() {
  local mode=$1 p=$2
  shift 2
  rm -f "$work/$mode.stranger"
  python3 "$stranger_py" "$mode" "$p" "$work/$mode.stranger" "$@" 2>"$work/$mode.stranger.err" &
  stranger=$!
  pids+=("$stranger")
  for _ in $(seq 200); do
    grep -q connected "$work/$mode.stranger" 2>/dev/null && return
    sleep 0.1
  done
  fail "$mode: the stranger never connected: $(cat "$work/$mode.stranger.err")"
}
# job_succeeds TAG PID0 PID1 [NORM]: both ranks exit 0 (and the result has that param_norm).
job_succeeds() {
  local tag=$1 code0 code1
  finished "$2" 60
  code0=$?
  finished "$3" 60
  code1=$?
  if [ "$code0" != 0 ] || [ "$code1" != 0 ]; then
    fail "$tag: the job failed (exits $code0, $code1): $(tail -q -n 1 "$work/$tag".[01].log)"
    return 1
  fi
  [ -z "${4:-}" ] || [ "$(norm "$work/$tag.json")" = "$4" ] ||
    fail "$tag: param_norm $(norm "$work/$tag.json"), undisturbed $4"
}

# The undisturbed job.
new_port
rank plain 0 "$p" "$dpbench" "${flags[@]}" --result_file="$work/plain.json"
zero=$!
rank plain 1 "$p" "$dpbench" "${flags[@]}" --result_file="$work/plain.json"
job_succeeds plain "$zero" $! || finish ""
undisturbed=$(norm "$work/plain.json")

# A stranger at rank 0 before rank 1 arrives (the secret on both ranks where the stranger knows
# the ids but not the token).
disturbed() {  # mode, then the stranger's identity and token, then the job's token
  local mode=$1 identity=${2:-} stranger_token=${3:-} job_token=${4:-} zero
  new_port
  rank "$mode" 0 "$p" env DPBENCH_RENDEZVOUS_TOKEN="$job_token" "$dpbench" "${flags[@]}" --result_file="$work/$mode.json"
  zero=$!
  if [ -n "$identity" ]; then stranger "$mode" "$p" "$identity" "$stranger_token"; else stranger "$mode" "$p"; fi
  case $mode in forged | other-job | ids-without-token)
    for _ in $(seq 100); do grep -q -e answer -e closed "$work/$mode.stranger" && break; sleep 0.1; done
    grep -q "^answer 10$" "$work/$mode.stranger" ||
      fail "$mode: rank 0 did not refuse the stranger: $(cat "$work/$mode.stranger")" ;;
  esac
  rank "$mode" 1 "$p" env DPBENCH_RENDEZVOUS_TOKEN="$job_token" "$dpbench" "${flags[@]}" --result_file="$work/$mode.json"
  job_succeeds "$mode" "$zero" $! "$undisturbed"
  stop "$stranger"
}
disturbed garbage
disturbed huge
disturbed forged
disturbed other-job "torchrun run someone-else"
disturbed ids-without-token "torchrun run $run_id" "" "$token"
disturbed idle
disturbed trickle

# A second job on the port while the first meets: its rank 0 cannot listen, its rank 1 is refused
# by the first job's rank 0; one line each, no result, and the first job is untouched.
new_port
rank first 0 "$p" "$dpbench" "${flags[@]}" --result_file="$work/first.json"
first0=$!
stranger idle "$p"  # (waits until rank 0 listens)
stop "$stranger"
second=()
for r in 0 1; do
  rank second "$r" "$p" env TORCHELASTIC_RUN_ID=second-job "$dpbench" "${job[@]}" --num_batches=4 \
    --variable_update=distributed_all_reduce --collective_timeout=3 --result_file="$work/second.json"
  second+=($!)
done
for r in 0 1; do
  finished "${second[$r]}" 30
  code=$?
  { [ "$code" != 0 ] && [ "$code" != 124 ]; } || fail "second job, rank $r: exit $code"
  [ "$(grep -c . "$work/second.$r.log")" = 1 ] || fail "second job, rank $r: not one line: $(cat "$work/second.$r.log")"
done
grep -q "^dpbench: error: rendezvous: rank 0 cannot listen on port $p at 127.0.0.1 (Address already in use)" \
  "$work/second.0.log" || fail "second job, rank 0: $(cat "$work/second.0.log")"
grep -q "^dpbench: error: rendezvous: rank 1 could not reach rank 0 at 127.0.0.1:$p within 3 s (the rank 0 at 127.0.0.1:$p is not this job's" \
  "$work/second.1.log" || fail "second job, rank 1: $(cat "$work/second.1.log")"
[ ! -e "$work/second.json" ] || fail "second job: a result was written"
rank first 1 "$p" "$dpbench" "${flags[@]}" --result_file="$work/first.json"
job_succeeds first "$first0" $! "$undisturbed"

# Once a job has met, its port is free: a second job (the same ids even) runs on its own beside
# it. The first trains longer, as one process with two devices trains (test_launchers.sh).
long=("${job[@]}" --num_batches=60 --collective_timeout=15)
"$dpbench" "${long[@]}" --variable_update=replicated --num_gpus=2 --result_file="$work/long_one.json" \
  >"$work/long_one.log" 2>&1 || fail "long, one process: $(tail -n 1 "$work/long_one.log")"
new_port
rank long 0 "$p" "$dpbench" "${long[@]}" --variable_update=distributed_all_reduce --result_file="$work/long.json"
long0=$!
rank long 1 "$p" "$dpbench" "${long[@]}" --variable_update=distributed_all_reduce --result_file="$work/long.json"
long1=$!
for _ in $(seq 200); do grep -q "Running warm up" "$work/long.0.log" && break; sleep 0.1; done
rank beside 0 "$p" "$dpbench" "${flags[@]}" --result_file="$work/beside.json"
zero=$!
rank beside 1 "$p" "$dpbench" "${flags[@]}" --result_file="$work/beside.json"
one=$!
kill -0 "$long0" 2>/dev/null || echo "note: the first job ended before the second started (a fast machine)"
job_succeeds beside "$zero" "$one" "$undisturbed"
job_succeeds long "$long0" "$long1" "$(norm "$work/long_one.json")"

# srun's variables without MASTER_PORT: a squatter on the first port derived from the ids sends
# the job to the next candidate.
srun_rank() {  # tag, rank, command...
  local tag=$1 r=$2
  shift 2
  SLURM_JOB_ID=$job_id SLURM_STEP_ID=0 SLURM_PROCID=$r SLURM_STEP_NUM_TASKS=2 SLURM_LOCALID=$r \
    SLURM_STEP_NODELIST=localhost "$@" >"$work/$tag.$r.log" 2>&1 &
  pids+=($!)
}
job_id=$((100000 + RANDOM))
srun_rank probe 0 "$dpbench" "${flags[@]}" --result_file=
probe=$!
first_port=$(python3 "$stranger_py" listening-port "$probe")
stop "$probe"
if [ -n "$first_port" ]; then
  stranger squat "$first_port"
  srun_rank squatted 0 "$dpbench" "${flags[@]}" --result_file="$work/squatted.json"
  zero=$!
  srun_rank squatted 1 "$dpbench" "${flags[@]}" --result_file="$work/squatted.json"
  job_succeeds squatted "$zero" $! "$undisturbed"
  stop "$stranger"
else
  fail "srun: rank 0 listened on no port"
fi

finish "the rendezvous trusts no stranger"
