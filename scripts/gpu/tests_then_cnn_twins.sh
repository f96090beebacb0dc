#!/usr/bin/env bash
# The [gpu] tests, then dpbench against its PyTorch eager or compiled twins on the CNN models, in one call.
# Usage: scripts/gpu/tests_then_cnn_twins.sh [precisions] [formats]   (results tarred into $OUT/r.tgz)
# Environment: GPU_TESTS (Catch2 filter, default [gpu]; "none" skips them), GPU_TESTS_TIMEOUT,
# MODELS ("model:batch ..."), TWINS (eager|compiled), BENCH_TIMEOUT (seconds).
set -u
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
precisions=${1:-tf32}
formats=${2:-"NHWC NCHW"}
mkdir -p "$OUT/r"
if [ "${GPU_TESTS:-[gpu]}" != none ]; then
  timeout "${GPU_TESTS_TIMEOUT:-240}" ./build/tests/dpbench_gpu_tests "${GPU_TESTS:-[gpu]}" > "$OUT/r/gpu_tests.log" 2>&1
  echo "gpu tests rc=$?" >> "$OUT/r/gpu_tests.log"
  tail -4 "$OUT/r/gpu_tests.log"
  grep -B3 -A12 "FAILED" "$OUT/r/gpu_tests.log" | head -60
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/r/gpu.txt"
TWINS=${TWINS:-eager} NUM_BATCHES=40 NUM_WARMUP=10 timeout "${BENCH_TIMEOUT:-330}" bash scripts/gpu/bench_cnn.sh "$OUT/r/bench" \
  "${MODELS:-resnet50:64 resnet50:128 inception3:64 vgg16:64}" "$precisions" "$formats" 2>&1 | tail -12
(cd "$OUT" && tar czf r.tgz r && rm -rf r)
