#!/usr/bin/env bash
# dpbench started the ways clusters start jobs, without MPI, on the reference backend: processes
# given torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and srun's
# (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, ...) meet at rank 0 and train bit for bit
# what one process with as many devices trains; the result names the launcher; two hosts simulated
# on one machine (DPBENCH_HOST_NAME), flat and hierarchical all-reduce; a merged trace;
# ranks that disagree on flags, a rank that never arrives, a failing rank, a rank killed mid-run
# (rank 0 or another) and a frozen one each end the job with one line and no hang; fully_sharded
# across processes (hybrid groups and fp16 loss scaling too) as replicated in one; comm_bench
# across processes, recording the link its ranks spanned. With PyTorch installed,
# also under the real torchrun (python3 -m torch.distributed.run --no-python).
# Usage: test_launchers.sh DPBENCH
set -uo pipefail
dpbench=${1:?usage: test_launchers.sh DPBENCH}
# shellcheck source=tests/scripts/background_jobs.sh
source "$(dirname "$0")/background_jobs.sh"
# shellcheck source=tests/scripts/result_checks.sh
source "$(dirname "$0")/result_checks.sh"
# A port nobody listens on, different for every job of this script (counted in a file: port runs
# in a subshell, $(port)).
echo $((20000 + RANDOM % 20000)) >"$work/port"
port() {
  local next
  next=$(($(cat "$work/port") + 2))
  echo "$next" >"$work/port"
  echo "$next"
}

common=(--device=cpu --num_batches=3 --num_warmup_batches=1)
small_rnnlm=(--model=rnnlm --vocab_size=50 --embedding_dim=8 --num_units=8 --seq_len=6 --batch_size=4)

# start_ranks LAUNCHER RANKS PORT TAG FLAGS...: every rank in the background with the launcher's
# variables, its output in $work/TAG.R.log; the pids in launched[].
start_ranks() {
  local launcher=$1 ranks=$2 port=$3 tag=$4 r
  shift 4
  launched=()
  for ((r = 0; r < ranks; r++)); do
    if [ "$launcher" = torchrun ]; then
      RANK=$r WORLD_SIZE=$ranks LOCAL_RANK=$r LOCAL_WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        "$dpbench" "$@" > "$work/$tag.$r.log" 2>&1 &
    else
      SLURM_JOB_ID=77 SLURM_STEP_ID=0 SLURM_PROCID=$r SLURM_STEP_NUM_TASKS=$ranks SLURM_NTASKS=$ranks SLURM_LOCALID=$r \
        SLURM_STEP_NODELIST=localhost MASTER_PORT=$port "$dpbench" "$@" > "$work/$tag.$r.log" 2>&1 &
    fi
    launched+=($!)
    pids+=($!)
  done
}
# wait_ranks SECONDS: waits for launched[]; 0 when every rank exited 0; 124 when one still ran.
wait_ranks() {
  local deadline=$((SECONDS + $1)) pid status=0 code
  for pid in "${launched[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      kill -9 "$pid" 2>/dev/null
      status=124
    fi
    wait "$pid"
    code=$?
    [ "$status" = 0 ] && [ "$code" != 0 ] && status=$code
  done
  return "$status"
}

# Same training as one process with as many devices, under both launchers' variables.
compare() {  # launcher, ranks, distributed strategy, single-process strategy, model flags...
  local launcher=$1 ranks=$2 distributed=$3 single=$4
  shift 4
  local tag="${launcher}_${distributed}_${ranks}_$1"
  start_ranks "$launcher" "$ranks" "$(port)" "$tag" "${common[@]}" "$@" --variable_update="$distributed" \
    --result_file="$work/$tag.json"
  if ! wait_ranks 120; then
    fail "$tag: the job failed: $(tail -n 2 "$work/$tag.0.log")"
    return
  fi
  "$dpbench" "${common[@]}" "$@" --num_gpus="$ranks" --variable_update="$single" \
    --result_file="$work/$tag.one.json" > "$work/$tag.one.log" 2>&1 || { fail "$tag: single process failed"; return; }
  local a b
  a=$(norm "$work/$tag.json")
  b=$(norm "$work/$tag.one.json")
  [ "$a" = "$b" ] || fail "$tag: param_norm $a ($launcher) != $b ($single, one process)"
  [ "$(field "$work/$tag.json" 'd["environment"]["launcher"]')" = "$launcher" ] || fail "$tag: environment.launcher"
  [ "$(field "$work/$tag.json" 'd["summary"]["num_devices"]')" = "$ranks" ] || fail "$tag: num_devices"
  [ "$(cat "$work/$tag".[0-9]*.log | grep -c '^total ')" = 1 ] || fail "$tag: expected one summary, from rank 0"
}

for launcher in torchrun srun; do
  for ranks in 2 4; do
    compare "$launcher" "$ranks" distributed_all_reduce replicated --model=trivial --batch_size=8
    compare "$launcher" "$ranks" distributed_replicated parameter_server "${small_rnnlm[@]}"
  done
done
compare torchrun 2 horovod replicated "${small_rnnlm[@]}" --compact_gradient_transfer=bf16 --sparse_embedding_grads

# fully_sharded across processes (shard and replica groups of ranks): the same bits as replicated
# in one process with as many devices, both reshard settings; hybrid groups the same bits as one
# process's hybrid groups (a mean of means: replicated's to rounding); fp16 automatic loss
# scaling, from a scale that overflows, the same bits and the same final scale as replicated.
tiny_gpt=(--model=gpt --optimizer=sgd --learning_rate=0.1 --vocab_size=13 --seq_len=5 --num_layers=3 --num_heads=2
  --hidden_size=8 --batch_size=2 --deterministic)
one_process() {  # tag, devices, flags...: one process's result in $work/TAG.json
  local tag=$1 devices=$2
  shift 2
  [ -f "$work/$tag.json" ] && return 0
  "$dpbench" "${common[@]}" "${tiny_gpt[@]}" --num_gpus="$devices" "$@" --result_file="$work/$tag.json" \
    > "$work/$tag.log" 2>&1 || fail "$tag: one process failed: $(tail -n 2 "$work/$tag.log")"
}
sharded() {  # launcher, ranks, the one-process result to equal, tag, fully_sharded flags...
  local launcher=$1 ranks=$2 want=$3 tag="${1}_fully_sharded_$2_$4"
  shift 4
  start_ranks "$launcher" "$ranks" "$(port)" "$tag" "${common[@]}" "${tiny_gpt[@]}" --variable_update=fully_sharded \
    "$@" --result_file="$work/$tag.json"
  if ! wait_ranks 120; then
    fail "$tag: the job failed: $(tail -q -n 2 "$work/$tag".[0-9]*.log)"
    return
  fi
  [ -f "$work/$want.json" ] || return
  [ "$(norm "$work/$tag.json")" = "$(norm "$work/$want.json")" ] ||
    fail "$tag: param_norm $(norm "$work/$tag.json") != $(norm "$work/$want.json") ($want, one process)"
  [ "$(field "$work/$tag.json" 'd["summary"]["final_loss_scale"]')" = "$(field "$work/$want.json" 'd["summary"]["final_loss_scale"]')" ] ||
    fail "$tag: final loss scale"
  [ "$(field "$work/$tag.json" 'd["summary"]["num_devices"]')" = "$ranks" ] || fail "$tag: num_devices"
  [ "$(field "$work/$tag.json" 'd["config"]["variable_update"]')" = fully_sharded ] || fail "$tag: the strategy"
  [ "$(field "$work/$tag.json" 'd["summary"]["comm"]["units"] > 0 and d["summary"]["comm"]["bytes_per_step"] > 0')" = True ] ||
    fail "$tag: summary.comm"
  [ "$(field "$work/$tag.json" 'len(d["summary"]["breakdown"]["per_device"])')" = "$ranks" ] || fail "$tag: breakdown devices"
}
auto_fp16=(--precision=fp16 --fp16_enable_auto_loss_scale --fp16_loss_scale=1048576)
for ranks in 2 4; do
  one_process "replicated_$ranks" "$ranks" --variable_update=replicated
  sharded torchrun "$ranks" "replicated_$ranks" resharded
  sharded srun "$ranks" "replicated_$ranks" kept --reshard_after_forward=false
  one_process "replicated_fp16_$ranks" "$ranks" --variable_update=replicated "${auto_fp16[@]}"
  sharded torchrun "$ranks" "replicated_fp16_$ranks" fp16 "${auto_fp16[@]}"
done
one_process hybrid_4 4 --variable_update=fully_sharded --shard_group_size=2
sharded torchrun 4 hybrid_4 hybrid --shard_group_size=2
if [ -f "$work/torchrun_fully_sharded_4_hybrid.json" ]; then
  close_to "$(norm "$work/torchrun_fully_sharded_4_hybrid.json")" "$(norm "$work/replicated_4.json")" ||
    fail "hybrid fully_sharded across processes: param_norm not replicated's to rounding"
  # Each rank's shard, slots and optimizer state, as one process's devices hold them.
  held='[(m["at_peak"]["parameters"], m["at_peak"]["gradients"], m["at_peak"]["optimizer_state"]) for m in d["summary"]["memory"]["devices"]]'
  [ "$(field "$work/torchrun_fully_sharded_4_hybrid.json" "$held")" = "$(field "$work/hybrid_4.json" "$held")" ] ||
    fail "hybrid fully_sharded across processes: the devices' memory differs from one process's"
fi

# Two hosts simulated on one machine (DPBENCH_HOST_NAME), 2 ranks each: the flat and the
# hierarchical all-reduce train the same model as one process with 4 devices (to rounding: the
# hierarchy sums in another order), and the result names both hosts.
two_hosts() {  # tag, flags...
  local tag=$1 p r host
  shift
  p=$(port)
  launched=()
  for r in 0 1 2 3; do
    host=hostA
    ((r >= 2)) && host=hostB
    DPBENCH_HOST_NAME=$host RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$p "$dpbench" "${common[@]}" "$@" --result_file="$work/$tag.json" > "$work/$tag.$r.log" 2>&1 &
    launched+=($!)
    pids+=($!)
  done
  wait_ranks 120 || fail "$tag: the job failed: $(tail -n 2 "$work/$tag.0.log")"
}
for model in trivial rnnlm; do
  if [ "$model" = trivial ]; then flags=(--model=trivial --batch_size=8); else flags=("${small_rnnlm[@]}"); fi
  two_hosts "flat_$model" "${flags[@]}" --variable_update=distributed_all_reduce
  two_hosts "hierarchical_$model" "${flags[@]}" --variable_update=distributed_all_reduce --hierarchical_all_reduce
  "$dpbench" "${common[@]}" "${flags[@]}" --num_gpus=4 --variable_update=replicated \
    --result_file="$work/one_$model.json" > "$work/one_$model.log" 2>&1 || fail "$model: one process failed"
  one=$(norm "$work/one_$model.json")
  for tag in "flat_$model" "hierarchical_$model"; do
    [ -f "$work/$tag.json" ] || continue
    got=$(norm "$work/$tag.json")
    close_to "$got" "$one" || fail "$tag: param_norm $got, one process $one"
    [ "$(field "$work/$tag.json" 'd["environment"]["hostname"]')" = hostA,hostB ] || fail "$tag: the hosts"
  done
  [ -f "$work/hierarchical_$model.json" ] &&
    { [ "$(field "$work/hierarchical_$model.json" '(d["summary"]["comm"]["hierarchy"]["hosts"], d["summary"]["comm"]["hierarchy"]["ranks_per_host"])')" = "(2, 2)" ] ||
      fail "hierarchical_$model: summary.comm.hierarchy"; }
done
# comm_bench across processes: one rank per process, one table (rank 0's), and the JSON says which
# link the ranks spanned: intra_host on one host, inter_host on two (simulated) hosts.
comm_bench_job() {  # tag, host of rank 1 (rank 0's is hostA), flags...
  local tag=$1 second_host=$2 p r host local_rank
  shift 2
  p=$(port)
  launched=()
  for r in 0 1; do
    host=hostA local_rank=$r
    ((r == 1)) && host=$second_host
    [ "$host" != hostA ] && local_rank=0
    DPBENCH_HOST_NAME=$host RANK=$r WORLD_SIZE=2 LOCAL_RANK=$local_rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$p \
      "$dpbench" comm_bench --device=cpu --min_bytes=1K --max_bytes=64K --iters=3 --warmup_iters=1 "$@" \
      > "$work/$tag.$r.log" 2>&1 &
    launched+=($!)
    pids+=($!)
  done
  wait_ranks 60
}
for hosts in 1 2; do
  second_host=hostA expected_link=intra_host expected_hosts=hostA
  [ "$hosts" = 2 ] && second_host=hostB expected_link=inter_host expected_hosts=hostA,hostB
  tag=comm_bench_hosts$hosts
  if ! comm_bench_job "$tag" "$second_host" --json "$work/$tag.json"; then
    fail "$tag: the job failed: $(tail -q -n 2 "$work/$tag".*.log)"
    continue
  fi
  [ "$(field "$work/$tag.json" '(d["ranks"], d["hosts"], d["link"], d["environment"]["hostname"], d["environment"]["launcher"])')" = \
    "(2, $hosts, '$expected_link', '$expected_hosts', 'torchrun')" ] ||
    fail "$tag: ranks, hosts, link, hostname, launcher: $(field "$work/$tag.json" '(d.get("ranks"), d.get("hosts"), d.get("link"), d["environment"])')"
  [ "$(cat "$work/$tag".[01].log | grep -c '^# Avg bus bandwidth')" = 1 ] || fail "$tag: expected one table, from rank 0"
done
comm_bench_job comm_bench_devices hostA --num_gpus=2
code=$?
{ [ "$code" != 0 ] && [ "$code" != 124 ]; } || fail "comm_bench --num_gpus=2 under torchrun: exit $code"
grep -q "^dpbench: error: rank [01] of 2 (hostA): --num_gpus=2: under torchrun each process is one rank with one device" "$work"/comm_bench_devices.*.log ||
  fail "comm_bench --num_gpus=2 under torchrun: $(tail -q -n 1 "$work"/comm_bench_devices.*.log)"

# Hosts of unequal rank counts: refused with one line.
p=$(port)
launched=()
for r in 0 1 2; do
  host=hostA
  ((r == 2)) && host=hostB
  DPBENCH_HOST_NAME=$host RANK=$r WORLD_SIZE=3 LOCAL_RANK=$((r % 2)) MASTER_ADDR=127.0.0.1 MASTER_PORT=$p "$dpbench" \
    "${common[@]}" --variable_update=distributed_all_reduce --hierarchical_all_reduce --result_file= \
    > "$work/uneven.$r.log" 2>&1 &
  launched+=($!)
  pids+=($!)
done
wait_ranks 60
code=$?
{ [ "$code" != 0 ] && [ "$code" != 124 ]; } || fail "unequal hosts: exit $code"
grep -q "needs as many ranks on every host, and hostA runs 2 while hostB runs 1" "$work"/uneven.*.log ||
  fail "unequal hosts: $(tail -q -n 1 "$work"/uneven.*.log)"

# A trace of a torchrun job: one file, every rank's process.
start_ranks torchrun 2 "$(port)" trace "${common[@]}" --model=trivial --batch_size=8 \
  --variable_update=distributed_all_reduce --result_file= --trace_file="$work/trace.json"
if wait_ranks 60; then
  [ "$(field "$work/trace.json" 'len({e["pid"] for e in d["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"})')" = 2 ] ||
    fail "trace: expected a process per rank"
else
  fail "trace: the job failed: $(tail -n 2 "$work/trace.0.log")"
fi

# Ranks that disagree on a flag: every rank stops naming it, nothing written.
p=$(port)
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$p "$dpbench" "${common[@]}" --seed=1 \
  --variable_update=distributed_all_reduce --result_file="$work/mismatch.json" > "$work/mismatch.0.log" 2>&1 &
first=$!
RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$p "$dpbench" "${common[@]}" --seed=2 \
  --variable_update=distributed_all_reduce --result_file="$work/mismatch.json" > "$work/mismatch.1.log" 2>&1 &
second=$!
pids+=("$first" "$second")
launched=("$first" "$second")
wait_ranks 60
code=$?
{ [ "$code" != 0 ] && [ "$code" != 124 ]; } || fail "flag mismatch: exit $code"
grep -q "the ranks disagree on the resolved flags.*seed" "$work"/mismatch.*.log || fail "flag mismatch: no line names --seed"
[ ! -e "$work/mismatch.json" ] || fail "flag mismatch: a result was written"

# A rank that never arrives: the others give up after --collective_timeout with one line.
start_ranks torchrun 1 "$(port)" alone0 "${common[@]}" --collective_timeout=2 --result_file=
# (a job of one process: no rendezvous at all; now one of two)
wait_ranks 30 || fail "a one-process torchrun job failed: $(tail -n 2 "$work/alone0.0.log")"
p=$(port)
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$p timeout 30 "$dpbench" "${common[@]}" \
  --collective_timeout=2 --result_file= > "$work/missing.log" 2>&1
code=$?
{ [ "$code" != 0 ] && [ "$code" != 124 ]; } || fail "a missing rank: rank 0 exit $code"
grep -q "rank 1 of 2 did not arrive within 2 s" "$work/missing.log" || fail "a missing rank: $(tail -n 1 "$work/missing.log")"
RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$p timeout 30 "$dpbench" "${common[@]}" \
  --collective_timeout=2 --result_file= > "$work/no_root.log" 2>&1
code=$?
{ [ "$code" != 0 ] && [ "$code" != 124 ]; } || fail "no rank 0: exit $code"
grep -q "could not reach rank 0 at 127.0.0.1:$p within 2 s" "$work/no_root.log" || fail "no rank 0: $(tail -n 1 "$work/no_root.log")"

# A rank that fails alone (a missing data directory) ends the job; the other does not hang.
p=$(port)
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$p "$dpbench" "${common[@]}" \
  --variable_update=distributed_all_reduce --result_file="$work/fails.json" > "$work/fails.0.log" 2>&1 &
first=$!
RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$p "$dpbench" "${common[@]}" \
  --variable_update=distributed_all_reduce --data_dir="$work/nowhere" --result_file="$work/fails.json" \
  > "$work/fails.1.log" 2>&1 &
second=$!
pids+=("$first" "$second")
launched=("$first" "$second")
wait_ranks 60
code=$?
{ [ "$code" != 0 ] && [ "$code" != 124 ]; } || fail "a failing rank: exit $code (124: the job hung)"
[ ! -e "$work/fails.json" ] || fail "a failing rank: a result was written"

# A rank killed mid-run (SIGKILL: it says nothing): the job ends with one line naming it.
for victim in 1 0; do
  start_ranks torchrun 2 "$(port)" "killed$victim" --device=cpu --model=trivial --num_batches=1000000 \
    --num_warmup_batches=0 --display_every=100000 --variable_update=distributed_all_reduce --result_file=
  sleep 3
  kill -9 "${launched[$victim]}"
  wait_ranks 30
  code=$?
  [ "$code" != 124 ] || fail "killed rank $victim: the job still ran 30 s later"
  lines=$(cat "$work/killed$victim".*.log | grep -c "rank $victim ($(hostname)) ended without finishing")
  [ "$lines" = 1 ] || fail "killed rank $victim: $lines lines name it, expected one: $(tail -q -n 1 "$work/killed$victim".*.log)"
done

# A rank that freezes (SIGSTOP): after --collective_timeout rank 0 names it in one line.
start_ranks torchrun 2 "$(port)" frozen --device=cpu --model=trivial --num_batches=1000000 --num_warmup_batches=0 \
  --display_every=100000 --variable_update=distributed_all_reduce --collective_timeout=3 --result_file=
sleep 3
kill -STOP "${launched[1]}"
deadline=$((SECONDS + 40))
while kill -0 "${launched[0]}" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
kill -0 "${launched[0]}" 2>/dev/null && fail "frozen rank: rank 0 still runs 40 s after rank 1 froze (timeout 3 s)"
kill -9 "${launched[@]}" 2>/dev/null
grep -q "rank 1 ($(hostname)) stopped answering" "$work/frozen.0.log" ||
  fail "frozen rank: no line names rank 1: $(tail -n 2 "$work/frozen.0.log")"

# The real torchrun, where PyTorch is installed.
if python3 -c "import torch.distributed.run" 2>/dev/null; then
  if timeout 120 python3 -m torch.distributed.run --nproc_per_node=2 --master_port="$(port)" --no-python \
      "$dpbench" "${common[@]}" --model=trivial --batch_size=8 --variable_update=distributed_all_reduce \
      --result_file="$work/real_torchrun.json" > "$work/real_torchrun.log" 2>&1; then
    [ "$(field "$work/real_torchrun.json" 'd["environment"]["launcher"]')" = torchrun ] || fail "real torchrun: launcher"
  else
    fail "real torchrun: $(tail -n 3 "$work/real_torchrun.log")"
  fi
else
  echo "skip: the real torchrun (PyTorch is not installed here)"
fi

finish "every launcher agrees"
