#!/usr/bin/env bash
# Benchmark of the foundation issue: dpbench trivial + independent on 1..N GPUs against N x the
# 1-GPU throughput, and (PYTORCH=1) the PyTorch baseline from the same machine and session.
# Usage: scripts/gpu/bench_trivial.sh OUT_DIR [GPU counts...]   (defaults: 1 2 4)
# Environment: BATCH (64), NUM_BATCHES (20000), NUM_WARMUP (200), DPBENCH_FLAGS (extra flags),
#              PYTORCH (1: also run scripts/bench/pytorch_trivial.py)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench_trivial.sh OUT_DIR [gpu counts...]}
shift || true
counts=("$@")
((${#counts[@]})) || counts=(1 2 4)
mkdir -p "$out"
source scripts/gpu/env.sh build/dpbench >/dev/null
batch=${BATCH:-64}
batches=${NUM_BATCHES:-20000}
warmup=${NUM_WARMUP:-200}
for n in "${counts[@]}"; do
  # shellcheck disable=SC2086
  ./build/dpbench --device=gpu --model=trivial --variable_update=independent --num_gpus="$n" \
    --batch_size="$batch" --num_batches="$batches" --num_warmup_batches="$warmup" --display_every=5000 \
    ${DPBENCH_FLAGS:-} --result_file="$out/dpbench_trivial_${n}gpu.json" > "$out/dpbench_trivial_${n}gpu.log"
  if [ "${PYTORCH:-1}" = 1 ]; then
    python3 -W ignore scripts/bench/pytorch_trivial.py --num_gpus="$n" --batch_size="$batch" \
      --num_batches="$batches" --num_warmup_batches="$warmup" > "$out/pytorch_trivial_${n}gpu.json"
  fi
done
python3 - "$out" "${counts[@]}" <<'PY'
import json, os, sys
out, counts = sys.argv[1], [int(c) for c in sys.argv[2:]]
def dpbench(n): return json.load(open(f"{out}/dpbench_trivial_{n}gpu.json"))["summary"]
def torch(n):
    path = f"{out}/pytorch_trivial_{n}gpu.json"
    return json.loads(open(path).read().strip().splitlines()[-1])["images_per_sec"] if os.path.exists(path) else None
base = dpbench(counts[0])["items_per_sec"] / counts[0]
torch_base = torch(counts[0]) / counts[0] if torch(counts[0]) else None
print("| GPUs | dpbench images/s | vs N x 1-GPU | median step ms | CUDA graph | PyTorch images/s | PyTorch vs N x 1-GPU | dpbench / PyTorch |")
print("|--:|--:|--:|--:|:-:|--:|--:|--:|")
for n in counts:
    s, t = dpbench(n), torch(n)
    d = s["items_per_sec"]
    row = f"| {n} | {d:,.0f} | {100*d/(n*base):.1f}% | {s['step_time_ms']['median']:.4f} | {'yes' if s.get('cuda_graph') else 'no'} |"
    row += f" {t:,.0f} | {100*t/(n*torch_base):.1f}% | {d/t:.2f}x |" if t else " - | - | - |"
    print(row)
PY
