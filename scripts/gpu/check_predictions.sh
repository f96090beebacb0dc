#!/usr/bin/env bash
# How close `dpbench predict` comes on this machine: per model, a traced 1-GPU run, the measured
# N-GPU runs it predicts and the collectives' curves, all from one build in one session.
# `scripts/gpu/check_predictions.sh --help` says how.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

usage() {
  cat <<'EOF'
Usage: scripts/gpu/check_predictions.sh OUT_DIR [ENTRY...]

For each ENTRY (MODEL[:BATCH][+--flag=value...], with the model's flags of these scripts; default:
resnet50:64 inception3:64 vgg16:64 nmt:384 nmt:384+--encoder_type=dynamic rnnlm:512):
  1. the 1-GPU base: --variable_update=independent with --trace_file and --trace_steps=1:20;
  2. on each count of GPUS (default "2"), every strategy of STRATEGIES (default
     'replicated:nccl;parameter_server:gpu', sweep tokens) through scripts/sweep.sh;
  3. `dpbench predict BASE MEASURED... --system SYSTEM --curves CURVES` into OUT_DIR/KEY/predict.md
     and predict.csv.
Before the entries, `dpbench comm_bench` measures all_reduce and broadcast on each count (the
CURVES, OUT_DIR/curves/). Last, one table: per entry, strategy and count, the predicted and
measured speed, the error, the clock loss and the error at equal clocks.
Environment: NUM_BATCHES (40), NUM_WARMUP (10), GPUS, STRATEGIES, SYSTEM
(systems/h200_nvlink_4gpu.json), DPBENCH_FLAGS (extra flags for every run), DPBENCH_BUILD_DIR
(build), DPBENCH_DEVICE (gpu; cpu: the reference backend, for a dry check).
e.g. check_predictions.sh /tmp/predict resnet50:64 nmt:384
     GPUS="2 4" check_predictions.sh /tmp/predict
EOF
}

case ${1:-} in -h | --help) usage; exit 0 ;; esac
(($# >= 1)) || { usage >&2; exit 2; }
out=$1
shift
entries=("$@")
((${#entries[@]})) || entries=(resnet50:64 inception3:64 vgg16:64 nmt:384 nmt:384+--encoder_type=dynamic rnnlm:512)
build=${DPBENCH_BUILD_DIR:-build}
dpbench=$build/dpbench
device=${DPBENCH_DEVICE:-gpu}
system=${SYSTEM:-systems/h200_nvlink_4gpu.json}
read -r -a counts <<<"${GPUS:-2}"
read -r -a extra_flags <<<"${DPBENCH_FLAGS:-}"
steps=(--num_batches="${NUM_BATCHES:-40}" --num_warmup_batches="${NUM_WARMUP:-10}" --display_every=1000)
mkdir -p "$out/curves"
# shellcheck source=scripts/gpu/common.sh
source scripts/gpu/common.sh "$dpbench" >/dev/null
for entry in "${entries[@]}"; do parse_entry "$entry" || exit 2; done
for n in "${counts[@]}"; do
  if ! [[ $n =~ ^[1-9][0-9]*$ ]] || ((n < 2)); then
    echo "check_predictions.sh: GPUS takes counts of 2 or more, not '$n'" >&2
    exit 2
  fi
done
status=0
max_count=$(printf '%s\n' "${counts[@]}" | sort -n | tail -n 1)

curves=()
for n in "${counts[@]}"; do
  for op in all_reduce broadcast; do
    file=$out/curves/${op}_g$n.json
    echo "== comm_bench $op, $n GPUs"
    if "$dpbench" comm_bench --device="$device" --num_gpus="$n" --op="$op" --min_bytes=64K --max_bytes=1G \
      --json "$file" >"$out/curves/${op}_g$n.log" 2>&1; then
      curves+=("$file")
    else
      echo "comm_bench $op on $n GPUs failed: $(tail -n 1 "$out/curves/${op}_g$n.log")"
      status=1
    fi
  done
done

for entry in "${entries[@]}"; do
  parse_entry "$entry"
  key=$entry_tag
  mkdir -p "$out/$key/logs"
  mapfile -t flags < <(last_of_each --device="$device" "${entry_flags[@]}" "${steps[@]}" "${extra_flags[@]}")
  base=$out/$key/base__1gpu.json
  echo "== $key: traced 1-GPU base"
  "$dpbench" --model="$entry_model" "${flags[@]}" --num_gpus=1 --variable_update=independent \
    --trace_file="$out/$key/base__1gpu.trace.json" --trace_steps=1:20 --result_file="$base" \
    >"$out/$key/logs/base__1gpu.log" 2>&1 || { echo "$key base failed: $(tail -n 1 "$out/$key/logs/base__1gpu.log")"; status=1; continue; }
  echo "== $key: sweep over ${counts[*]} GPUs"
  bash scripts/sweep.sh --dpbench="$dpbench" --models="$entry_model" --gpus="$(IFS=,; echo "${counts[*]}")" \
    --strategies="${STRATEGIES:-replicated:nccl;parameter_server:gpu}" --out="$out/$key/runs" --no-report \
    -- "${flags[@]}" || status=1
  mapfile -t measured < <(ls "$out/$key/runs/"*gpu.json 2>/dev/null)
  for format in markdown csv; do
    file=$out/$key/predict.${format/markdown/md}
    "$dpbench" predict "$base" "${measured[@]}" --system "$system" --max_gpus="$max_count" --format="$format" \
      --output "$file" ${curves[@]:+--curves "${curves[@]}"} >"$out/$key/logs/predict_$format.log" 2>&1 ||
      { echo "$key predict failed: $(tail -n 1 "$out/$key/logs/predict_$format.log")"; status=1; }
  done
done

python3 - "$out" "${entries[@]}" <<'PY'
import csv, os, sys

root, entries = sys.argv[1], sys.argv[2:]
print()
print("| entry | strategy | GPUs | predicted | measured | error % | clock loss % | error at equal clocks % |")
print("|---|---|--:|--:|--:|--:|--:|--:|")
def num(text, spec):
    try:
        return spec.format(float(text))
    except (TypeError, ValueError):
        return "-"
for folder in sorted(os.listdir(root)):
    path = os.path.join(root, folder, "predict.csv")
    if not os.path.exists(path):
        continue
    with open(path) as f:
        for row in csv.DictReader(f):
            if not row.get("measured_items_per_sec") or row.get("gpu_number") == "1":
                continue
            print(f"| {folder} | {row['strategy']} | {row['gpu_number']} | {num(row['items_per_sec'], '{:,.0f}')} | "
                  f"{num(row['measured_items_per_sec'], '{:,.0f}')} | {num(row['error_pct'], '{:+.1f}')} | "
                  f"{num(row['clock_loss_pct'], '{:.1f}')} | {num(row['error_at_equal_clocks_pct'], '{:+.1f}')} |")
PY
exit $status
