#!/usr/bin/env bash
# One process per GPU against one process for all GPUs (issue 8): for each workload, ROUNDS
# interleaved rounds of `dpbench --num_gpus=N --variable_update=replicated` (NCCL) and
# `mpirun -np N dpbench --variable_update=distributed_all_reduce`, plus one
# distributed_replicated run; prints median throughput, the ratio and whether param_norm agrees.
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

for workload in "resnet50:--batch_size=64 --precision=fp32" \
                "nmt:--batch_size=384 --encoder_type=cudnn_lstm --direction=bi --precision=tf32"; do
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

python3 - "$out" "$rounds" <<'PY'
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(name):
    try:
        return json.load(open(os.path.join(out, name + ".json")))["summary"]
    except (OSError, ValueError, KeyError):
        return None
print("| workload | one process, replicated nccl | mpirun, distributed_all_reduce | ratio | param_norm equal | distributed_replicated |")
print("|---|--:|--:|--:|---|--:|")
for model in ("resnet50", "nmt"):
    one = [s for s in (load(f"{model}_replicated_r{r}") for r in range(1, rounds + 1)) if s]
    dist = [s for s in (load(f"{model}_distributed_r{r}") for r in range(1, rounds + 1)) if s]
    ps = load(f"{model}_distributed_replicated")
    if not one or not dist:
        print(f"| {model} | failed | | | | |")
        continue
    a = statistics.median(s["items_per_sec"] for s in one)
    b = statistics.median(s["items_per_sec"] for s in dist)
    same = all(abs(s["param_norm"] - one[0]["param_norm"]) <= 1e-5 * one[0]["param_norm"] for s in dist)
    ps_text = f"{ps['items_per_sec']:,.0f}" if ps else "failed"
    print(f"| {model} | {a:,.0f} | {b:,.0f} | {100 * b / a:.1f}% | {'yes' if same else 'no'} "
          f"({one[0]['param_norm']:.6f} vs {dist[0]['param_norm']:.6f}) | {ps_text} |")
PY
