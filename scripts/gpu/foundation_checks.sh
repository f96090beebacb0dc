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
# The issue's benchmark: long runs (20000 measured steps) so fixed costs do not blur the ratio.
bash scripts/gpu/bench_trivial.sh "$out/graph_b64" "${counts[@]}" 2>&1 | tee "$out/graph_b64.log" || status=1
DPBENCH_FLAGS=--cuda_graph=false PYTORCH=0 bash scripts/gpu/bench_trivial.sh "$out/eager_b64" "${counts[@]}" 2>&1 | tee "$out/eager_b64.log" || status=1
BATCH=256 PYTORCH=${PYTORCH_B256:-0} bash scripts/gpu/bench_trivial.sh "$out/graph_b256" "${counts[@]}" 2>&1 | tee "$out/graph_b256.log" || status=1
# The issue's command line exactly as written (defaults: 10 warm-up + 100 measured, a progress line
# every 10 steps), five times each, then with progress every 100 steps to see what printing costs.
for display in 10 100; do
for n in 1 "${counts[-1]}"; do
  for repeat in 1 2 3 4 5; do
    ./build/dpbench --model=trivial --num_gpus="$n" --variable_update=independent --display_every=$display \
      --result_file="$out/literal_d${display}_${n}gpu_$repeat.json" > "$out/literal_d${display}_${n}gpu_$repeat.log" 2>&1 || status=1
    python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['summary']; print(sys.argv[2], 'GPUs, run', sys.argv[3], ':', round(s['items_per_sec']), 'images/s, total', round(s['total_time_s']*1000, 3), 'ms')" \
      "$out/literal_d${display}_${n}gpu_$repeat.json" "$n" "$repeat (display_every=$display)"
  done
done
done
exit $status
