#!/usr/bin/env bash
# One device call of a working session: the [gpu] tests, then dpbench against its eager twins.
# Usage: scripts/gpu/session_batch.sh [precisions] [formats]   (results tarred into $OUT/r.tgz)
set -u
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
precisions=${1:-tf32}
formats=${2:-"NHWC NCHW"}
mkdir -p "$OUT/r"
timeout 240 ./build/tests/dpbench_gpu_tests "[gpu]" > "$OUT/r/gpu_tests.log" 2>&1
echo "gpu tests rc=$?" >> "$OUT/r/gpu_tests.log"
tail -4 "$OUT/r/gpu_tests.log"
grep -B3 -A12 "FAILED" "$OUT/r/gpu_tests.log" | head -60
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/r/gpu.txt"
TWINS=eager NUM_BATCHES=40 NUM_WARMUP=10 timeout 330 bash scripts/gpu/bench_cnn.sh "$OUT/r/bench" \
  "resnet50:64 resnet50:128 inception3:64 vgg16:64" "$precisions" "$formats" 2>&1 | tail -12
(cd "$OUT" && tar czf r.tgz r && rm -rf r)
