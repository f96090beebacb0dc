# shellcheck shell=bash
# shellcheck disable=SC2154  # $work, $dpbench, $limit, quick and the helpers are the harness's
# Fault cases (sourced by tests/scripts/fault_injection.sh, whose helpers and $work they use):
# launcher variables that cannot describe a job (Note [variables that cannot describe a job]) are
# refused with one line naming the variable and exit 2, values quoted escaped; variables that
# describe one process run it alone; and at the rendezvous, ranks whose variables contradict each
# other, a rank of another job, and a busy port each end with one line per process, nothing written.

distributed=("${quick[@]}" --variable_update=distributed_all_reduce)
torchrun_job=(RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500)
srun_job=(SLURM_JOB_ID=77 SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_STEP_NUM_TASKS=2 SLURM_LOCALID=1
  SLURM_STEP_NODELIST=localhost)

# compose BASE... -- CHANGES...: BASE's NAME=VALUE words changed by CHANGES (NAME=VALUE sets,
# -u NAME removes), in composed[].
compose() {
  local -A chosen=()
  local order=() name
  while [ "$1" != -- ]; do
    name=${1%%=*}
    chosen[$name]=${1#*=}
    order+=("$name")
    shift
  done
  shift
  while [ $# -gt 0 ]; do
    if [ "$1" = -u ]; then
      unset "chosen[$2]"
      shift 2
      continue
    fi
    name=${1%%=*}
    [ -n "${chosen[$name]+set}" ] || order+=("$name")
    chosen[$name]=${1#*=}
    shift
  done
  composed=()
  for name in "${order[@]}"; do
    [ -z "${chosen[$name]+set}" ] || composed+=("$name=${chosen[$name]}")
  done
}
# refuse_variables NAME WORDS VARIABLES... -- ARGS...: dpbench with exactly these launcher
# variables exits 2 with one line holding WORDS, and writes nothing.
refuse_variables() {
  local name=$1 words=$2 variables=()
  shift 2
  while [ "$1" != -- ]; do
    variables+=("$1")
    shift
  done
  shift
  rm -f "$work/new.json"
  attempt "$name" 2 env "${variables[@]}" "$dpbench" "$@" --result_file="$work/new.json" || return
  if [ -e "$work/new.json" ]; then verdict "$name" lost "a result was written by a refused run"; return; fi
  grep -qF -- "$words" "$work/err" || { verdict "$name" mishandled "the line lacks '$words': $(head -c 300 "$work/err")"; return; }
  verdict "$name" handled
}
torchrun_refused() {  # name, words, changes to torchrun's variables...
  local name=$1 words=$2
  shift 2
  compose "${torchrun_job[@]}" -- "$@"
  refuse_variables "torchrun: $name" "$words" "${composed[@]}" -- "${distributed[@]}"
}
srun_refused() {  # name, words, changes to srun's variables...
  local name=$1 words=$2
  shift 2
  compose "${srun_job[@]}" -- "$@"
  refuse_variables "srun: $name" "$words" "${composed[@]}" -- "${distributed[@]}"
}

# ---- torchrun's variables ----
torchrun_refused "MASTER_ADDR unset" "MASTER_ADDR is unset, and torchrun sets it" -u MASTER_ADDR
torchrun_refused "MASTER_ADDR empty" "MASTER_ADDR is empty" MASTER_ADDR=
torchrun_refused "RANK empty" "RANK is empty" RANK=
torchrun_refused "RANK without WORLD_SIZE" "WORLD_SIZE is unset" -u WORLD_SIZE
torchrun_refused "WORLD_SIZE=0" "WORLD_SIZE=0: not a process count or index" WORLD_SIZE=0 RANK=0 LOCAL_RANK=0
torchrun_refused "WORLD_SIZE=-1" "WORLD_SIZE=-1: not a process count" WORLD_SIZE=-1
torchrun_refused "WORLD_SIZE=two" "WORLD_SIZE=two: not a process count" WORLD_SIZE=two
torchrun_refused "WORLD_SIZE past 2^64" "WORLD_SIZE=99999999999999999999: not a process count" \
  WORLD_SIZE=99999999999999999999
torchrun_refused "RANK=2 of 2" "RANK=2 is not below WORLD_SIZE=2" RANK=2
torchrun_refused "RANK=-1" "RANK=-1: not a process count or index" RANK=-1
torchrun_refused "RANK=1.5" "RANK=1.5: not a process count or index" RANK=1.5
torchrun_refused "LOCAL_RANK unset" "LOCAL_RANK is unset" -u LOCAL_RANK
torchrun_refused "LOCAL_RANK at LOCAL_WORLD_SIZE" "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2" LOCAL_RANK=2
torchrun_refused "LOCAL_RANK past the world" "LOCAL_RANK=5 is not below WORLD_SIZE=2" LOCAL_RANK=5 -u LOCAL_WORLD_SIZE
torchrun_refused "LOCAL_WORLD_SIZE above WORLD_SIZE" "LOCAL_WORLD_SIZE=3 is above WORLD_SIZE=2" LOCAL_WORLD_SIZE=3
torchrun_refused "LOCAL_WORLD_SIZE empty" "LOCAL_WORLD_SIZE is empty" LOCAL_WORLD_SIZE=
torchrun_refused "MASTER_PORT unset" "MASTER_PORT is unset" -u MASTER_PORT
torchrun_refused "MASTER_PORT=0" "MASTER_PORT=0: not a port (1 to 65535)" MASTER_PORT=0
torchrun_refused "MASTER_PORT=65536" "MASTER_PORT=65536: not a port (1 to 65535)" MASTER_PORT=65536
torchrun_refused "MASTER_PORT=http" "MASTER_PORT=http: not a port" MASTER_PORT=http
torchrun_refused "MASTER_PORT=65535 with the agent's store" "MASTER_PORT=65535 leaves no port after torchrun's agent store" \
  MASTER_PORT=65535 TORCHELASTIC_USE_AGENT_STORE=True
torchrun_refused "MASTER_ADDR with a space" 'MASTER_ADDR="n1 n2": not a host name or address' "MASTER_ADDR=n1 n2"
torchrun_refused "MASTER_ADDR with escape bytes" 'MASTER_ADDR="n1\x1B[2J": not a host name' "MASTER_ADDR=n1$(printf '\033')[2J"
torchrun_refused "RANK with escape bytes" 'RANK=\x1B]0;x\x07: not a process count' "RANK=$(printf '\033]0;x\007')"
torchrun_refused "token empty" "DPBENCH_RENDEZVOUS_TOKEN holds 0 bytes" DPBENCH_RENDEZVOUS_TOKEN=
torchrun_refused "token too short" "DPBENCH_RENDEZVOUS_TOKEN holds 6 bytes; give every rank the same secret" \
  DPBENCH_RENDEZVOUS_TOKEN=secret
refuse_variables "torchrun: --rendezvous_port=abc" "--rendezvous_port" "${torchrun_job[@]}" -- "${distributed[@]}" \
  --rendezvous_port=abc
refuse_variables "torchrun: --rendezvous_port=65536" "--rendezvous_port" "${torchrun_job[@]}" -- "${distributed[@]}" \
  --rendezvous_port=65536

# ---- srun's variables ----
srun_refused "a task without SLURM_STEP_ID" "SLURM_STEP_ID is unset, and srun sets it" -u SLURM_STEP_ID
srun_refused "SLURM_STEP_NUM_TASKS=0" "SLURM_STEP_NUM_TASKS=0: not a process count" SLURM_STEP_NUM_TASKS=0 SLURM_PROCID=0 \
  SLURM_LOCALID=0
srun_refused "SLURM_STEP_NUM_TASKS empty" "SLURM_STEP_NUM_TASKS is empty" SLURM_STEP_NUM_TASKS=
srun_refused "a task past 0 without a task count" "SLURM_STEP_NUM_TASKS is unset" -u SLURM_STEP_NUM_TASKS
srun_refused "SLURM_PROCID=2 of 2" "SLURM_PROCID=2 is not below SLURM_STEP_NUM_TASKS=2" SLURM_PROCID=2
srun_refused "SLURM_PROCID=x" "SLURM_PROCID=x: not a process count or index" SLURM_PROCID=x
srun_refused "SLURM_JOB_ID unset" "SLURM_JOB_ID is unset" -u SLURM_JOB_ID
srun_refused "SLURM_LOCALID unset" "SLURM_LOCALID is unset" -u SLURM_LOCALID
srun_refused "SLURM_LOCALID=3 of 2" "SLURM_LOCALID=3 is not below SLURM_STEP_NUM_TASKS=2" SLURM_LOCALID=3
srun_refused "a host list with an open bracket" 'SLURM_STEP_NODELIST="node[": not a Slurm host list' \
  "SLURM_STEP_NODELIST=node["
grep -q nodenode "$work/err" && verdict "srun: node[ garbled" mishandled "the list was garbled: $(cat "$work/err")"
srun_refused "a host list's range backwards" "the range 5-3 runs backwards" "SLURM_STEP_NODELIST=node[5-3]"
srun_refused "a host list with an empty host" "an empty host" SLURM_STEP_NODELIST=a,,b
srun_refused "a host list with escape bytes" 'SLURM_STEP_NODELIST="gpu\x1B[2J"' "SLURM_STEP_NODELIST=gpu$(printf '\033')[2J"
srun_refused "no host list and no MASTER_ADDR" "SLURM_STEP_NODELIST is unset" -u SLURM_STEP_NODELIST
srun_refused "SLURM_NODELIST malformed" 'SLURM_NODELIST="n[1-": not a Slurm host list' -u SLURM_STEP_NODELIST \
  "SLURM_NODELIST=n[1-"
srun_refused "MASTER_PORT=70000" "MASTER_PORT=70000: not a port" MASTER_PORT=70000

# ---- variables of one process: it runs alone, recorded as launched by nobody ----
launched_by_nobody() {
  python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["environment"]["launcher"] == "none" else 1)' \
    "$work/alone.json" 2>/dev/null
}
for alone in "RANK=0 WORLD_SIZE=1" "RANK=0" "SLURM_JOB_ID=7 SLURM_PROCID=0 SLURM_NTASKS=4"; do
  rm -f "$work/alone.json"
  # shellcheck disable=SC2086  # the words are the variables
  attempt "one process: $alone" 0 env $alone "$dpbench" "${quick[@]}" --result_file="$work/alone.json" &&
    settle "one process: $alone" mishandled "no result, or not recorded as launcher none" launched_by_nobody
done

# ---- at the rendezvous: the two ranks of a job, or of two ----
fault_port=$((40000 + RANDOM % 10000))
# pair CHANGES0... -- CHANGES1...: ranks 0 and 1 of a 2-process job with torchrun's variables on a
# port of their own, each with its changes; their exits in pair_codes[], stderr in $work/pair.R.
pair() {
  local r changes0=() changes1=()
  while [ "$1" != -- ]; do
    changes0+=("$1")
    shift
  done
  shift
  changes1=("$@")
  fault_port=$((fault_port + 2))
  pair_pids=()
  for r in 0 1; do
    if [ "$r" = 0 ]; then compose "${torchrun_job[@]}" -- RANK=0 LOCAL_RANK=0 "${changes0[@]}"
    else compose "${torchrun_job[@]}" -- "${changes1[@]}"; fi
    env "${composed[@]}" MASTER_PORT=$fault_port timeout -k 5 "$limit" "$dpbench" "${distributed[@]}" \
      --collective_timeout=3 --result_file="$work/pair.json" >/dev/null 2>"$work/pair.$r" </dev/null &
    pair_pids+=($!)
  done
  pair_codes=()
  for r in 0 1; do
    wait "${pair_pids[$r]}"
    pair_codes+=($?)
  done
}
# pair_ended NAME CODE0 CODE1 WORDS0 WORDS1: the exits, one line each holding the words, nothing
# written.
pair_ended() {
  local name=$1 r
  local codes=("$2" "$3") words=("$4" "$5")
  for r in 0 1; do
    if ((pair_codes[r] == 124 || pair_codes[r] == 137)); then verdict "$name" hung "rank $r ran past $limit s"; return; fi
    if ((pair_codes[r] != codes[r])); then
      verdict "$name" mishandled "rank $r: exit ${pair_codes[$r]}, expected ${codes[$r]}: $(head -c 300 "$work/pair.$r")"
      return
    fi
    if [ "$(grep -c . "$work/pair.$r")" != 1 ] || ! grep -qF -- "${words[$r]}" "$work/pair.$r"; then
      verdict "$name" mishandled "rank $r: not one line with '${words[$r]}': $(head -c 300 "$work/pair.$r")"
      return
    fi
  done
  if [ -e "$work/pair.json" ]; then
    verdict "$name" lost "a result was written"
    rm -f "$work/pair.json"
    return
  fi
  verdict "$name" handled
}
same_local="ranks 0 and 1 both say they are local rank 0 of host"
pair -- LOCAL_RANK=0
pair_ended "rendezvous: two ranks of a host with one local rank" 2 2 "$same_local" "$same_local"
other_world="rank 1 was started for 3 processes, rank 0 for 2; start every rank with the same WORLD_SIZE"
pair -- WORLD_SIZE=3 LOCAL_WORLD_SIZE=3
pair_ended "rendezvous: world sizes that differ" 2 2 "$other_world" "$other_world"
refused_rank="did not prove to be this job's were closed"
pair TORCHELASTIC_RUN_ID=a -- TORCHELASTIC_RUN_ID=b
pair_ended "rendezvous: a rank of another job" 1 1 "$refused_rank" "is not this job's: another job's"
pair DPBENCH_RENDEZVOUS_TOKEN=0123456789abcdef --
pair_ended "rendezvous: a rank without the token" 1 1 "$refused_rank" \
  "or one given other TORCHELASTIC_RUN_ID or DPBENCH_RENDEZVOUS_TOKEN"
pair DPBENCH_RENDEZVOUS_TOKEN=0123456789abcdef -- DPBENCH_RENDEZVOUS_TOKEN=fedcba9876543210
pair_ended "rendezvous: ranks given different tokens" 1 1 "$refused_rank" "is not this job's"
compose "${torchrun_job[@]}" -- RANK=0 LOCAL_RANK=0 MASTER_ADDR=192.0.2.1
refuse_variables "rendezvous: MASTER_ADDR no address of rank 0's host" "): it is no address of this host" \
  "${composed[@]}" -- "${distributed[@]}"
compose "${torchrun_job[@]}" -- RANK=0 LOCAL_RANK=0 "DPBENCH_HOST_NAME=a$(printf '\033')[2J"
refuse_variables "rendezvous: rank 0's host name with escape bytes" 'this host'"'"'s name "a\x1B[2J" (DPBENCH_HOST_NAME' \
  "${composed[@]}" -- "${distributed[@]}"
# A port another program holds: rank 0 cannot listen there, and rank 1 finds no rank 0 that answers.
python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(60)' \
  "$((fault_port + 2))" &
squatter=$!
sleep 0.5
pair --
kill "$squatter" 2>/dev/null
wait "$squatter" 2>/dev/null
pair_ended "rendezvous: a port already taken" 1 1 "rank 0 cannot listen on port" "could not reach rank 0"
