#!/usr/bin/env bash
# Benchmark of the foundation issue: dpbench trivial + independent on 1..N GPUs against 4x (Nx) the
# 1-GPU throughput, with the PyTorch baseline from the same machine and session.
# Usage: scripts/gpu/bench_trivial.sh OUT_DIR [GPU counts...]   (defaults: 1 2 4)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench_trivial.sh OUT_DIR [gpu counts...]}
shift || true
counts=("$@")
((${#counts[@]})) || counts=(1 2 4)
mkdir -p "$out"
source scripts/gpu/env.sh build/dpbench
batch=${BATCH:-64}
batches=${NUM_BATCHES:-5000}
warmup=${NUM_WARMUP:-200}
for n in "${counts[@]}"; do
  ./build/dpbench --device=gpu --model=trivial --variable_update=independent --num_gpus="$n" \
    --batch_size="$batch" --num_batches="$batches" --num_warmup_batches="$warmup" --display_every=1000 \
    --result_file="$out/dpbench_trivial_${n}gpu.json" | tee "$out/dpbench_trivial_${n}gpu.log" | tail -n 8
  python3 scripts/bench/pytorch_trivial.py --num_gpus="$n" --batch_size="$batch" --num_batches="$batches" \
    --num_warmup_batches="$warmup" | tee "$out/pytorch_trivial_${n}gpu.json"
done
python3 - "$out" "${counts[@]}" <<'PY'
import json, sys
out, counts = sys.argv[1], [int(c) for c in sys.argv[2:]]
base = json.load(open(f"{out}/dpbench_trivial_{counts[0]}gpu.json"))["summary"]["items_per_sec"] / counts[0]
torch_base = json.loads(open(f"{out}/pytorch_trivial_{counts[0]}gpu.json").read().strip().splitlines()[-1])["images_per_sec"] / counts[0]
print("| GPUs | dpbench images/s | scaling vs N x 1-GPU | PyTorch images/s | PyTorch scaling | dpbench / PyTorch |")
print("|--:|--:|--:|--:|--:|--:|")
for n in counts:
    d = json.load(open(f"{out}/dpbench_trivial_{n}gpu.json"))["summary"]["items_per_sec"]
    t = json.loads(open(f"{out}/pytorch_trivial_{n}gpu.json").read().strip().splitlines()[-1])["images_per_sec"]
    print(f"| {n} | {d:,.0f} | {100*d/(n*base):.1f}% | {t:,.0f} | {100*t/(n*torch_base):.1f}% | {d/t:.2f}x |")
PY
