#!/usr/bin/env bash
# The CNN issue's GPU work in one lease: the [gpu] tests, then dpbench against its PyTorch twins.
# Usage: scripts/gpu/cnn_checks.sh OUT_DIR   (environment: RUNS, PRECISIONS, FORMATS, TWINS)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: cnn_checks.sh OUT_DIR}
mkdir -p "$out"
source scripts/gpu/env.sh build/dpbench >/dev/null
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > "$out/gpus.csv"
status=0
./build/tests/dpbench_gpu_tests "[gpu]" > "$out/gpu_tests.log" 2>&1 || status=1
tail -n 3 "$out/gpu_tests.log"
grep -B2 -A12 "FAILED" "$out/gpu_tests.log" | head -n 60
bash scripts/gpu/bench_cnn.sh "$out/bench" "${RUNS:-resnet50:64 inception3:64 vgg16:64}" \
  "${PRECISIONS:-fp32}" "${FORMATS:-NCHW NHWC}" || status=1
exit $status
