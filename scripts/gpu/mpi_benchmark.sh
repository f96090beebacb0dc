#!/usr/bin/env bash
# One process per GPU against one process for all GPUs: for each workload, ROUNDS
# interleaved rounds of `dpbench --num_gpus=N --variable_update=replicated` (NCCL) and
# `mpirun -np N dpbench --variable_update=distributed_all_reduce`, plus one
# distributed_replicated run; prints median throughput, the ratio and whether param_norm agrees.
# First, checks that must pass before anything is timed: a short mpirun run of `trivial` trains
# what one process trains, ranks that disagree on a flag stop, and a rank that fails at start-up
# or is killed mid-run ends the job (no hang in a collective). Then the PyTorch DDP twins (torchrun,
# one process per GPU, the same shapes; TWINS=0 skips them). Last, with --deterministic (cuDNN's
# deterministic algorithms, the ordered embedding scatter-add), each workload twice in one process
# and once under mpirun: param_norm must come out bit for bit the same (TIMING=0 runs only the
# checks and this).
# WORKLOADS="resnet50 nmt" (the default) picks workloads; EXTRA_FLAGS go to every timed dpbench run
# (e.g. --cudnn_benchmark=false: the same convolution algorithms in every run, so the comparison
# sees the launch and not the run-to-run luck of the algorithm search).
# Usage: scripts/gpu/mpi_benchmark.sh OUT_DIR [N] [ROUNDS]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: mpi_benchmark.sh OUT_DIR [N] [ROUNDS]}
n=${2:-4}
rounds=${3:-3}
mkdir -p "$out"
# shellcheck source=scripts/gpu/env.sh
source scripts/gpu/env.sh build/dpbench >/dev/null
export NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Each rank inherits the environment (one host); -x passes the NCCL and library settings on anyway.
mpirun_cmd=(mpirun -np "$n" --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
steps=(--num_batches="${NUM_BATCHES:-40}" --num_warmup_batches="${NUM_WARMUP:-10}" --display_every=1000)

run() {  # name, then the command
  local name=$1; shift
  timeout "${RUN_TIMEOUT:-240}" "$@" --result_file="$out/$name.json" > "$out/$name.log" 2>&1 \
    || echo "$name failed: $(tail -n 1 "$out/$name.log")"
}

# Checks. Each must end well inside its timeout; 124 means a hang.
check() {  # name, expected outcome (pass|fail), seconds, then the command
  local name=$1 expect=$2 limit=$3; shift 3
  local start=$SECONDS code
  timeout "$limit" "$@" > "$out/check_$name.log" 2>&1
  code=$?
  if { [ "$expect" = pass ] && [ "$code" = 0 ]; } || { [ "$expect" = fail ] && [ "$code" != 0 ] && [ "$code" != 124 ]; }; then
    echo "check $name: ok (exit $code, $((SECONDS - start)) s)"
  else
    echo "check $name: FAILED (exit $code, $((SECONDS - start)) s): $(tail -n 2 "$out/check_$name.log")"
    checks_failed=1
  fi
}
checks_failed=0
short=(--device=gpu --model=trivial --num_batches=30 --num_warmup_batches=5 --display_every=1000)
check trivial_one pass 60 ./build/dpbench "${short[@]}" --num_gpus="$n" --variable_update=replicated \
  --result_file="$out/check_one.json"
check trivial_mpirun pass 90 "${mpirun_cmd[@]}" ./build/dpbench "${short[@]}" \
  --variable_update=distributed_all_reduce --result_file="$out/check_mpi.json"
norms=$(python3 -c 'import json, sys; print(*(json.load(open(p))["summary"]["param_norm"] for p in sys.argv[1:]))' \
  "$out/check_one.json" "$out/check_mpi.json" 2>/dev/null)
read -r norm_one norm_mpi <<< "$norms"
# NCCL may order a sum differently across processes than within one: equal to 1e-6, relative.
if [ -n "$norm_mpi" ] && python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-6 * abs(a))' \
     "$norm_one" "$norm_mpi"; then
  echo "check trivial param_norm: ok (one process $norm_one, mpirun $norm_mpi)"
else
  echo "check trivial param_norm: FAILED (one process ${norm_one:-none}, mpirun ${norm_mpi:-none})"
  checks_failed=1
fi
one_rank=(mpirun -np 1 --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
check flag_mismatch fail 60 "${one_rank[@]}" ./build/dpbench "${short[@]}" --variable_update=distributed_all_reduce \
  --seed=1 : -np 1 ./build/dpbench "${short[@]}" --variable_update=distributed_all_reduce --seed=2
grep -q "disagree" "$out/check_flag_mismatch.log" || { echo "check flag_mismatch: no message"; checks_failed=1; }
check rank_fails_at_start fail 60 "${one_rank[@]}" ./build/dpbench "${short[@]}" \
  --variable_update=distributed_all_reduce : -np 1 ./build/dpbench "${short[@]}" \
  --variable_update=distributed_all_reduce --data_dir=/nonexistent
grep -q "rank 1 of 2" "$out/check_rank_fails_at_start.log" \
  || { echo "check rank_fails_at_start: the rank is not named"; checks_failed=1; }
# Rank 1 is killed 20 s into a long run, while rank 0 is inside NCCL all-reduces.
long=(--device=gpu --model=resnet50 --batch_size=32 --num_batches=100000 --display_every=1000)
check rank_killed fail 90 "${one_rank[@]}" ./build/dpbench "${long[@]}" --variable_update=distributed_all_reduce \
  : -np 1 timeout -s KILL 20 ./build/dpbench "${long[@]}" --variable_update=distributed_all_reduce
if [ "$checks_failed" != 0 ] && [ "${FORCE:-0}" = 0 ]; then
  echo "checks failed: no benchmark (FORCE=1 runs it anyway)"
  exit 1
fi

workloads=()
for model in ${WORKLOADS:-resnet50 nmt}; do
  case $model in
    resnet50) workloads+=("resnet50:--batch_size=64 --precision=fp32 ${EXTRA_FLAGS:-}") ;;
    nmt) workloads+=("nmt:--batch_size=384 --encoder_type=cudnn_lstm --direction=bi --precision=tf32 ${EXTRA_FLAGS:-}") ;;
    *) echo "unknown workload $model (resnet50, nmt)"; exit 2 ;;
  esac
done
[ "${TIMING:-1}" != 0 ] || rounds=0
for workload in "${workloads[@]}"; do
  [ "$rounds" -gt 0 ] || break
  model=${workload%%:*}
  read -r -a flags <<< "${workload#*:}"
  for ((round = 1; round <= rounds; round++)); do
    run "${model}_replicated_r$round" ./build/dpbench --device=gpu --model="$model" "${flags[@]}" \
      --num_gpus="$n" --variable_update=replicated "${steps[@]}"
    run "${model}_distributed_r$round" "${mpirun_cmd[@]}" ./build/dpbench --device=gpu --model="$model" \
      "${flags[@]}" --variable_update=distributed_all_reduce "${steps[@]}"
  done
  run "${model}_distributed_replicated" "${mpirun_cmd[@]}" ./build/dpbench --device=gpu --model="$model" \
    "${flags[@]}" --variable_update=distributed_replicated "${steps[@]}"
done

# PyTorch DDP twins: one process per GPU, NCCL, the same shapes on synthetic data.
if [ "$rounds" -gt 0 ] && [ "${TWINS:-1}" != 0 ]; then
  for twin in "resnet50:64:--precision=fp32" "nmt:384:--encoder_type=cudnn_lstm --direction=bi --precision=tf32"; do
    IFS=: read -r model batch flags <<< "$twin"
    # shellcheck disable=SC2086  # flags are words
    PYTHONWARNINGS=ignore timeout "${RUN_TIMEOUT:-240}" python3 -m torch.distributed.run --standalone \
      --nproc_per_node="$n" scripts/bench/pytorch_ddp.py --model="$model" --batch_size="$batch" $flags \
      --num_batches="${NUM_BATCHES:-40}" --num_warmup_batches="${NUM_WARMUP:-10}" \
      > "$out/ddp_$model.json" 2> "$out/ddp_$model.log" || echo "ddp $model failed: $(tail -n 1 "$out/ddp_$model.log")"
  done
fi

# Deterministic runs: the same bits twice in one process, and under mpirun.
det_steps=(--num_batches=10 --num_warmup_batches=2 --display_every=1000 --deterministic=true)
for workload in "${workloads[@]}"; do
  model=${workload%%:*}
  read -r -a flags <<< "${workload#*:}"
  for copy in a b; do
    run "${model}_det_one_$copy" ./build/dpbench --device=gpu --model="$model" "${flags[@]}" \
      --num_gpus="$n" --variable_update=replicated "${det_steps[@]}"
  done
  run "${model}_det_mpirun" "${mpirun_cmd[@]}" ./build/dpbench --device=gpu --model="$model" \
    "${flags[@]}" --variable_update=distributed_all_reduce "${det_steps[@]}"
done

python3 - "$out" "$rounds" <<'PY'
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(name):
    try:
        return json.load(open(os.path.join(out, name + ".json")))["summary"]
    except (OSError, ValueError, KeyError):
        return None
def ddp(model):
    try:
        doc = json.loads(open(os.path.join(out, f"ddp_{model}.json")).read().strip().splitlines()[-1])
        return f"{doc.get('summary', doc)['items_per_sec']:,.0f}"
    except (OSError, ValueError, KeyError, IndexError):
        return "-"
models = [m for m in ("resnet50", "nmt") if os.path.exists(os.path.join(out, f"{m}_det_one_a.log"))]
def spread(runs):
    norms = [s["param_norm"] for s in runs]
    return f"{min(norms):.4f}-{max(norms):.4f}"
if rounds:
    print("| workload | one process, replicated nccl | mpirun, distributed_all_reduce | ratio | param_norm one process / mpirun (min-max, not deterministic) | distributed_replicated | PyTorch DDP (torchrun) |")
    print("|---|--:|--:|--:|---|--:|--:|")
for model in models if rounds else ():
    one = [s for s in (load(f"{model}_replicated_r{r}") for r in range(1, rounds + 1)) if s]
    dist = [s for s in (load(f"{model}_distributed_r{r}") for r in range(1, rounds + 1)) if s]
    ps = load(f"{model}_distributed_replicated")
    if not one or not dist:
        print(f"| {model} | failed | | | | | {ddp(model)} |")
        continue
    a = statistics.median(s["items_per_sec"] for s in one)
    b = statistics.median(s["items_per_sec"] for s in dist)
    ps_text = f"{ps['items_per_sec']:,.0f}" if ps else "failed"
    print(f"| {model} | {a:,.0f} | {b:,.0f} | {100 * b / a:.1f}% | {spread(one)} / {spread(dist)} "
          f"| {ps_text} | {ddp(model)} |")
print()
print("| workload, --deterministic | one process, run 1 | one process, run 2 | mpirun | all equal | items/s (one process, mpirun) |")
print("|---|--:|--:|--:|---|--:|")
for model in models:
    runs = [load(f"{model}_det_{name}") for name in ("one_a", "one_b", "mpirun")]
    if not all(runs):
        print(f"| {model} | failed | | | | |")
        continue
    norms = [s["param_norm"] for s in runs]
    equal = "yes" if norms[0] == norms[1] == norms[2] else "NO"
    print(f"| {model} | {norms[0]!r} | {norms[1]!r} | {norms[2]!r} | {equal} "
          f"| {runs[0]['items_per_sec']:,.0f}, {runs[2]['items_per_sec']:,.0f} |")
PY
