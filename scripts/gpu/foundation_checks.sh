#!/usr/bin/env bash
# Everything the foundation issue asks of a GPU machine, in one go (one device lease):
# the [gpu] tests, the host tests against this machine's libraries, and the trivial scaling
# benchmark with its PyTorch baseline. Usage: scripts/gpu/foundation_checks.sh OUT_DIR
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: foundation_checks.sh OUT_DIR}
mkdir -p "$out"
source scripts/gpu/env.sh build/dpbench
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv | tee "$out/gpus.csv"
nvidia-smi topo -m > "$out/topology.txt" 2>&1 || true
status=0
echo "== [gpu] tests"
./build/tests/dpbench_gpu_tests "[gpu]" 2>&1 | tee "$out/gpu_tests.log" | tail -n 30 || status=1
echo "== host tests"
./build/tests/dpbench_host_tests "~[gpu]" 2>&1 | tail -n 5 | tee "$out/host_tests.log" || status=1
echo "== trivial benchmark"
gpus=$(nvidia-smi -L | wc -l)
counts=(1)
((gpus >= 2)) && counts+=(2)
((gpus >= 4)) && counts+=(4)
for batch in ${BATCHES:-64 256}; do
  BATCH=$batch bash scripts/gpu/bench_trivial.sh "$out/bench_b$batch" "${counts[@]}" 2>&1 | tee "$out/bench_b$batch.log" | tail -n 40 || status=1
done
exit $status
