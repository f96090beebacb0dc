#!/usr/bin/env bash
# dpbench against its PyTorch twins on one GPU, one after the other in the same session.
# Usage: scripts/gpu/bench_cnn.sh OUT_DIR "model:batch ..." "precision ..." "format ..."
#   e.g. scripts/gpu/bench_cnn.sh /tmp/cnn "resnet50:64 resnet50:128 inception3:64 vgg16:64" "fp32" "NCHW NHWC"
# Environment: NUM_BATCHES (100), NUM_WARMUP (20), TWINS ("eager compiled"; empty: none)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench_cnn.sh OUT_DIR "model:batch ..." "precisions" "formats"}
runs=${2:-"resnet50:64"}
precisions=${3:-fp32}
formats=${4:-NCHW}
mkdir -p "$out"
source scripts/gpu/env.sh build/dpbench >/dev/null
batches=${NUM_BATCHES:-100}
warmup=${NUM_WARMUP:-20}
twins=${TWINS-"eager compiled"}
rows=()
for run in $runs; do
  model=${run%%:*}
  batch=${run##*:}
  for precision in $precisions; do
    for format in $formats; do
      tag="${model}_b${batch}_${precision}_${format}"
      ./build/dpbench --device=gpu --model="$model" --batch_size="$batch" --precision="$precision" \
        --data_format="$format" --num_batches="$batches" --num_warmup_batches="$warmup" --display_every=50 \
        --result_file="$out/dpbench_$tag.json" > "$out/dpbench_$tag.log" 2>&1 || echo "dpbench $tag failed: $(tail -n 1 "$out/dpbench_$tag.log")"
      for twin in $twins; do
        flag=""
        [ "$twin" = compiled ] && flag=--compile
        python3 -W ignore scripts/bench/pytorch_cnn.py --model="$model" --batch_size="$batch" --precision="$precision" \
          --data_format="$format" --num_batches="$batches" --num_warmup_batches="$warmup" $flag \
          > "$out/pytorch_${twin}_$tag.json" 2> "$out/pytorch_${twin}_$tag.log" || echo "pytorch $twin $tag failed: $(tail -n 1 "$out/pytorch_${twin}_$tag.log")"
      done
    done
  done
done
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print("| model | batch | precision | format | dpbench img/s | PyTorch eager | PyTorch compiled | dpbench / eager | dpbench / compiled |")
print("|---|--:|---|---|--:|--:|--:|--:|--:|")
def torch_rate(path):
    try:
        return json.loads(open(path).read().strip().splitlines()[-1])["images_per_sec"]
    except Exception:
        return None
for path in sorted(glob.glob(f"{out}/dpbench_*.json")):
    tag = os.path.basename(path)[len("dpbench_"):-len(".json")]
    model, batch, precision, fmt = tag.rsplit("_", 3)
    d = json.load(open(path))["summary"]["items_per_sec"]
    e = torch_rate(f"{out}/pytorch_eager_{tag}.json")
    c = torch_rate(f"{out}/pytorch_compiled_{tag}.json")
    f = lambda x: f"{x:,.0f}" if x else "-"
    r = lambda x: f"{d / x:.2f}x" if x else "-"
    print(f"| {model} | {batch[1:]} | {precision} | {fmt} | {d:,.0f} | {f(e)} | {f(c)} | {r(e)} | {r(c)} |")
PY
