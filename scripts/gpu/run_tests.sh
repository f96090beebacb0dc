#!/usr/bin/env bash
# The [gpu] test suite and the reliability checks on a GPU machine.
# `scripts/gpu/run_tests.sh --help` says how.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

usage() {
  cat <<'EOF'
Usage: scripts/gpu/run_tests.sh OUT_DIR [options] [-- DPBENCH_FLAGS of the --oom run...]

Logs go to OUT_DIR; one line per check; exit 1 when a test or check failed.
  1. the GPUs (nvidia-smi) and their topology;
  2. the [gpu] tests (build/tests/dpbench_gpu_tests);
  3. the guarantees of the README's "What dpbench keeps" where the CUDA paths differ from the
     reference backend: results written through /dev/null and stdout, host feeding with prefetch,
     an oversized --prefetch_depth refused at set-up (pinned slots counted against host memory),
     a single-rank mpirun job over the non-blocking MPI exchanges, tests/scripts/fault_injection.sh.

Options:
  --filter=SPEC   Catch2 filter of the GPU tests (default [gpu]; none: skip them)
  --no-checks     skip step 3
  --host          also the host tests (~[gpu]) against this machine's libraries
  --mpi=N         also the launch checks on N GPUs: a short trivial run under mpirun ends at one
                  process's param_norm (to 1e-6), ranks with different flags stop, a rank failing
                  at start-up or killed mid-run ends the job (no hang in a collective), and a rank
                  killed under torchrun is named; then with --deterministic each entry of
                  DET_ENTRIES (resnet50:64 nmt:384) twice in one process, once under mpirun and
                  once under torchrun (where PyTorch is installed): the param_norms must be equal
                  bit for bit (each run's throughput is printed beside its norm)
  --oom='GIB...'  also, per amount: another process holds all but GIB GiB of GPU 1, then
                  `dpbench --num_gpus=2 --variable_update=replicated DPBENCH_FLAGS` must end with
                  an error line and a non-zero exit, never hang (default flags: nmt, cudnn_lstm, bi,
                  tf32, batch 384)
Environment: DPBENCH_BUILD_DIR (build), DPBENCH_DEVICE (gpu; cpu: the reference backend, for a
dry check of steps 3 and --mpi), GPU_TESTS_TIMEOUT (300 s), RUN_TIMEOUT (120 s per check),
CHECK_MODEL (resnet50: the model of step 3's runs), DET_ENTRIES and DET_BATCHES (10: measured steps
of the --deterministic runs).
EOF
}

out="" filter="[gpu]" checks=1 host=0 mpi="" oom="" oom_flags=()
die() { echo "run_tests.sh: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --) shift; oom_flags=("$@"); break ;;
    --filter=*) filter=${1#*=} ;;
    --no-checks) checks=0 ;;
    --host) host=1 ;;
    --mpi=*) mpi=${1#*=}; [[ $mpi =~ ^[1-9][0-9]*$ ]] || die "--mpi=$mpi: a GPU count" ;;
    --oom=*) oom=${1#*=} ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [ -z "$out" ] || die "unexpected argument '$1'"; out=$1 ;;
  esac
  shift
done
[ -n "$out" ] || { usage >&2; exit 2; }
build=${DPBENCH_BUILD_DIR:-build}
dpbench=$build/dpbench
device=${DPBENCH_DEVICE:-gpu}
mkdir -p "$out"
# shellcheck source=scripts/gpu/common.sh
source scripts/gpu/common.sh "$dpbench" >"$out/env.log" 2>&1
status=0

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | tee "$out/gpus.csv"
  nvidia-smi topo -m >"$out/topology.txt" 2>&1
else
  echo "no nvidia-smi on this machine"
fi

if [ "$filter" != none ]; then
  timeout "${GPU_TESTS_TIMEOUT:-300}" "$build/tests/dpbench_gpu_tests" "$filter" >"$out/gpu_tests.log" 2>&1
  code=$?
  echo "gpu tests: exit $code" | tee -a "$out/gpu_tests.log"
  tail -n 3 "$out/gpu_tests.log"
  grep -B3 -A12 "FAILED" "$out/gpu_tests.log" | head -n 60
  # 77: no GPU, every test skipped; a failure on a GPU machine, expected on the reference backend.
  [ "$code" = 0 ] || { [ "$code" = 77 ] && [ "$device" = cpu ]; } || status=1
fi
if ((host)); then
  "$build/tests/dpbench_host_tests" "~[gpu]" >"$out/host_tests.log" 2>&1 || status=1
  echo "host tests: $(tail -n 2 "$out/host_tests.log" | tr '\n' ' ')"
fi

check() {  # name, expected outcome (pass, fail: a non-zero exit that is not a timeout), then the command
  local name=$1 expect=$2 code started=$SECONDS
  shift 2
  timeout "${RUN_TIMEOUT:-120}" "$@" >"$out/$name.log" 2>&1
  code=$?
  if { [ "$expect" = pass ] && [ "$code" = 0 ]; } || { [ "$expect" = fail ] && [ "$code" != 0 ] && [ "$code" != 124 ]; }; then
    echo "ok    $name (exit $code, $((SECONDS - started)) s)"
  else
    echo "FAIL  $name: exit $code, expected $expect: $(grep -v '^\s*$' "$out/$name.log" | tail -n 2)"
    status=1
  fi
}
expect() {  # description, then a test command
  local what=$1
  shift
  if "$@"; then echo "ok    $what"; else echo "FAIL  $what"; status=1; fi
}

if ((checks)); then
  run=("$dpbench" --device="$device" --model="${CHECK_MODEL:-resnet50}" --batch_size=64 --num_batches=10 --num_warmup_batches=5)
  check result_to_dev_null pass "${run[@]}" --result_file=/dev/null
  expect "/dev/null is still a device" test -c /dev/null
  check result_to_stdout pass "${run[@]}" --result_file=-
  expect "the result reached stdout" grep -q '"schema_version"' "$out/result_to_stdout.log"
  check host_feed_prefetch pass "${run[@]}" --data_feed=host --prefetch_depth=8 --result_file="$out/host_feed.json"
  # 64 pinned slots of 1,048,576 small images (12.9 GB each) pass any host's memory; the GPU holds the model.
  check prefetch_too_deep_for_host fail "$dpbench" --device="$device" --model=trivial --batch_size=1048576 \
    --num_batches=2 --data_feed=host --prefetch_depth=64 --result_file=
  expect "refused for host memory" grep -q "out of host memory" "$out/prefetch_too_deep_for_host.log"
  check mpirun_one_rank pass mpirun -np 1 "${run[@]}" --variable_update=distributed_all_reduce --result_file="$out/mpirun.json"
  timeout 300 bash tests/scripts/fault_injection.sh "$dpbench" "$(command -v mpirun)" >"$out/fault_injection.log" 2>&1 || status=1
  echo "fault injection: $(tail -n 1 "$out/fault_injection.log")"
fi

if [ -n "$mpi" ]; then
  n=$mpi
  mpirun_n=(mpirun -np "$n" --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
  one_rank=(mpirun -np 1 --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
  short=(--device="$device" --model=trivial --num_batches=30 --num_warmup_batches=5 --display_every=1000)
  check mpi_trivial_one pass "$dpbench" "${short[@]}" --num_gpus="$n" --variable_update=replicated \
    --result_file="$out/mpi_trivial_one.json"
  check mpi_trivial_mpirun pass "${mpirun_n[@]}" "$dpbench" "${short[@]}" --variable_update=distributed_all_reduce \
    --result_file="$out/mpi_trivial_mpirun.json"
  # NCCL may order a sum differently across processes than within one: equal to 1e-6, relative.
  expect "trivial: param_norm of one process and of mpirun agree to 1e-6" python3 -c '
import json, sys
try:
    a, b = (json.load(open(p))["summary"]["param_norm"] for p in sys.argv[1:])
except (OSError, ValueError, KeyError) as e:
    sys.exit(f"      no result: {e}")
print("      one process", a, "mpirun", b)
sys.exit(abs(a - b) > 1e-6 * abs(a))' "$out/mpi_trivial_one.json" "$out/mpi_trivial_mpirun.json"
  check mpi_flag_mismatch fail "${one_rank[@]}" "$dpbench" "${short[@]}" --variable_update=distributed_all_reduce \
    --seed=1 : -np 1 "$dpbench" "${short[@]}" --variable_update=distributed_all_reduce --seed=2
  expect "flag mismatch named" grep -q "disagree" "$out/mpi_flag_mismatch.log"
  check mpi_rank_fails_at_start fail "${one_rank[@]}" "$dpbench" "${short[@]}" \
    --variable_update=distributed_all_reduce : -np 1 "$dpbench" "${short[@]}" \
    --variable_update=distributed_all_reduce --data_dir=/nonexistent
  expect "failing rank named" grep -q "rank 1 of 2" "$out/mpi_rank_fails_at_start.log"
  # Rank 1 is killed 20 s into a long run, while rank 0 is inside NCCL all-reduces.
  long=(--device="$device" --model=resnet50 --batch_size=32 --num_batches=100000 --display_every=1000)
  check mpi_rank_killed fail "${one_rank[@]}" "$dpbench" "${long[@]}" --variable_update=distributed_all_reduce \
    : -np 1 timeout -s KILL 20 "$dpbench" "${long[@]}" --variable_update=distributed_all_reduce
  # torchrun (PyTorch's launcher, where PyTorch is installed): the ranks meet over TCP, no MPI.
  torchrun_n=()
  if command -v torchrun >/dev/null; then
    torchrun_n=(torchrun --standalone --nproc_per_node="$n" --no-python)
  elif python3 -c 'import torch.distributed.run' 2>/dev/null; then
    torchrun_n=(python3 -m torch.distributed.run --standalone --nproc_per_node="$n" --no-python)
  else
    echo "skip  torchrun checks: no torchrun on this machine"
  fi
  if ((${#torchrun_n[@]})); then
    # Rank 1 is killed 20 s into a long run; rank 0 must name it and end the job.
    # shellcheck disable=SC2016  # $RANK and $@ belong to the inner shell, one per rank
    check torchrun_rank_killed fail "${torchrun_n[@]}" bash -c '[ "$RANK" = 1 ] && exec timeout -s KILL 20 "$@"; exec "$@"' \
      rank "$dpbench" "${long[@]}" --variable_update=distributed_all_reduce
    expect "torchrun: the killed rank named" grep -q "rank 1 .*ended without finishing" "$out/torchrun_rank_killed.log"
  fi
  det=(--device="$device" --num_batches="${DET_BATCHES:-10}" --num_warmup_batches=2 --display_every=1000 --deterministic=true)
  for entry in ${DET_ENTRIES:-resnet50:64 nmt:384}; do
    parse_entry "$entry"
    runs=()
    for copy in a b; do
      check "det_${entry_tag}_one_$copy" pass "$dpbench" --model="$entry_model" "${entry_flags[@]}" "${det[@]}" \
        --num_gpus="$n" --variable_update=replicated --result_file="$out/det_${entry_tag}_one_$copy.json"
      runs+=("$out/det_${entry_tag}_one_$copy.json")
    done
    check "det_${entry_tag}_mpirun" pass "${mpirun_n[@]}" "$dpbench" --model="$entry_model" "${entry_flags[@]}" \
      "${det[@]}" --variable_update=distributed_all_reduce --result_file="$out/det_${entry_tag}_mpirun.json"
    runs+=("$out/det_${entry_tag}_mpirun.json")
    launchers="twice in one process and under mpirun"
    if ((${#torchrun_n[@]})); then
      check "det_${entry_tag}_torchrun" pass "${torchrun_n[@]}" "$dpbench" --model="$entry_model" "${entry_flags[@]}" \
        "${det[@]}" --variable_update=distributed_all_reduce --result_file="$out/det_${entry_tag}_torchrun.json"
      runs+=("$out/det_${entry_tag}_torchrun.json")
      launchers="twice in one process, under mpirun and under torchrun"
    fi
    expect "$entry_tag --deterministic: param_norm bit for bit the same $launchers" python3 -c '
import json, os, sys
try:
    results = [json.load(open(p)) for p in sys.argv[1:]]
except (OSError, ValueError) as e:
    sys.exit(f"      no result: {e}")
for path, result in zip(sys.argv[1:], results):
    s = result.get("summary", {})
    norm, speed, unit = s.get("param_norm"), s.get("items_per_sec", 0), s.get("unit", "")
    print(f"      {os.path.basename(path)}: param_norm {norm!r}, {speed:,.1f} {unit}")
sys.exit(len({r.get("summary", {}).get("param_norm") for r in results}) != 1)' "${runs[@]}"
  done
fi

if [ -n "$oom" ]; then
  ((${#oom_flags[@]})) || oom_flags=(--model=nmt --encoder_type=cudnn_lstm --direction=bi --precision=tf32 --batch_size=384)
  for leave in $oom; do
    python3 -u - "$leave" >"$out/oom_holder_$leave.log" 2>&1 <<'PY' &
import sys, time, torch
free, _ = torch.cuda.mem_get_info(1)
held = torch.empty(max(0, free - int(float(sys.argv[1]) * 2**30)), dtype=torch.uint8, device="cuda:1")
print("held", held.numel() >> 30, "GiB", flush=True)
time.sleep(600)
PY
    holder=$!
    for _ in $(seq 1 120); do grep -q held "$out/oom_holder_$leave.log" && break; sleep 0.5; done
    started=$SECONDS
    timeout "${RUN_TIMEOUT:-120}" "$dpbench" --device=gpu --num_gpus=2 --variable_update=replicated \
      "${oom_flags[@]}" --display_every=1000 --result_file="$out/oom_$leave.json" >"$out/oom_$leave.log" 2>&1
    code=$?
    kill "$holder" 2>/dev/null
    wait "$holder" 2>/dev/null
    line=$(grep -m1 "error" "$out/oom_$leave.log")
    [ -e "$out/oom_$leave.json" ] && line="(ran to the end) $line"
    # A pass: one error line and a non-zero exit, or (enough memory left) a run to the end; never a hang.
    verdict="ok   "
    if [ "$code" = 124 ] || { [ "$code" != 0 ] && ! grep -q "error" "$out/oom_$leave.log"; }; then
      verdict="FAIL "
      status=1
    fi
    echo "$verdict oom, ${leave} GiB left on GPU 1: exit $code after $((SECONDS - started)) s: ${line:-$(tail -n 1 "$out/oom_$leave.log")}"
  done
fi
exit $status
