#!/usr/bin/env bash
# Data feeding on the GPUs: each workload with on-device data, host feeding with
# prefetch, and synchronous host feeding, on 1 and N GPUs, in one call; prints a table of
# throughput, step time and the time compute waited for data.
# Usage: scripts/gpu/feed_benchmark.sh OUT_DIR [N]
#   WORKLOADS="cifar10_cnn resnet50_32 nmt" (the default) picks the workloads; TWINS=0 skips the
#   PyTorch DDP twins; EXTRA_FLAGS are added to every dpbench run (e.g. --cudnn_benchmark=false,
#   whose heuristic algorithm choice is the same in every run).
#   Writes CIFAR-format data (50000 random records) and a generated parallel corpus (vocabulary
#   files of 50000 tokens, 20000 pairs of 60 to 99 words) under OUT_DIR/data first.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: feed_benchmark.sh OUT_DIR [N]}
n=${2:-4}
mkdir -p "$out/data/cifar" "$out/data/nmt" "$out/runs"
# shellcheck source=scripts/gpu/env.sh
source scripts/gpu/env.sh build/dpbench >/dev/null
export NCCL_NVLS_ENABLE=0

echo "writing the data sets"
python3 - "$out/data" <<'PY'
import os, sys
import numpy as np
root = sys.argv[1]
rng = np.random.default_rng(7)
for i in range(1, 6):
    path = os.path.join(root, "cifar", f"data_batch_{i}.bin")
    if os.path.exists(path):
        continue
    records = np.empty((10000, 3073), dtype=np.uint8)
    records[:, 0] = rng.integers(0, 10, 10000)
    records[:, 1:] = rng.integers(0, 256, (10000, 3072))
    records.tofile(path)
nmt = os.path.join(root, "nmt")
words = 50000 - 3  # the specials <unk> <s> </s> come first
for side in ("src", "tgt"):
    with open(os.path.join(nmt, f"vocab.{side}"), "w") as f:
        f.write("\n".join(f"{side}{k}" for k in range(words)) + "\n")
pairs = 20000
for side, seed in (("src", 1), ("tgt", 2)):
    path = os.path.join(nmt, f"train.{side}")
    if os.path.exists(path):
        continue
    r = np.random.default_rng(seed)
    lengths = r.integers(60, 100, pairs)
    ids = np.minimum(r.zipf(1.2, lengths.sum()), words) - 1
    with open(path, "w") as f:
        start = 0
        for length in lengths:
            f.write(" ".join(f"{side}{k}" for k in ids[start:start + length]) + "\n")
            start += length
PY

run() {  # name, flags...
  local name=$1; shift
  local start=$SECONDS
  timeout "${RUN_TIMEOUT:-180}" ./build/dpbench --device=gpu "$@" --display_every=1000 \
    --result_file="$out/runs/$name.json" > "$out/runs/$name.log" 2>&1 \
    || echo "$name failed: $(tail -n 1 "$out/runs/$name.log")"
  echo "$name: $((SECONDS - start)) s"
}

steps=(--num_batches="${NUM_BATCHES:-40}" --num_warmup_batches="${NUM_WARMUP:-10}")
declare -A workload=(
  [cifar10_cnn]="--model=cifar10_cnn --batch_size=128 --data_dir=$out/data/cifar"
  [resnet50_32]="--model=resnet50 --batch_size=64 --data_dir=$out/data/cifar"
  [nmt]="--model=nmt --encoder_type=cudnn_lstm --direction=bi --precision=tf32 --batch_size=384 --src_max_len=100 --tgt_max_len=100 --data_dir=$out/data/nmt"
)
read -r -a selected <<< "${WORKLOADS:-cifar10_cnn resnet50_32 nmt}"
for model in "${selected[@]}"; do
  [ -n "${workload[$model]:-}" ] || { echo "unknown workload $model (cifar10_cnn, resnet50_32, nmt)"; exit 2; }
  for gpus in 1 "$n"; do
    read -r -a common <<< "${workload[$model]}"
    read -r -a extra <<< "${EXTRA_FLAGS:-}"
    common+=(--num_gpus="$gpus" --variable_update=replicated "${steps[@]}" "${extra[@]}")
    run "${model}_g${gpus}_on_device" "${common[@]}" --data_feed=on_device
    run "${model}_g${gpus}_prefetch" "${common[@]}" --data_feed=host
    run "${model}_g${gpus}_sync" "${common[@]}" --data_feed=host --prefetch_data_to_device=false
  done
done

# PyTorch DDP twins of the same shapes, synthetic data on the GPU (the on_device counterpart).
if [ "${TWINS:-1}" != 0 ]; then
  declare -A twin=(
    [cifar10_cnn]="cifar10_cnn:128:--precision=fp32"
    [resnet50_32]="resnet50:64:--precision=fp32 --image_size=32 --num_classes=10"
    [nmt]="nmt:384:--encoder_type=cudnn_lstm --direction=bi --precision=tf32"
  )
  for name in "${selected[@]}"; do
    IFS=: read -r model batch flags <<< "${twin[$name]}"
    for gpus in 1 "$n"; do
      # shellcheck disable=SC2086  # flags are words
      PYTHONWARNINGS=ignore python3 -m torch.distributed.run --standalone --nproc_per_node="$gpus" \
        scripts/bench/pytorch_ddp.py --model="$model" --batch_size="$batch" $flags "${steps[@]}" \
        > "$out/runs/ddp_${name}_g$gpus.json" 2> "$out/runs/ddp_${name}_g$gpus.log" \
        || echo "ddp $name g$gpus failed: $(tail -n 1 "$out/runs/ddp_${name}_g$gpus.log")"
    done
  done
fi

python3 - "$out/runs" "$n" <<'PY'
import json, os, sys
runs, n = sys.argv[1], sys.argv[2]
# Steps per second, not items: a real batch's words vary, and on_device repeats the first batch.
print("| workload | GPUs | feed | items/s | steps/s | step ms (median) | data wait ms/step | steps/s vs on_device |")
print("|---|--:|---|--:|--:|--:|--:|--:|")
for model in ("cifar10_cnn", "resnet50_32", "nmt"):
    for gpus in ("1", n):
        base = None
        for feed in ("on_device", "prefetch", "sync"):
            path = os.path.join(runs, f"{model}_g{gpus}_{feed}.json")
            if not os.path.exists(path[:-len(".json")] + ".log"):
                continue  # not selected
            try:
                s = json.load(open(path))["summary"]
            except (OSError, ValueError, KeyError):
                print(f"| {model} | {gpus} | {feed} | failed | | | | |")
                continue
            rate = s["items_per_sec"]
            steps = s["measured_steps"] / s["total_time_s"]
            base = steps if feed == "on_device" else base
            wait = s["data"].get("wait_ms_per_step")
            ratio = f"{100 * steps / base:.1f}%" if base else "-"
            print(f"| {model} | {gpus} | {s['data']['feed']} | {rate:,.0f} | {steps:.2f} | {s['step_time_ms']['median']:.2f} | "
                  f"{'-' if wait is None else f'{wait:.3f}'} | {ratio} |")
for model in ("cifar10_cnn", "resnet50_32", "nmt"):
    for gpus in ("1", n):
        path = os.path.join(runs, f"ddp_{model}_g{gpus}.json")
        if not os.path.exists(path):
            continue
        try:
            lines = open(path).read().strip().splitlines()
            doc = json.loads(lines[-1])
            print(f"| PyTorch DDP {model} (synthetic, on GPU) | {gpus} | - | {doc.get('summary', doc)['items_per_sec']:,.0f} | | | | |")
        except (OSError, ValueError, KeyError, IndexError):
            print(f"| PyTorch DDP {model} | {gpus} | failed | | | | | |")
PY
