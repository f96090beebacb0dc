#!/usr/bin/env bash
# dpbench's sequence models against their PyTorch twins on one GPU, one after the other.
# Usage: scripts/gpu/bench_rnn.sh OUT_DIR ["model:encoder_type:direction:batch ..."] [precision]
#   e.g. scripts/gpu/bench_rnn.sh /tmp/rnn "nmt:cudnn_lstm:bi:384 nmt:dynamic:bi:384 rnnlm:cudnn_lstm:-:512" tf32
# Environment: NUM_BATCHES (40), NUM_WARMUP (10), TWINS (1; 0: dpbench only), DPBENCH_FLAGS (extra flags)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench_rnn.sh OUT_DIR [runs] [precision]}
runs=${2:-"nmt:cudnn_lstm:bi:384 nmt:dynamic:bi:384 rnnlm:cudnn_lstm:-:512"}
precision=${3:-tf32}
mkdir -p "$out"
source scripts/gpu/env.sh build/dpbench >/dev/null
batches=${NUM_BATCHES:-40}
warmup=${NUM_WARMUP:-10}
for run in $runs; do
  IFS=: read -r model encoder direction batch <<< "$run"
  direction_flag=()
  [ "$direction" != - ] && direction_flag=(--direction="$direction")
  tag="${model}_${encoder}_${direction}_b${batch}_${precision}"
  ./build/dpbench --device=gpu --model="$model" --encoder_type="$encoder" "${direction_flag[@]}" \
    --batch_size="$batch" --precision="$precision" --num_batches="$batches" --num_warmup_batches="$warmup" \
    --display_every=20 ${DPBENCH_FLAGS:-} --result_file="$out/dpbench_$tag.json" > "$out/dpbench_$tag.log" 2>&1 \
    || echo "dpbench $tag failed: $(tail -n 1 "$out/dpbench_$tag.log")"
  if [ "${TWINS:-1}" != 0 ]; then
    python3 -W ignore scripts/bench/pytorch_rnn.py --model="$model" --encoder_type="$encoder" "${direction_flag[@]}" \
      --batch_size="$batch" --precision="$precision" --num_batches="$batches" --num_warmup_batches="$warmup" \
      > "$out/pytorch_$tag.json" 2> "$out/pytorch_$tag.log" || echo "pytorch $tag failed: $(tail -n 1 "$out/pytorch_$tag.log")"
  fi
done
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print("| model | LSTM | direction | batch | precision | dpbench items/s | PyTorch items/s | dpbench / PyTorch | kernels per step | parameters |")
print("|---|---|---|--:|---|--:|--:|--:|--:|--:|")
for path in sorted(glob.glob(f"{out}/dpbench_*.json")):
    tag = os.path.basename(path)[len("dpbench_"):-len(".json")]
    model, encoder, *rest = tag.split("_")
    if encoder == "cudnn":
        encoder = "cudnn_lstm"; rest = rest[1:]
    direction, batch, precision = rest
    s = json.load(open(path))["summary"]
    try:
        t = json.loads(open(f"{out}/pytorch_{tag}.json").read().strip().splitlines()[-1])["items_per_sec"]
    except Exception:
        t = None
    ratio = f"{s['items_per_sec'] / t:.2f}x" if t else "-"
    twin = f"{t:,.0f}" if t else "-"
    print(f"| {model} | {encoder} | {direction} | {batch[1:]} | {precision} | {s['items_per_sec']:,.0f} {s['unit']} | {twin} | {ratio} | {s.get('kernel_launches_per_step')} | {s['num_parameters']:,} |")
PY
