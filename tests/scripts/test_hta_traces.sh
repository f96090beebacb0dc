#!/usr/bin/env bash
# --trace_format=hta read by Holistic Trace Analysis itself: installs HTA from PyPI into a
# throwaway virtualenv (pip's cache makes a second install quick), traces a two-device
# reference-backend run (resnet50, replicated, every measured step), and runs HTA's temporal
# breakdown and communication/computation overlap through scripts/hta_breakdown.py: HTA must load
# both ranks, and its compute, non-compute and overlap fractions must agree with the result's
# summary.breakdown within the README's tolerance. A host-fed run shows its batch copies as HTA's
# memory (non-compute) time and still agrees on compute; with MPIEXEC, two ranks under it write a
# file each into one folder, ranks 0 and 1 for HTA. Last, scripts/gpu/trace_hta.sh (the GPU
# machine's check) runs its entry on the reference backend with this HTA.
# Usage: test_hta_traces.sh DPBENCH [MPIEXEC]   (exit 77, skipped: PyPI cannot be reached)
set -uo pipefail
dpbench=${1:?usage: test_hta_traces.sh DPBENCH [MPIEXEC]}
mpiexec=${2:-}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
# Percentage points (README, "Holistic Trace Analysis").
tolerance=2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/scripts/result_checks.sh
source "$(dirname "$0")/result_checks.sh"

# HTA without its notebook dependencies (jupyterlab and the rest take minutes): the libraries its
# analyses import, then HTA itself.
python3 -m venv "$work/venv" || { echo "FAIL: python3 -m venv does not work here (apt-get install python3-venv)"; exit 1; }
pip=("$work/venv/bin/python" -m pip --disable-pip-version-check --no-input -q)
if ! { "${pip[@]}" install pandas numpy plotly psutil networkx pyyaml &&
       "${pip[@]}" install --no-deps "HolisticTraceAnalysis==${DPBENCH_HTA_VERSION:-0.5.0}"; } >"$work/pip.log" 2>&1; then
  if ! "${pip[@]}" download --no-deps -d "$work/probe" "HolisticTraceAnalysis==${DPBENCH_HTA_VERSION:-0.5.0}" \
    >/dev/null 2>&1; then
    echo "skip: PyPI cannot be reached from here, so HTA cannot be installed ($(tail -1 "$work/pip.log"))"
    exit 77
  fi
  echo "FAIL: pip could not install HolisticTraceAnalysis: $(tail -5 "$work/pip.log")"
  exit 1
fi
python=$work/venv/bin/python

run() {  # name, steps, flags...: a run tracing every measured step, started by $launch (mpiexec's
         # words for ranks), its traces in $work/NAME and its result in $work/NAME.json
  local name=$1 steps=$2
  shift 2
  "${launch[@]}" "$dpbench" --device=cpu --num_warmup_batches=2 --num_batches="$steps" --trace_steps=1:"$steps" \
    --trace_format=hta --trace_file="$work/$name" --result_file="$work/$name.json" "$@" \
    >"$work/$name.log" 2>&1 || { echo "FAIL: dpbench $name: $(tail -3 "$work/$name.log")"; exit 1; }
}
compare() {  # name: HTA against the run's result, printed
  if ! "$python" "$source_dir/scripts/hta_breakdown.py" "$work/$1" "$work/$1.json" --ranks=2 \
    --tolerance="$tolerance" >"$work/hta.txt" 2>&1; then
    fail "HTA against dpbench ($1): $(cat "$work/hta.txt")"
  fi
  echo "$1:"
  cat "$work/hta.txt"
}
launch=(timeout 300)
two_devices=(--num_gpus=2 --variable_update=replicated)

# Exchanges during backward on the communication stream: HTA's communication kernels.
run resnet50 12 "${two_devices[@]}" --model=resnet50 --data_name=cifar10 --batch_size=2
[ "$(cd "$work/resnet50" && echo *)" = "rank0.json rank1.json" ] ||
  fail "the trace folder holds $(cd "$work/resnet50" && echo *), not rank0.json rank1.json"
grep -q '^Traces written to .*2 files' "$work/resnet50.log" || fail "no 'Traces written' line: $(tail -2 "$work/resnet50.log")"
compare resnet50
grep -q 'comm/comp overlap' "$work/hta.txt" || fail "HTA found no communication kernels to overlap"

# Host-fed batches copied on the compute stream: HTA's memory kernels, its non-compute time. More
# steps: the first step's batch is built before HTA's window (its first kernel) begins.
run host_fed 30 "${two_devices[@]}" --model=trivial --data_feed=host --prefetch_data_to_device=false
compare host_fed
awk '$2 == "non-compute" && $3 > 0 { found = 1 } END { exit !found }' "$work/hta.txt" ||
  fail "HTA counted no non-compute time for the batch copies"

# One device per process: each rank writes its own file into the shared folder.
if [ -n "$mpiexec" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  launch=(timeout 300 "$mpiexec" -n 2)
  run mpi_ranks 12 --variable_update=distributed_all_reduce --model=trivial
  compare mpi_ranks
fi

# The GPU script, dry: its entry's model runs (not the default one) and its HTA report is written.
DPBENCH_BUILD_DIR=$(dirname "$dpbench") DPBENCH_FLAGS="--device=cpu --data_name=cifar10" HTA_PYTHON=$python \
  NUM_BATCHES=6 NUM_WARMUP=1 GPUS=2 STRATEGIES="replicated fully_sharded" bash "$source_dir/scripts/gpu/trace_hta.sh" \
  "$work/script" cifar10_cnn:2 >"$work/script.txt" 2>&1 ||
  fail "trace_hta.sh on the reference backend: $(tail -5 "$work/script.txt")"
for key in g1 g2 g2_fully_sharded; do
  grep -q '"model": *"cifar10_cnn"' "$work/script/cifar10_cnn_b2_$key.json" ||
    fail "trace_hta.sh ran another model than its entry's ($key): $(grep -o '"model": *"[a-z0-9_]*"' "$work/script/cifar10_cnn_b2_$key.json" | head -1)"
  [ -s "$work/script/cifar10_cnn_b2_$key.hta.txt" ] || fail "trace_hta.sh wrote no HTA report for $key"
done
grep -q '"variable_update": *"fully_sharded"' "$work/script/cifar10_cnn_b2_g2_fully_sharded.json" ||
  fail "trace_hta.sh's fully_sharded run ran another strategy"

finish "HTA reads both ranks and agrees with dpbench's breakdown within $tolerance percentage points"
