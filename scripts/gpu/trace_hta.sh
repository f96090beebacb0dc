#!/usr/bin/env bash
# Holistic Trace Analysis on real GPU traces: per entry a traced run with --trace_format=hta (one
# GPU; with GPUS=N also N GPUs, replicated over NCCL), then scripts/hta_breakdown.py where a Python
# with HTA is at hand.
#
# Usage: scripts/gpu/trace_hta.sh OUT_DIR [ENTRY...]
#
# For each ENTRY (MODEL[:BATCH][+--flag=value...], with the model's flags of these scripts; default:
# resnet50:64 nmt:384 gpt:16), on 1 GPU (--variable_update=independent) and on each count of GPUS
# (e.g. GPUS="2 8") per strategy of STRATEGIES (variable_update values, default "replicated": its
# exchanges NCCL's; e.g. "replicated fully_sharded"), a run tracing NUM_BATCHES (20) measured steps:
# OUT_DIR/KEY_gN/ holds the traces (rank0.json, ...), OUT_DIR/KEY_gN.json the result and .log the
# console (KEY_gN_STRATEGY for a strategy other than replicated). Then, with HTA_PYTHON (default python3) able to import hta, scripts/hta_breakdown.py
# compares HTA's temporal breakdown (and, on N GPUs, its communication/computation overlap) with the
# result's breakdown, within TOLERANCE (2) percentage points, into OUT_DIR/KEY_gN.hta.txt. The GPU
# machine has no package registry: where HTA is missing there, bring OUT_DIR back and run the printed
# commands where `pip install HolisticTraceAnalysis` works.
# Environment: GPUS, STRATEGIES, NUM_BATCHES, NUM_WARMUP (10), TOLERANCE, HTA_PYTHON, DPBENCH_FLAGS (extra flags
# for every run), DPBENCH_BUILD_DIR (build).
# e.g. scripts/gpu/trace_hta.sh /tmp/hta resnet50:64
#      GPUS=2 scripts/gpu/trace_hta.sh /tmp/hta resnet50:64 nmt:384
set -uo pipefail
usage() { sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//p}' "$0"; }
case ${1:-} in -h | --help) usage; exit 0 ;; esac
(($# >= 1)) || { usage >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 1
out=$1
shift
entries=("$@")
((${#entries[@]})) || entries=(resnet50:64 nmt:384 gpt:16)
dpbench=${DPBENCH_BUILD_DIR:-build}/dpbench
read -r -a counts <<<"1 ${GPUS:-}"
read -r -a strategies <<<"${STRATEGIES:-replicated}"
read -r -a extra_flags <<<"${DPBENCH_FLAGS:-}"
steps=${NUM_BATCHES:-20}
tolerance=${TOLERANCE:-2}
hta_python=${HTA_PYTHON:-python3}
mkdir -p "$out"
# shellcheck source=scripts/gpu/common.sh
source scripts/gpu/common.sh "$dpbench" >/dev/null
for entry in "${entries[@]}"; do parse_entry "$entry" || exit 2; done
has_hta=0
"$hta_python" -c 'import hta' 2>/dev/null && has_hta=1
status=0
later=()
for entry in "${entries[@]}"; do
  parse_entry "$entry"
  runs=()
  for n in "${counts[@]}"; do
    if ((n == 1)); then runs+=("1 independent"); else for s in "${strategies[@]}"; do runs+=("$n $s"); done; fi
  done
  for run in "${runs[@]}"; do
    read -r n strategy <<<"$run"
    key=${entry_tag}_g$n
    case $strategy in independent | replicated) ;; *) key+=_$strategy ;; esac
    rm -rf "${out:?}/$key"
    if ! "$dpbench" --model="$entry_model" "${entry_flags[@]}" --num_gpus="$n" --variable_update="$strategy" --num_batches="$steps" \
      --num_warmup_batches="${NUM_WARMUP:-10}" --display_every=1000 --trace_steps=1:"$steps" --trace_format=hta \
      --trace_file="$out/$key" --result_file="$out/$key.json" "${extra_flags[@]}" >"$out/$key.log" 2>&1; then
      echo "trace_hta.sh: $key failed: $(tail -2 "$out/$key.log")" >&2
      status=1
      continue
    fi
    grep '^Breakdown:' "$out/$key.log" | sed "s/^/$key: /"
    command=(scripts/hta_breakdown.py "$out/$key" "$out/$key.json" --ranks="$n" --tolerance="$tolerance")
    if ((has_hta)); then
      "$hta_python" "${command[@]}" >"$out/$key.hta.txt" 2>&1 || status=1
      sed "s/^/$key: /" "$out/$key.hta.txt"
    else
      later+=("python3 ${command[*]} | tee $out/$key.hta.txt")
    fi
  done
done
if ((${#later[@]})); then
  echo "HTA is not importable by $hta_python here; with OUT_DIR brought back, run where it is:"
  printf '  %s\n' "${later[@]}"
fi
exit "$status"
