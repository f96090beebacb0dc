#!/usr/bin/env bash
# Multi-process runs of the real dpbench under mpirun on the reference backend:
# distributed_all_reduce (and its horovod spelling) and distributed_replicated on 2 and 4 ranks
# train bit for bit what one process with as many devices trains with replicated and
# parameter_server, and fully_sharded (hybrid groups and fp16 loss scaling too) what replicated trains;
# one result from rank 0 (or one per rank with {rank}) with every rank's device in
# its breakdown; hierarchical all-reduce on two simulated hosts; a trace merged from every rank; ranks that disagree on flags, a rank that fails alone, and a rank that freezes
# (SIGSTOP) end the job with a message and no hang.
# Usage: test_mpi_runs.sh MPIEXEC DPBENCH
set -uo pipefail
mpiexec=${1:?usage: test_mpi_runs.sh MPIEXEC DPBENCH}
dpbench=${2:?dpbench binary}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/scripts/result_checks.sh
source "$(dirname "$0")/result_checks.sh"


small_rnnlm=(--model=rnnlm --vocab_size=50 --embedding_dim=8 --num_units=8 --seq_len=6 --batch_size=4)
common=(--device=cpu --num_batches=3 --num_warmup_batches=1)

compare() {  # ranks, distributed strategy, single-process strategy, model flags...
  local ranks=$1 distributed=$2 single=$3; shift 3
  local tag="${distributed}_${ranks}_$1"
  if ! timeout 120 "$mpiexec" -n "$ranks" "$dpbench" "${common[@]}" "$@" --variable_update="$distributed" \
      --result_file="$work/$tag.mpi.json" > "$work/$tag.mpi.log" 2>&1; then
    fail "$tag: mpirun failed: $(tail -n 3 "$work/$tag.mpi.log")"
    return
  fi
  "$dpbench" "${common[@]}" "$@" --num_gpus="$ranks" --variable_update="$single" \
    --result_file="$work/$tag.one.json" > "$work/$tag.one.log" 2>&1 || { fail "$tag: single process failed"; return; }
  local a b
  a=$(norm "$work/$tag.mpi.json"); b=$(norm "$work/$tag.one.json")
  [ "$a" = "$b" ] || fail "$tag: param_norm $a (mpirun) != $b ($single, one process)"
  [ "$(field "$work/$tag.mpi.json" 'd["summary"]["num_devices"]')" = "$ranks" ] || fail "$tag: num_devices"
  [ "$(field "$work/$tag.mpi.json" 'len(d["environment"]["devices"])')" = "$ranks" ] || fail "$tag: devices listed"
  [ "$(field "$work/$tag.mpi.json" 'd["summary"]["measured_steps"]')" = 3 ] || fail "$tag: measured steps"
  # The breakdown lists every rank's device, and the FLOPs count the job's devices.
  [ "$(field "$work/$tag.mpi.json" 'len(d["summary"]["breakdown"]["per_device"])')" = "$ranks" ] ||
    fail "$tag: breakdown devices"
  [ "$(field "$work/$tag.mpi.json" 'round(d["summary"]["flops"]["model_flops_per_step"] / d["summary"]["flops"]["model_flops_per_step_per_device"])')" = "$ranks" ] ||
    fail "$tag: FLOPs per step of the job"
  # Quiet ranks: one summary in the output.
  [ "$(grep -c '^total ' "$work/$tag.mpi.log")" = 1 ] || fail "$tag: expected one summary, from rank 0"
}

for ranks in 2 4; do
  compare "$ranks" distributed_all_reduce replicated --model=trivial --batch_size=8
  compare "$ranks" distributed_all_reduce replicated "${small_rnnlm[@]}"
  compare "$ranks" horovod replicated "${small_rnnlm[@]}" --compact_gradient_transfer=bf16 --sparse_embedding_grads
  compare "$ranks" distributed_replicated parameter_server "${small_rnnlm[@]}"
done

# fully_sharded under mpirun: the same bits as replicated in one process with as many devices
# (both reshard settings, and fp16 automatic loss scaling from a scale that overflows, with the
# same final scale); hybrid groups the same bits as one process's hybrid groups.
tiny_gpt=(--model=gpt --optimizer=sgd --learning_rate=0.1 --vocab_size=13 --seq_len=5 --num_layers=3 --num_heads=2
  --hidden_size=8 --batch_size=2 --deterministic)
auto_fp16=(--precision=fp16 --fp16_enable_auto_loss_scale --fp16_loss_scale=1048576)
one_process() {  # tag, devices, flags...: one process's result in $work/TAG.one.json
  local tag=$1 devices=$2
  shift 2
  [ -f "$work/$tag.one.json" ] && return 0
  "$dpbench" "${common[@]}" "${tiny_gpt[@]}" --num_gpus="$devices" "$@" --result_file="$work/$tag.one.json" \
    > "$work/$tag.one.log" 2>&1 || fail "$tag: one process failed: $(tail -n 2 "$work/$tag.one.log")"
}
sharded() {  # ranks, the one-process tag to equal, tag, fully_sharded flags...
  local ranks=$1 want=$2 tag=fully_sharded_$1_$3
  shift 3
  if ! timeout 120 "$mpiexec" -n "$ranks" "$dpbench" "${common[@]}" "${tiny_gpt[@]}" --variable_update=fully_sharded "$@" \
      --result_file="$work/$tag.mpi.json" > "$work/$tag.mpi.log" 2>&1; then
    fail "$tag: mpirun failed: $(tail -n 3 "$work/$tag.mpi.log")"
    return
  fi
  [ -f "$work/$want.one.json" ] || return
  [ "$(norm "$work/$tag.mpi.json")" = "$(norm "$work/$want.one.json")" ] ||
    fail "$tag: param_norm $(norm "$work/$tag.mpi.json") (mpirun) != $(norm "$work/$want.one.json") ($want, one process)"
  [ "$(field "$work/$tag.mpi.json" 'd["summary"]["final_loss_scale"]')" = "$(field "$work/$want.one.json" 'd["summary"]["final_loss_scale"]')" ] ||
    fail "$tag: final loss scale"
  [ "$(field "$work/$tag.mpi.json" 'd["summary"]["num_devices"]')" = "$ranks" ] || fail "$tag: num_devices"
  [ "$(field "$work/$tag.mpi.json" 'len(d["summary"]["breakdown"]["per_device"])')" = "$ranks" ] ||
    fail "$tag: breakdown devices"
  [ "$(grep -c '^total ' "$work/$tag.mpi.log")" = 1 ] || fail "$tag: expected one summary, from rank 0"
}
for ranks in 2 4; do
  one_process "replicated_$ranks" "$ranks" --variable_update=replicated
  sharded "$ranks" "replicated_$ranks" resharded
  sharded "$ranks" "replicated_$ranks" kept --reshard_after_forward=false
  one_process "replicated_fp16_$ranks" "$ranks" --variable_update=replicated "${auto_fp16[@]}"
  sharded "$ranks" "replicated_fp16_$ranks" fp16 "${auto_fp16[@]}"
done
one_process hybrid_4 4 --variable_update=fully_sharded --shard_group_size=2
sharded 4 hybrid_4 hybrid --shard_group_size=2
# Each rank's shard, slots and optimizer state, as one process's devices hold them.
held='[(m["at_peak"]["parameters"], m["at_peak"]["gradients"], m["at_peak"]["optimizer_state"]) for m in d["summary"]["memory"]["devices"]]'
if [ -f "$work/fully_sharded_4_hybrid.mpi.json" ] && [ -f "$work/hybrid_4.one.json" ]; then
  [ "$(field "$work/fully_sharded_4_hybrid.mpi.json" "$held")" = "$(field "$work/hybrid_4.one.json" "$held")" ] ||
    fail "hybrid fully_sharded under mpirun: the devices' memory differs from one process's"
fi

# Two hosts simulated on one machine (DPBENCH_HOST_NAME per application context), 2 ranks each:
# hierarchical all-reduce trains what one process with 4 devices trains, to rounding.
if timeout 120 "$mpiexec" -n 2 -x DPBENCH_HOST_NAME=hostA "$dpbench" "${common[@]}" "${small_rnnlm[@]}" \
    --variable_update=distributed_all_reduce --hierarchical_all_reduce --result_file="$work/hier.mpi.json" : \
    -n 2 -x DPBENCH_HOST_NAME=hostB "$dpbench" "${common[@]}" "${small_rnnlm[@]}" \
    --variable_update=distributed_all_reduce --hierarchical_all_reduce --result_file="$work/hier.mpi.json" \
    > "$work/hier.mpi.log" 2>&1 &&
   "$dpbench" "${common[@]}" "${small_rnnlm[@]}" --num_gpus=4 --variable_update=replicated \
    --result_file="$work/hier.one.json" > "$work/hier.one.log" 2>&1; then
  close_to "$(norm "$work/hier.mpi.json")" "$(norm "$work/hier.one.json")" ||
    fail "hierarchical on two simulated hosts: param_norm $(norm "$work/hier.mpi.json") != $(norm "$work/hier.one.json")"
  [ "$(field "$work/hier.mpi.json" 'd["environment"]["hostname"]')" = hostA,hostB ] || fail "hierarchical: the hosts"
else
  fail "hierarchical on two simulated hosts: $(tail -n 3 "$work/hier.mpi.log")"
fi

# Real data: every rank reads its shard of each global batch (CIFAR-format files written here).
python3 - "$work/cifar" <<'PY'
import os, random, sys
random.seed(3)
os.makedirs(sys.argv[1], exist_ok=True)
for i in range(1, 6):
    with open(os.path.join(sys.argv[1], f"data_batch_{i}.bin"), "wb") as f:
        for _ in range(6):
            f.write(bytes([random.randrange(10)] + [random.randrange(256) for _ in range(3072)]))
PY
for ranks in 2 4; do
  tag=cifar_$ranks
  data=(--model=trivial --data_dir="$work/cifar" --batch_size=2 --num_epochs=2 --timed_epochs=1 --device=cpu)
  if timeout 120 "$mpiexec" -n "$ranks" "$dpbench" "${data[@]}" --variable_update=distributed_all_reduce \
      --result_file="$work/$tag.mpi.json" > "$work/$tag.mpi.log" 2>&1 &&
     "$dpbench" "${data[@]}" --num_gpus="$ranks" --variable_update=replicated \
      --result_file="$work/$tag.one.json" > "$work/$tag.one.log" 2>&1; then
    [ "$(norm "$work/$tag.mpi.json")" = "$(norm "$work/$tag.one.json")" ] || fail "$tag: param_norm differs"
    [ "$(field "$work/$tag.mpi.json" 'd["steps"][0]["items"]')" = $((2 * ranks)) ] || fail "$tag: items per step"
    [ "$(field "$work/$tag.mpi.json" 'len(d["summary"]["data"]["epochs"])')" = 2 ] || fail "$tag: epochs"
  else
    fail "$tag: run failed: $(tail -n 2 "$work/$tag.mpi.log")"
  fi
done

# One result per rank when the name asks for it; none but rank 0's otherwise.
if timeout 60 "$mpiexec" -n 2 "$dpbench" "${common[@]}" --variable_update=distributed_all_reduce \
    --result_file="$work/per_rank_{rank}.json" > "$work/per_rank.log" 2>&1; then
  for rank in 0 1; do
    [ -f "$work/per_rank_$rank.json" ] || fail "per-rank result of rank $rank missing"
  done
else
  fail "per-rank run failed: $(tail -n 2 "$work/per_rank.log")"
fi

# --trace_file under mpirun: one timeline with every rank (rank 0 merges them, each rank's clock
# aligned to its own), whose exchanges overlap backward on each rank's communication stream and
# whose spans lie inside their step.
check_trace() {  # trace file, ranks
  python3 - "$1" "$2" <<'PY'
import json, sys
trace, ranks = json.load(open(sys.argv[1])), int(sys.argv[2])
events = trace["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
assert sorted(names) == list(range(ranks)), names
for pid, name in names.items():
    assert name.startswith(f"rank {pid} ("), name
    threads = {e["args"]["name"]: e["tid"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == pid}
    compute, comm = threads["compute stream"], threads["communication stream"]
    spans = [e for e in events if e["ph"] == "X" and e["pid"] == pid]
    steps = {e["args"]["run_step"]: e for e in spans if e["cat"] == "step"}
    assert steps, f"rank {pid}: no steps"
    for run_step, step in steps.items():
        mine = [e for e in spans if e["args"]["run_step"] == run_step and e["tid"] in (compute, comm)]
        for e in mine:
            assert step["ts"] - 20 <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 20, (pid, e["name"])
        backward = next(e for e in mine if e["name"] == "backward")
        exchanges = sorted((e for e in mine if e["tid"] == comm and e["name"].startswith("exchange ")),
                           key=lambda e: e["ts"])
        assert exchanges, f"rank {pid} step {run_step}: no exchange"
        first = exchanges[0]
        assert first["ts"] < backward["ts"] + backward["dur"] and backward["ts"] < first["ts"] + first["dur"], \
            f"rank {pid} step {run_step}: the first exchange does not overlap backward"
PY
}
small_nmt=(--model=nmt --batch_size=4 --src_vocab_size=300 --tgt_vocab_size=300 --embedding_dim=16 --num_units=16
           --src_max_len=6 --tgt_max_len=5 --bucket_cap_mb=0)
for strategy in distributed_all_reduce distributed_replicated; do
  for model in resnet50 nmt; do
    tag=trace_${strategy}_$model
    if [ "$model" = nmt ]; then flags=("${small_nmt[@]}"); else flags=(--model=resnet50 --data_name=cifar10 --batch_size=1); fi
    if timeout 120 "$mpiexec" -n 2 "$dpbench" "${common[@]}" "${flags[@]}" --variable_update="$strategy" \
        --result_file= --trace_file="$work/$tag.trace.json" > "$work/$tag.log" 2>&1; then
      check_trace "$work/$tag.trace.json" 2 || fail "$tag: the merged trace is wrong"
      [ "$(grep -c '^Trace written to' "$work/$tag.log")" = 1 ] || fail "$tag: expected one 'Trace written' line"
    else
      fail "$tag: run failed: $(tail -n 3 "$work/$tag.log")"
    fi
  done
done

# Ranks that disagree on a flag: every rank stops with the flag named, nothing written.
timeout 60 "$mpiexec" -n 1 "$dpbench" "${common[@]}" --variable_update=distributed_all_reduce --seed=1 \
  --result_file="$work/mismatch.json" : -n 1 "$dpbench" "${common[@]}" --variable_update=distributed_all_reduce \
  --seed=2 --result_file="$work/mismatch.json" > "$work/mismatch.log" 2>&1
code=$?
{ [ "$code" != 0 ] && [ "$code" != 124 ]; } || fail "flag mismatch: exit $code"
grep -q "the ranks disagree on the resolved flags" "$work/mismatch.log" || fail "flag mismatch: no message"
grep -q "seed" "$work/mismatch.log" || fail "flag mismatch: the differing flag is not named"
[ ! -e "$work/mismatch.json" ] || fail "flag mismatch: a result was written"

# A rank that fails alone (its data directory is missing) while the other already waits in the
# start-up collective ends the job; the other does not hang.
timeout 60 "$mpiexec" -n 1 "$dpbench" "${common[@]}" --variable_update=distributed_all_reduce \
  --result_file="$work/alone.json" : -n 1 "$dpbench" "${common[@]}" \
  --variable_update=distributed_all_reduce --data_dir="$work/nowhere" --result_file="$work/alone.json" \
  > "$work/alone.log" 2>&1
code=$?
{ [ "$code" != 0 ] && [ "$code" != 124 ]; } || fail "one failing rank: exit $code (124: the job hung)"
grep -q "rank 1 of 2" "$work/alone.log" || fail "one failing rank: the message does not name the rank"
[ ! -e "$work/alone.json" ] || fail "one failing rank: a result was written"

# Ranks that end or freeze mid-run: finding the process of a rank.
descendants() {  # every process below pid $1
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    echo "$child"
    descendants "$child"
  done
}
rank_pid() {  # the dpbench process of rank $2 below pid $1
  local pid
  for pid in $(descendants "$1"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$pid"
      return
    fi
  done
}
wait_for_rank_pid() {  # job, rank: its pid once it runs (10 s at most); empty if never
  local pid=""
  for _ in $(seq 100); do
    pid=$(rank_pid "$1" "$2")
    [ -n "$pid" ] && break
    sleep 0.1
  done
  echo "$pid"
}
# A rank killed mid-run (SIGKILL): mpirun ends the job, naming the rank; nobody hangs.
"$mpiexec" -n 2 "$dpbench" --device=cpu --model=trivial --num_batches=1000000 --num_warmup_batches=0 \
  --display_every=1000 --variable_update=distributed_all_reduce --result_file= > "$work/killed.log" 2>&1 &
job=$!
victim=$(wait_for_rank_pid "$job" 1)
if [ -z "$victim" ]; then
  fail "killed rank: rank 1's process was not found"
  kill -9 "$job" 2>/dev/null
else
  sleep 2
  kill -9 "$victim"
  for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2>/dev/null; then
    fail "killed rank: the job still runs 30 s after rank 1 was killed"
    kill -9 "$job" 2>/dev/null
  fi
  if wait "$job"; then fail "killed rank: exit 0"; fi
  grep -qiE "rank 1|process 1" "$work/killed.log" || fail "killed rank: nothing names rank 1: $(tail -n 3 "$work/killed.log")"
fi

# A rank that freezes (SIGSTOP) mid-run: after --collective_timeout the job ends with one line
# naming the frozen rank and its host, and no result.
"$mpiexec" -n 2 "$dpbench" --device=cpu --model=trivial --num_batches=1000000 --num_warmup_batches=0 \
  --display_every=1000 --variable_update=distributed_all_reduce --collective_timeout=3 \
  --result_file="$work/frozen.json" > "$work/frozen.log" 2>&1 &
job=$!
frozen=$(wait_for_rank_pid "$job" 1)
if [ -z "$frozen" ]; then
  fail "frozen rank: rank 1's process was not found"
  kill -9 "$job" 2>/dev/null
else
  sleep 2  # let it train past start-up
  kill -STOP "$frozen"
  stopped_at=$SECONDS
  for _ in $(seq 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2>/dev/null; then
    fail "frozen rank: the job still runs $((SECONDS - stopped_at)) s after rank 1 froze (timeout 3 s)"
    kill -CONT "$frozen" 2>/dev/null
    kill -9 "$job" "$frozen" 2>/dev/null
  fi
  wait "$job" 2>/dev/null
  code=$?
  kill -CONT "$frozen" 2>/dev/null
  kill -9 "$frozen" 2>/dev/null
  [ "$code" != 0 ] || fail "frozen rank: exit 0"
  grep -q "rank 1 ($(hostname)) stopped answering" "$work/frozen.log" ||
    fail "frozen rank: no line names rank 1 and its host: $(grep -v '^\s*$' "$work/frozen.log" | tail -n 3)"
  grep -q "no progress for 3 s (--collective_timeout)" "$work/frozen.log" || fail "frozen rank: the timeout is not named"
  lines=$(grep -c "stopped answering" "$work/frozen.log")
  [ "$lines" = 1 ] || fail "frozen rank: $lines lines name the frozen rank, expected one"
  [ ! -e "$work/frozen.json" ] || fail "frozen rank: a result was written"
fi

finish "all MPI runs agree"
