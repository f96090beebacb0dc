#!/usr/bin/env bash
# What fits, end to end on the reference backend (README "What fits"): a 1-device trivial run with
# --trace_file is predict's BASE; `dpbench predict --device_memory` gives each device's memory by
# category and the largest batch per device that fits, for 1, 2 and 4 devices; runs of 2 and 4
# devices at BASE's batch sit within 5% of the memory predicted, runs at the largest batch that
# fits run under --device_memory and sit within 5% of predict --batch_size at that batch, and the
# next larger batch is refused at set-up with one line that names the same largest batch.
# Usage: test_what_fits.sh DPBENCH
set -uo pipefail
dpbench=${1:?usage: test_what_fits.sh DPBENCH}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
system="$source_dir/systems/reference_backend.json"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/scripts/result_checks.sh
source "$(dirname "$0")/result_checks.sh"

memory=8MiB  # the trivial model's parameters and gradients are 6.0 MiB: room for about a hundred samples
run() {  # devices, batch, result file, extra flags...
  local devices=$1 batch=$2 result=$3
  shift 3
  "$dpbench" --device=cpu --model=trivial --num_gpus="$devices" --batch_size="$batch" --variable_update=replicated \
    --num_batches=3 --num_warmup_batches=1 --result_file="$result" "$@" >"$work/run.log" 2>&1
}
run 1 16 "$work/g1.json" --trace_file="$work/g1.trace.json" --trace_steps=1:3 ||
  { echo "test_what_fits: dpbench cannot run here: $(tail -3 "$work/run.log")" >&2; exit 2; }
run 2 16 "$work/g2.json" || fail "2 devices at batch 16: $(tail -2 "$work/run.log")"
run 4 16 "$work/g4.json" || fail "4 devices at batch 16: $(tail -2 "$work/run.log")"

expect_exit "predict with memory" 0 "$dpbench" predict "$work/g1.json" "$work/g2.json" "$work/g4.json" \
  --system "$system" --max_gpus=4 --device_memory=$memory --format=json --output "$work/predict.json"
expect_exit "predict's markdown" 0 "$dpbench" predict "$work/g1.json" --system "$system" --max_gpus=4 \
  --device_memory=$memory
grep -q "^## Memory per device" "$work/stdout" || fail "no memory table in predict's markdown"
grep -q "| Strategy | GPUs | Peak (MiB) | parameters | gradients | optimizer | activations |" "$work/stdout" ||
  fail "the memory table's header: $(grep -A2 '## Memory' "$work/stdout")"
grep -q "Largest batch that fits" "$work/stdout" || fail "no largest batch column"

# Per GPU count, replicated (nccl)'s row: its memory at batch 16 against the measured runs, and its largest batch.
python3 - "$work/predict.json" >"$work/largest" <<'PY' || fail "predict's memory rows (above)"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["memory"]["batch_size"] == 16 and d["memory"]["device_memory_bytes"] == 8 << 20, d["memory"]
largest = {}
for row in d["rows"]:
    if row["strategy"] != "replicated (nccl)":
        continue
    memory = row["memory"]
    assert sum(memory["categories"].values()) == memory["step_peak_bytes"], row
    assert memory["peak_bytes"] == memory["step_peak_bytes"] + memory["set_up_excess_bytes"], row
    if row["gpu_number"] > 1:
        error = row["memory_error_pct"]
        assert error is not None and abs(error) <= 5, ("memory error", row["gpu_number"], error)
    largest[row["gpu_number"]] = memory["largest_batch_that_fits"]
assert sorted(largest) == [1, 2, 4], largest
for gpus, batch in sorted(largest.items()):
    print(gpus, batch)
PY

while read -r gpus largest; do
  [ "$largest" -gt 16 ] || { fail "$gpus devices: largest batch $largest, expected more than 16 in $memory"; continue; }
  if ! run "$gpus" "$largest" "$work/fits$gpus.json" --device_memory=$memory; then
    fail "$gpus devices: the largest batch that fits ($largest) was refused: $(tail -1 "$work/run.log")"
    continue
  fi
  expect_exit "predict at batch $largest" 0 "$dpbench" predict "$work/g1.json" --system "$system" --max_gpus=4 \
    --device_memory=$memory --batch_size="$largest" --format=json --output "$work/at$gpus.json"
  python3 - "$work/at$gpus.json" "$work/fits$gpus.json" "$gpus" <<'PY' || fail "$gpus devices at batch $largest (above)"
import json, sys
predicted = json.load(open(sys.argv[1]))
measured = json.load(open(sys.argv[2]))["summary"]["memory"]["peak_bytes"]
row = [r for r in predicted["rows"] if r["strategy"] == "replicated (nccl)" and r["gpu_number"] == int(sys.argv[3])][0]
error = 100.0 * (row["memory"]["peak_bytes"] - measured) / measured
assert abs(error) <= 5, ("predicted", row["memory"]["peak_bytes"], "measured", measured, error)
PY
  next=$((largest + 1))
  expect_exit "$gpus devices at batch $next" 2 "$dpbench" --device=cpu --model=trivial --num_gpus="$gpus" \
    --batch_size="$next" --variable_update=replicated --num_batches=3 --num_warmup_batches=1 \
    --device_memory=$memory --result_file="$work/refused.json"
  [ "$(grep -c '^dpbench: error: ' "$work/stderr")" = 1 ] ||
    fail "$gpus devices at batch $next: not one error line: $(head -c 400 "$work/stderr")"
  grep -q "^dpbench: error: too little memory on device [0-9]* for --batch_size=$next: it needs .* MiB (parameters 3.0, gradients 3.0, .*).* the largest batch that fits is $largest (--batch_size=$largest)" "$work/stderr" ||
    fail "$gpus devices at batch $next: the refusal line: $(head -c 400 "$work/stderr")"
  grep -q "^Memory:" "$work/stdout" && fail "$gpus devices at batch $next: the run went on past its set-up"
  [ -e "$work/refused.json" ] && fail "$gpus devices at batch $next: a result was written"
done <"$work/largest"
[ -s "$work/largest" ] || fail "no largest batch read"

finish "what fits: predict's memory within 5%, its largest batch runs and the next is refused at 1, 2 and 4 devices"
