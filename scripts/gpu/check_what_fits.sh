#!/usr/bin/env bash
# What fits on one GPU (README "What fits"): from one traced 1-GPU run of a model, `dpbench predict`
# gives each device's memory at several batches and the largest batch that fits the GPU; this
# runs each of those batches, puts its measured peak beside the prediction, runs the largest batch
# that fits and the next larger one (which must be refused at set-up with one line).
# `scripts/gpu/check_what_fits.sh --help` says how.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

usage() {
  cat <<'EOF'
Usage: scripts/gpu/check_what_fits.sh OUT_DIR [MODEL[:BATCH]] [BATCH...]

MODEL (default resnet50) at BATCH (default 64) on one GPU is predict's BASE (--trace_file); then for
each BATCH after it (default: 32 128 256) `dpbench predict --batch_size=BATCH` and a run at that
batch, and last the largest batch that fits (predict's, at DEVICE_MEMORY, default the GPU's own
less its CUDA context) and that batch plus one. Writes OUT_DIR/what_fits.md: per batch the
predicted and the measured peak per device (summary.memory.peak_bytes) and the error (the target:
within 5%), then whether the largest batch ran and the next was refused, with its line.
Environment: DEVICE_MEMORY (e.g. 80GiB: also passed to the runs as --device_memory), NUM_BATCHES
(20), DPBENCH_FLAGS (extra flags for every run), DPBENCH_BUILD_DIR (build), DPBENCH_DEVICE (gpu;
cpu: the reference backend, for a dry check with DEVICE_MEMORY set).
e.g. check_what_fits.sh /tmp/fits resnet50:128 64 256 && check_what_fits.sh /tmp/fits_gpt gpt:8 4 16
EOF
}
case "${1:-}" in -h | --help | "") usage; [ -n "${1:-}" ]; exit $? ;; esac
out=$1
entry=${2:-resnet50}
shift $(($# < 2 ? $# : 2))
batches=("$@")
[ ${#batches[@]} -gt 0 ] || batches=(32 128 256)
model=${entry%%:*}
base_batch=64
[ "$entry" != "$model" ] && base_batch=${entry#*:}
dpbench=${DPBENCH_BUILD_DIR:-build}/dpbench
device=${DPBENCH_DEVICE:-gpu}
system=systems/h200_nvlink_4gpu.json
memory_flags=()
[ -n "${DEVICE_MEMORY:-}" ] && memory_flags=(--device_memory="$DEVICE_MEMORY")
mkdir -p "$out" || exit 1
read -r -a extra <<<"${DPBENCH_FLAGS:-}"

run() {  # batch, result file, extra flags...
  "$dpbench" --device="$device" --model="$model" --num_gpus=1 --batch_size="$1" --variable_update=independent \
    --num_batches="${NUM_BATCHES:-20}" --num_warmup_batches=5 --result_file="$2" "${memory_flags[@]}" "${extra[@]}" "${@:3}"
}
peak_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["memory"]["peak_bytes"])' "$1"; }
predicted() {  # batch -> "peak largest" of the independent row on 1 GPU
  "$dpbench" predict "$out/base.json" --system "$system" --max_gpus=1 --batch_size="$1" "${memory_flags[@]}" \
    --format=json --output "$out/predict_$1.json" >/dev/null || return 1
  python3 - "$out/predict_$1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
row = [r for r in d["rows"] if r["gpu_number"] == 1 and r.get("memory")][0]
print(row["memory"]["peak_bytes"], row["memory"]["largest_batch_that_fits"])
PY
}

run "$base_batch" "$out/base.json" --trace_file="$out/base.trace.json" >"$out/base.log" 2>&1 ||
  { echo "check_what_fits: the base run failed: $(tail -2 "$out/base.log")" >&2; exit 1; }
report="$out/what_fits.md"
{
  echo "# What fits: $model, one GPU, BASE batch $base_batch"
  echo
  echo "| Batch | Predicted peak (GiB) | Measured peak (GiB) | Error |"
  echo "|---:|---:|---:|---:|"
} >"$report"
status=0
for batch in "$base_batch" "${batches[@]}"; do
  read -r peak largest < <(predicted "$batch") || { echo "predict failed at batch $batch" >&2; status=1; continue; }
  if run "$batch" "$out/b$batch.json" >"$out/b$batch.log" 2>&1; then
    measured=$(peak_of "$out/b$batch.json")
    python3 -c 'import sys; p, m = map(float, sys.argv[2:]); e = 100*(p-m)/m
print("| %s | %.2f | %.2f | %+.1f%% |" % (sys.argv[1], p/2**30, m/2**30, e)); sys.exit(0 if abs(e) <= 5 else 1)' \
      "$batch" "$peak" "$measured" >>"$report" || status=1
  else
    echo "| $batch | $(python3 -c "print('%.2f' % ($peak/2**30))") | refused: $(tail -1 "$out/b$batch.log") | |" >>"$report"
  fi
done
echo >>"$report"
if run "$largest" "$out/largest.json" >"$out/largest.log" 2>&1; then
  echo "- the largest batch that fits, $largest, ran: peak $(peak_of "$out/largest.json") bytes" >>"$report"
else
  echo "- the largest batch that fits, $largest, did NOT run: $(tail -1 "$out/largest.log")" >>"$report"
  status=1
fi
next=$((largest + 1))
run "$next" "$out/next.json" >"$out/next.log" 2>&1
code=$?
if [ "$code" = 2 ] && grep -q "too little memory on device .* the largest batch that fits is" "$out/next.log"; then
  echo "- batch $next was refused at set-up: $(grep 'dpbench: error:' "$out/next.log")" >>"$report"
else
  echo "- batch $next was NOT refused at set-up (exit $code): $(tail -1 "$out/next.log")" >>"$report"
  status=1
fi
cat "$report"
exit "$status"
