#!/usr/bin/env bash
# On a GPU machine: the [gpu] tests, then the guarantees of "What dpbench keeps" where the CUDA
# paths differ from the reference backend: results written through /dev/null and stdout, pinned
# prefetch slots counted against host memory (an oversized --prefetch_depth refused at set-up, not
# OOM-killed), a single-rank mpirun job over the non-blocking MPI exchanges, and the fault
# injection script. Usage: scripts/gpu/reliability_checks.sh OUT_DIR   (logs in OUT_DIR)
set -u
out=${1:?usage: reliability_checks.sh OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/../.." || exit 2
# shellcheck source=scripts/gpu/env.sh
source scripts/gpu/env.sh build/dpbench >"$out/env.log" 2>&1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"

timeout "${GPU_TESTS_TIMEOUT:-300}" ./build/tests/dpbench_gpu_tests "${GPU_TESTS:-[gpu]}" >"$out/gpu_tests.log" 2>&1
echo "gpu tests rc=$?" | tee -a "$out/gpu_tests.log"
tail -n 3 "$out/gpu_tests.log"
grep -B3 -A12 "FAILED" "$out/gpu_tests.log" | head -40

check() {  # name, expected exit code, command...
  local name=$1 expected=$2 code started=$SECONDS
  shift 2
  timeout 120 "$@" >"$out/$name.log" 2>&1
  code=$?
  if [ "$code" = "$expected" ]; then echo "ok    $name (exit $code, $((SECONDS - started)) s)"
  else echo "FAIL  $name: exit $code, expected $expected: $(grep -v '^\s*$' "$out/$name.log" | tail -n 2)"; fi
}
run=(./build/dpbench --model=resnet50 --batch_size=64 --num_batches=10 --num_warmup_batches=5)
check result_to_dev_null 0 "${run[@]}" --result_file=/dev/null
[ -c /dev/null ] && echo "ok    /dev/null is still a device" || echo "FAIL  /dev/null was replaced"
check result_to_stdout 0 "${run[@]}" --result_file=-
grep -q '"schema_version"' "$out/result_to_stdout.log" && echo "ok    the result reached stdout" || echo "FAIL  no result on stdout"
check host_feed_prefetch 0 "${run[@]}" --data_feed=host --prefetch_depth=8 --result_file="$out/host_feed.json"
# 64 pinned slots of 1,048,576 small images (12.9 GB each) pass any host's memory; the GPU holds the model.
check prefetch_too_deep_for_host 1 ./build/dpbench --model=trivial --batch_size=1048576 --num_batches=2 \
  --data_feed=host --prefetch_depth=64 --result_file=
grep -h "out of host memory" "$out/prefetch_too_deep_for_host.log"
check mpirun_one_rank 0 mpirun -np 1 ./build/dpbench --model=resnet50 --batch_size=64 --num_batches=10 \
  --num_warmup_batches=5 --variable_update=distributed_all_reduce --result_file="$out/mpirun.json"
grep -h "^total" "$out/mpirun_one_rank.log"
timeout 300 bash tests/scripts/fault_injection.sh build/dpbench "$(command -v mpirun)" >"$out/fault_injection.log" 2>&1
tail -n 1 "$out/fault_injection.log"
