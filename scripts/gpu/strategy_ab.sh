#!/usr/bin/env bash
# Side-by-side runs of one session for docs/BENCHMARKS.md: per model, the 1-GPU and 4-GPU
# independent baselines, replicated nccl with and without overlap, and the other strategies on N GPUs.
# Usage: scripts/gpu/strategy_ab.sh OUT_DIR ["model:batch ..."] [N]
# Environment: NUM_BATCHES (30), NUM_WARMUP (5), OTHERS (strategies run only on N GPUs).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: strategy_ab.sh OUT_DIR [runs] [N]}
runs=${2:-"resnet50:64 nmt:384"}
n=${3:-4}
others=${OTHERS:-"replicated:xring replicated:psgpu replicated:pscpu parameter_server:cpu parameter_server:gpu"}
mkdir -p "$out"
source scripts/gpu/env.sh build/dpbench >/dev/null
export NCCL_NVLS_ENABLE=0
run() {  # tag, then dpbench flags
  local tag=$1; shift
  ./build/dpbench --device=gpu --num_batches="${NUM_BATCHES:-30}" --num_warmup_batches="${NUM_WARMUP:-5}" \
    --display_every=1000 --result_file="$out/$tag.json" "$@" > "$out/$tag.log" 2>&1 \
    || echo "$tag failed: $(tail -n 1 "$out/$tag.log")"
}
for entry in $runs; do
  model=${entry%%:*}; batch=${entry##*:}
  flags=(--model="$model" --batch_size="$batch")
  [ "$model" = nmt ] && flags+=(--encoder_type=cudnn_lstm --direction=bi --precision=tf32)
  run "${model}_independent_g1" "${flags[@]}" --num_gpus=1
  run "${model}_independent_g$n" "${flags[@]}" --num_gpus="$n"
  run "${model}_nccl_g$n" "${flags[@]}" --num_gpus="$n" --variable_update=replicated
  run "${model}_nccl-no-overlap_g$n" "${flags[@]}" --num_gpus="$n" --variable_update=replicated --overlap_comm=false
  for variant in $others; do
    strategy=${variant%%:*}; option=${variant#*:}
    extra=(--local_parameter_device="$option")
    [ "$strategy" = replicated ] && extra=(--all_reduce_spec="$option")
    run "${model}_${strategy}-${option}_g$n" "${flags[@]}" --num_gpus="$n" --variable_update="$strategy" "${extra[@]}"
  done
done
python3 - "$out" "$n" <<'PY'
import glob, json, os, sys
out, n = sys.argv[1], int(sys.argv[2])
rows = {}
for path in sorted(glob.glob(f"{out}/*.json")):
    tag = os.path.basename(path)[:-5]
    try:
        rows[tag] = json.load(open(path))["summary"]
    except Exception:
        continue
print("| run | items/s | step ms (median) | efficiency vs 1 GPU | exposed comm ms/step | transfer ms/step (min device) | busbw GB/s | kernels/step |")
print("|---|--:|--:|--:|--:|--:|--:|--:|")
for tag, s in rows.items():
    model = tag.split("_")[0]
    base = rows.get(f"{model}_independent_g1")
    gpus = int(tag.rsplit("_g", 1)[1])
    eff = 100 * s["items_per_sec"] / (gpus * base["items_per_sec"]) if base else float("nan")
    c = s.get("comm") or {}
    fmt = lambda v, f="{:.2f}": "-" if v is None else f.format(v)
    print(f"| {tag} | {s['items_per_sec']:,.0f} | {s['step_time_ms']['median']:.2f} | {eff:.1f}% | "
          f"{fmt(c.get('exposed_comm_ms_per_step'))} | {fmt(c.get('transfer_ms_per_step_min'))} | "
          f"{fmt(c.get('busbw_gbps'), '{:.0f}')} | {s.get('kernel_launches_per_step', '-')} |")
PY
