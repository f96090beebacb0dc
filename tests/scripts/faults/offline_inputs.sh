#!/usr/bin/env bash
# Fault cases of the commands that read files dpbench wrote (predict, compare, report, and the
# curves comm_bench writes for predict), sourced by tests/scripts/fault_injection.sh, which
# provides attempt, verdict, settle, $dpbench and $work. Every number they read is checked: a
# BASE with an impossible field is refused with one line naming it and writes nothing; a measured
# run of another workload, or a series of runs that differ in one, is named and never compared;
# repeated measured runs give the same answer in any order; a file holding 1e400 is named while
# the good ones are used; comm_bench never writes a size twice; and no control byte of a file
# reaches the terminal raw, on stdout or stderr.
# shellcheck shell=bash disable=SC2154  # $work, $dpbench: the harness's

oi="$work/offline_inputs"
mkdir -p "$oi/out" "$oi/measured"
oi_system="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/systems/reference_backend.json"
oi_run=(--device=cpu --model=trivial --variable_update=replicated --num_batches=3 --num_warmup_batches=1)
"$dpbench" "${oi_run[@]}" --trace_file="$oi/trace.json" --result_file="$oi/base.json" >/dev/null 2>&1 ||
  verdict "offline inputs: a traced base run" mishandled "dpbench could not run"
for gpus in 2 4; do
  "$dpbench" "${oi_run[@]}" --num_gpus="$gpus" --result_file="$oi/measured/g$gpus.json" >/dev/null 2>&1 ||
    verdict "offline inputs: a $gpus-device run" mishandled "dpbench could not run"
done

# A copy of SOURCE with a Python statement applied to its document `d` (`t`: a result's
# summary.timeline), written to DESTINATION.
oi_edit() {  # source, destination, statement
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d.get("summary", {}).get("timeline")
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PY
}

# A file whose `key` holds the number 1e400 (or TEXT): JSON, but no double holds it.
oi_huge() {  # source, destination, key[, text]
  sed "s/\"$3\": [-0-9.e+]*/\"$3\": ${4:-1e400}/" "$1" >"$2"
}

# Stdout and stderr hold no byte a terminal acts on: C0 controls (tabs too), DEL, C1 in UTF-8.
oi_nothing_raw() {
  ! LC_ALL=C grep -q '[[:cntrl:]]' "$work/out" "$work/err" &&
    ! LC_ALL=C grep -qP '\xC2[\x80-\x9F]' "$work/out" "$work/err"
}

# ---- predict: a BASE with one impossible field is refused, the field named, nothing written ----
oi_refuses_base() {  # name, words the line holds, statement on the base's document
  local name="predict BASE: $1" file="$oi/bad_base.json"
  rm -f "$oi/out/predict.md"
  oi_edit "$oi/base.json" "$file" "$3"
  attempt "$name" 1 "$dpbench" predict "$file" --system "$oi_system" --output "$oi/out/predict.md" || return
  if [ -e "$oi/out/predict.md" ]; then verdict "$name" lost "an output was written"; return; fi
  settle "$name" mishandled "the line does not name '$2': $(head -c 300 "$work/err")" grep -qF -- "$2" "$work/err"
}
oi_refuses_base "step of 0 ms" "summary.timeline.step_ms is 0" 't["step_ms"] = 0'
oi_refuses_base "negative step" "summary.timeline.step_ms is -1" 't["step_ms"] = -1'
oi_refuses_base "step of 1e300 ms" "summary.timeline.step_ms is 1e+300" 't["step_ms"] = 1e300'
oi_refuses_base "step as text" "summary.timeline.step_ms is \"long\"" 't["step_ms"] = "long"'
oi_refuses_base "step null" "summary.timeline.step_ms is null" 't["step_ms"] = None'
oi_refuses_base "step missing" "summary.timeline.step_ms is missing" 'del t["step_ms"]'
oi_refuses_base "parts longer than the step" "shorter than its parts" 't["step_ms"] = t["backward_ms"] / 2'
oi_refuses_base "forward far longer than the step" "shorter than its parts" 't["forward_ms"] = 1e6'
oi_refuses_base "negative forward" "summary.timeline.forward_ms is -1" 't["forward_ms"] = -1'
oi_refuses_base "forward of 1e300 ms" "summary.timeline.forward_ms is 1e+300" 't["forward_ms"] = 1e300'
oi_refuses_base "backward of 0 ms" "summary.timeline.backward_ms is 0" 't["backward_ms"] = 0'
oi_refuses_base "negative backward" "summary.timeline.backward_ms is -2" 't["backward_ms"] = -2'
oi_refuses_base "backward as a list" "summary.timeline.backward_ms is [1]" 't["backward_ms"] = [1]'
oi_refuses_base "negative after-backward" "summary.timeline.after_backward_ms is -1" 't["after_backward_ms"] = -1'
oi_refuses_base "after-backward of 1e300 ms" "summary.timeline.after_backward_ms is 1e+300" \
  't["after_backward_ms"] = 1e300'
oi_refuses_base "no traced step" "summary.timeline.traced_steps is 0" 't["traced_steps"] = 0'
oi_refuses_base "negative traced steps" "summary.timeline.traced_steps is -4" 't["traced_steps"] = -4'
oi_refuses_base "fractional traced steps" "summary.timeline.traced_steps is 2.5" 't["traced_steps"] = 2.5'
oi_refuses_base "traced steps past int64" "summary.timeline.traced_steps is 1e+20" 't["traced_steps"] = 10**20'
oi_refuses_base "traced steps of 1e19" "summary.timeline.traced_steps is 10000000000000000000" \
  't["traced_steps"] = 10**19'
oi_refuses_base "more traced than measured steps" "is more than summary.measured_steps" 't["traced_steps"] = 999'
oi_refuses_base "gradient elements of 0 bytes" "summary.timeline.gradient_element_bytes is 0" \
  't["gradient_element_bytes"] = 0'
oi_refuses_base "gradient elements of 1e19 bytes" "summary.timeline.gradient_element_bytes is 1e+19" \
  't["gradient_element_bytes"] = 1e19'
oi_refuses_base "gradient elements of 16 bytes" "summary.timeline.gradient_element_bytes is 16" \
  't["gradient_element_bytes"] = 16'
oi_refuses_base "no tensors" "summary.timeline.tensor_elements is not a non-empty array" 't["tensor_elements"] = []'
oi_refuses_base "tensors as text" "summary.timeline.tensor_elements is not a non-empty array" \
  't["tensor_elements"] = "many"'
oi_refuses_base "an empty tensor" "summary.timeline.tensor_elements[0] is 0" 't["tensor_elements"][0] = 0'
oi_refuses_base "a negative tensor" "summary.timeline.tensor_elements[1] is -5" 't["tensor_elements"][1] = -5'
oi_refuses_base "a fractional tensor" "summary.timeline.tensor_elements[1] is 2.5" 't["tensor_elements"][1] = 2.5'
oi_refuses_base "tensor sizes whose sum overflows" "summary.timeline.tensor_elements add up to more than" \
  't["tensor_elements"] = [2**47, 2**47, 2**47]'
oi_refuses_base "tensors of another model" "but summary.num_parameters is" 't["tensor_elements"][0] += 1'
oi_refuses_base "no ranges produced" "summary.timeline.produced is not a non-empty array" 't["produced"] = []'
oi_refuses_base "a negative offset" "summary.timeline.produced[0].offset is -1" 't["produced"][0]["offset"] = -1'
oi_refuses_base "an empty range" "summary.timeline.produced[0].count is 0" 't["produced"][0]["count"] = 0'
oi_refuses_base "a range past the tensors" "ends past the gradient buffer" 't["produced"][0]["count"] = 10**9'
oi_refuses_base "a range ready after the step" "after the step's end" \
  't["produced"][0]["ready_ms"] = t["step_ms"] * 3'
oi_refuses_base "a range ready at -1 ms" "summary.timeline.produced[1].ready_ms is -1" \
  't["produced"][1]["ready_ms"] = -1'
oi_refuses_base "a range that is no object" "summary.timeline.produced[0] is not an object" 't["produced"][0] = 7'
oi_refuses_base "a negative bucket cap" "config.bucket_cap_mb is -1, impossible for a run" \
  "d[\"config\"][\"bucket_cap_mb\"] = -1"
oi_refuses_base "a bucket cap of 1e13 MB" "config.bucket_cap_mb is 10000000000000.0, impossible for a run" \
  "d[\"config\"][\"bucket_cap_mb\"] = 1e13"
oi_refuses_base "a bucket cap of 1048577 MB" "config.bucket_cap_mb is 1048577, impossible" \
  "d[\"config\"][\"bucket_cap_mb\"] = 1048577"
oi_refuses_base "a bucket cap as text" "config.bucket_cap_mb is \"big\", not a number" \
  "d[\"config\"][\"bucket_cap_mb\"] = 'big'"
oi_refuses_base "a tail bucket past the cap" "config.tail_bucket_mb is 30, impossible for a run" \
  "d[\"config\"][\"tail_bucket_mb\"] = 30"
oi_refuses_base "a negative tail bucket" "config.tail_bucket_mb is -1, impossible for a run" \
  "d[\"config\"][\"tail_bucket_mb\"] = -1"
oi_refuses_base "a forward-only run" "a forward-only run (--forward_only): it has no backward" \
  "d[\"config\"][\"forward_only\"] = True"
oi_refuses_base "a timeline that is no object" "'summary.timeline' is array, expected an object" 'd["summary"]["timeline"] = [1, 2]'
oi_huge "$oi/base.json" "$oi/huge_base.json" final_loss
rm -f "$oi/out/predict.md"
attempt "predict BASE: 1e400" 1 "$dpbench" predict "$oi/huge_base.json" --system "$oi_system" \
  --output "$oi/out/predict.md" &&
  settle "predict BASE: 1e400" mishandled "the file or the number is not named: $(cat "$work/err")" \
    grep -q "huge_base.json': holds the number 1e400" "$work/err"

# ---- predict --bucket_cap_mb: what run takes, refused with run's words ----
for cap in 1048577 1e13 9e12 -1 -0.5 nan inf big; do
  rm -f "$oi/out/predict.md"
  attempt "predict --bucket_cap_mb=$cap" 2 "$dpbench" predict "$oi/base.json" --system "$oi_system" \
    --bucket_cap_mb="$cap" --output "$oi/out/predict.md" &&
    settle "predict --bucket_cap_mb=$cap" lost "an output was written" test ! -e "$oi/out/predict.md"
done
for cap in 0 1048576; do
  attempt "predict --bucket_cap_mb=$cap" 0 "$dpbench" predict "$oi/base.json" --system "$oi_system" \
    --bucket_cap_mb="$cap" --max_gpus=2 && verdict "predict --bucket_cap_mb=$cap" handled
done

# ---- predict: measured runs of BASE's workload only; repeats as their median, in any order ----
oi_edit "$oi/measured/g2.json" "$oi/g2_faster.json" 'd["summary"]["items_per_sec"] *= 1.5'
oi_edit "$oi/measured/g2.json" "$oi/g2_slower.json" 'd["summary"]["items_per_sec"] *= 0.5'
attempt "predict: repeats in one order" 0 "$dpbench" predict "$oi/base.json" "$oi/measured/g2.json" \
  "$oi/g2_faster.json" "$oi/g2_slower.json" --system "$oi_system" --max_gpus=2 --format=json \
  --output "$oi/out/forward.json" && verdict "predict: repeats in one order" handled
attempt "predict: repeats in another order" 0 "$dpbench" predict "$oi/base.json" "$oi/g2_slower.json" \
  "$oi/g2_faster.json" "$oi/measured/g2.json" --system "$oi_system" --max_gpus=2 --format=json \
  --output "$oi/out/backward.json" &&
  settle "predict: repeats in another order" mishandled "the order changed the output" \
    cmp -s "$oi/out/forward.json" "$oi/out/backward.json"
oi_median_of_three() {
  python3 - "$oi/out/forward.json" "$oi/measured/g2.json" <<'PY'
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["rows"] if r["gpu_number"] == 2 and r["measured_runs"]]
sys.exit(0 if len(rows) == 1 and rows[0]["measured_runs"] == 3 and rows[0]["measured_file"] == sys.argv[2] else 1)
PY
}
settle "predict: repeats as their median" mishandled "not the median of 3 runs" oi_median_of_three
oi_not_compared() {  # name, flag words, statement on a 2-device run
  local name="predict MEASURED: $1"
  oi_edit "$oi/measured/g2.json" "$oi/other.json" "$3"
  attempt "$name" 0 "$dpbench" predict "$oi/base.json" "$oi/other.json" --system "$oi_system" --max_gpus=2 &&
    settle "$name" mishandled "no note naming '$2': $(head -c 300 "$work/err")" \
      grep -qF -- "not compared: \`$oi/other.json\`: $2" "$work/err"
}
oi_not_compared "another optimizer" "another workload than BASE: it differs in optimizer (BASE sgd; MEASURED adam)" \
  'd["config"]["optimizer"] = "adam"'
oi_not_compared "another batch" "another workload than BASE: it differs in batch_size" 'd["config"]["batch_size"] = 7'
oi_not_compared "another learning rate" "another workload than BASE: it differs in learning_rate" 'd["config"]["learning_rate"] = 0.5'
oi_not_compared "another precision" "another workload than BASE: it differs in precision" 'd["config"]["precision"] = "fp16"'
oi_not_compared "another backend" "another workload than BASE: it differs in backend" 'd["config"]["backend"] = "cuda"'
oi_not_compared "a forward-only run" "another workload than BASE: it differs in forward_only" 'd["config"]["forward_only"] = True'
oi_not_compared "other buckets" "its buckets (--bucket_cap_mb=50) are not those predicted" \
  'd["config"]["bucket_cap_mb"] = 50'
oi_not_compared "an impossible bucket cap" "config.bucket_cap_mb is -3, impossible for a run" \
  'd["config"]["bucket_cap_mb"] = -3'
oi_huge "$oi/measured/g2.json" "$oi/huge_measured.json" param_norm -1e400
attempt "predict MEASURED: 1e400" 0 "$dpbench" predict "$oi/base.json" "$oi/huge_measured.json" \
  "$oi/measured/g4.json" --system "$oi_system" --max_gpus=4 &&
  settle "predict MEASURED: 1e400" mishandled "not named, or the good run lost: $(head -c 300 "$work/err")" \
    grep -q "skipped \`$oi/huge_measured.json\`: holds the number -1e400" "$work/err"

# ---- predict --curves: every size, bandwidth and count checked ----
"$dpbench" comm_bench --device=cpu --num_gpus=2 --min_bytes=1K --max_bytes=64K --iters=2 --warmup_iters=0 \
  --json "$oi/curve.json" >/dev/null 2>&1 || verdict "offline inputs: a curve" mishandled "comm_bench could not run"
oi_bad_curve() {  # name, words the line holds, statement on the curve's document
  local name="predict curve: $1"
  rm -f "$oi/out/predict.md"
  oi_edit "$oi/curve.json" "$oi/bad_curve.json" "$3"
  attempt "$name" 1 "$dpbench" predict "$oi/base.json" --system "$oi_system" --output "$oi/out/predict.md" \
    --curves "$oi/bad_curve.json" || return
  if [ -e "$oi/out/predict.md" ]; then verdict "$name" lost "an output was written"; return; fi
  settle "$name" mishandled "the line does not say '$2': $(head -c 300 "$work/err")" grep -qF -- "$2" "$work/err"
}
oi_bad_curve "a size of 1e300" "row 0 has size_bytes 1e+300; sizes are whole bytes" 'd["rows"][0]["size_bytes"] = 1e300'
oi_bad_curve "a fractional size" "has size_bytes 1024.5" 'd["rows"][0]["size_bytes"] = 1024.5'
oi_bad_curve "a size of 0" "has size_bytes 0" 'd["rows"][0]["size_bytes"] = 0'
oi_bad_curve "a size past comm_bench's" "is more than comm_bench measures" 'd["rows"][-1]["size_bytes"] = 2**45'
oi_bad_curve "a size twice" "appears twice" 'd["rows"][1]["size_bytes"] = d["rows"][0]["size_bytes"]'
oi_bad_curve "a busbw of 1e300" "impossible for a link" 'd["rows"][0]["busbw_gbps"] = 1e300'
oi_bad_curve "a negative busbw" "has busbw_gbps -1" 'd["rows"][0]["busbw_gbps"] = -1'
oi_bad_curve "ranks of 1e19" "ranks is 10000000000000000000" 'd["ranks"] = 10**19'
oi_bad_curve "fractional ranks" "ranks is 2.5" 'd["ranks"] = 2.5'
oi_bad_curve "more hosts than ranks" "hosts 9 is more than its 2 ranks" 'd["hosts"] = 9'
oi_bad_curve "a compute slowdown of 7" "has compute_slowdown 7" 'd["rows"][0]["compute_slowdown"] = 7'
oi_bad_curve "a compute slowdown in one row" "compute_slowdown in 1 of" \
  'd["rows"][0]["compute_slowdown"] = 0.1; d["rows"][0]["time_beside_compute_us"] = d["rows"][0]["time_us"]'
oi_bad_curve "a compute slowdown without the times beside compute" "no positive time_us and time_beside_compute_us" \
  'd["rows"][0]["compute_slowdown"] = 0.1'
oi_bad_curve "an escape sequence for a collective" "config.op 'x\\x1B[2J' is no collective" \
  'd["config"]["op"] = "x\u001b[2J"'
oi_bad_curve "an escape sequence for a link" 'link "\u001b[2J" unknown' 'd["link"] = "\u001b[2J"'
oi_huge "$oi/curve.json" "$oi/huge_curve.json" time_us
attempt "predict curve: 1e400" 1 "$dpbench" predict "$oi/base.json" --system "$oi_system" \
  --curves "$oi/huge_curve.json" &&
  settle "predict curve: 1e400" mishandled "not named: $(cat "$work/err")" \
    grep -q "huge_curve.json': holds the number 1e400" "$work/err"

# ---- comm_bench: sizes rounded to what one call moves, none twice, and predict takes them ----
oi_sizes_once() {  # op, devices
  local name="comm_bench $1 on $2 devices from 3 B" curve="$oi/sizes_$1_$2.json"
  attempt "$name" 0 "$dpbench" comm_bench --device=cpu --op="$1" --num_gpus="$2" --min_bytes=3 --max_bytes=100 \
    --iters=1 --warmup_iters=0 --json "$curve" || return
  settle "$name" mishandled "repeated or unordered sizes in $curve" python3 -c '
import json, sys
sizes = [r["size_bytes"] for r in json.load(open(sys.argv[1]))["rows"]]
sys.exit(0 if sizes and sizes == sorted(set(sizes)) else 1)' "$curve"
}
for devices in 2 3 4 5 6 7 8; do
  oi_sizes_once reduce_scatter "$devices"
  oi_sizes_once all_gather "$devices"
done
for op in all_reduce reduce broadcast; do oi_sizes_once "$op" 2; done
attempt "predict takes a curve of tiny sizes" 0 "$dpbench" predict "$oi/base.json" --system "$oi_system" \
  --max_gpus=4 --curves "$oi/sizes_reduce_scatter_3.json" "$oi/sizes_all_gather_4.json" &&
  verdict "predict takes a curve of tiny sizes" handled

# ---- report: 1e400 and impossible details named, the good results kept ----
mkdir -p "$oi/report"
cp "$oi/measured/g2.json" "$oi/report/good.json"
oi_huge "$oi/measured/g4.json" "$oi/report/huge.json" items_per_sec
attempt "report: 1e400 beside a good result" 0 "$dpbench" report "$oi/report" &&
  settle "report: 1e400 beside a good result" mishandled "not named, or the good one lost: $(cat "$work/err")" \
    grep -q "huge.json: holds the number 1e400" "$work/err"
attempt "report: only 1e400" notes+1 "$dpbench" report "$oi/report/huge.json" && verdict "report: only 1e400" handled
oi_report_sets_aside() {  # name, words the note holds, statement on a result
  local name="report: $1" file="$oi/report_detail/bad.json"
  mkdir -p "$oi/report_detail"
  cp "$oi/measured/g2.json" "$oi/report_detail/good.json"
  oi_edit "$oi/measured/g4.json" "$file" "$3"
  attempt "$name" 0 "$dpbench" report "$oi/report_detail" &&
    settle "$name" mishandled "no note naming '$2': $(head -c 300 "$work/err")" grep -qF -- "bad.json: $2" "$work/err"
}
oi_report_sets_aside "a wall time of 1e300 ms" "summary.breakdown.wall_ms_per_step is 1e+300" \
  'd["summary"]["breakdown"]["wall_ms_per_step"] = 1e300'
oi_report_sets_aside "a negative part of the step" "summary.breakdown.ms_per_step.forward_ms is -1" \
  'd["summary"]["breakdown"]["ms_per_step"]["forward_ms"] = -1'
oi_report_sets_aside "a clock as text" "summary.gpu_telemetry.sm_clock_mhz_mean is \"fast\", not a number" \
  'd["summary"]["gpu_telemetry"]["sm_clock_mhz_mean"] = "fast"'
oi_report_sets_aside "a power-capped share of 3" "summary.gpu_telemetry.power_capped_share is 3" \
  'd["summary"]["gpu_telemetry"]["power_capped_share"] = 3'
oi_report_sets_aside "a negative MFU" "summary.flops.mfu is -1" 'd["summary"]["flops"]["mfu"] = -1'
oi_report_sets_aside "TFLOP/s of 1e300" "summary.flops.tflops_per_sec_per_device is 1e+300" \
  'd["summary"]["flops"]["tflops_per_sec_per_device"] = 1e300'
oi_report_sets_aside "a count of shapes as text" \
  "summary.math_paths.convolutions.classic_algorithms.forward.fft is \"x\", not a count" \
  'd["summary"]["math_paths"] = {"convolutions": {"classic_algorithms": {"forward": {"fft": "x"}}}}'

# ---- compare: runs of different workloads are refused, the flags named: exit 1 after the notes ----
oi_compare_refuses() {  # name, flag words, statement on NEW's run
  local name="compare: $1"
  mkdir -p "$oi/compare_base" "$oi/compare_new"
  cp "$oi/measured/g2.json" "$oi/compare_base/run.json"
  oi_edit "$oi/measured/g2.json" "$oi/compare_new/run.json" "$3; d['summary']['items_per_sec'] *= 0.2"
  attempt "$name" notes+1 "$dpbench" compare "$oi/compare_base" "$oi/compare_new" --fail_above=2 &&
    settle "$name" mishandled "no refusal naming '$2': $(head -c 300 "$work/err")" \
      grep -qF -- "the runs differ in $2" "$work/err"
}
oi_compare_refuses "another learning rate" "learning_rate (BASE 0.05; NEW 9)" 'd["config"]["learning_rate"] = 9'
oi_compare_refuses "another optimizer" "optimizer (BASE sgd; NEW momentum)" 'd["config"]["optimizer"] = "momentum"'
oi_compare_refuses "another momentum" "momentum (BASE" 'd["config"]["momentum"] = 0.5'
oi_compare_refuses "another loss scale" "fp16_loss_scale (BASE" 'd["config"]["fp16_loss_scale"] = 7'
mkdir -p "$oi/compare_huge"
cp "$oi/measured/g2.json" "$oi/compare_huge/good.json"
oi_huge "$oi/measured/g4.json" "$oi/compare_huge/huge.json" total_time_s
attempt "compare: 1e400 beside a good result" 0 "$dpbench" compare "$oi/compare_huge" "$oi/measured/g2.json" &&
  settle "compare: 1e400 beside a good result" mishandled "not named: $(cat "$work/err")" \
    grep -q "huge.json: holds the number 1e400" "$work/err"
attempt "compare: only 1e400" 1 "$dpbench" compare "$oi/compare_huge/huge.json" "$oi/measured/g2.json" &&
  settle "compare: only 1e400" mishandled "not named: $(cat "$work/err")" grep -q "holds the number 1e400" "$work/err"

# ---- control bytes from files: escaped on stdout and stderr, in every format ----
mkdir -p "$oi/raw"
oi_edit "$oi/measured/g2.json" "$oi/raw/g2.json" \
  'd["config"]["model"] = "trivial\u001b[2J"; d["environment"]["hostname"] = "h\u009b31m"; d["config"]["optimizer"] = "sgd\u0007"'
printf 'not json' >"$oi/raw/"$'\e[2J'"junk.json"
oi_edit "$oi/base.json" "$oi/raw_base.json" 'd["config"]["model"] = "trivial\u001b]0;title\u0007"'
for format in markdown csv json; do
  attempt "report --format=$format: control bytes" 0 "$dpbench" report "$oi/raw" --format="$format" &&
    settle "report --format=$format: control bytes" mishandled "raw control bytes" oi_nothing_raw
  attempt "compare --format=$format: control bytes" 0 "$dpbench" compare "$oi/raw" "$oi/measured/g2.json" \
    --format="$format" && settle "compare --format=$format: control bytes" mishandled "raw control bytes" oi_nothing_raw
  attempt "predict --format=$format: control bytes" 0 "$dpbench" predict "$oi/raw_base.json" "$oi/raw" \
    --system "$oi_system" --max_gpus=2 --format="$format" &&
    settle "predict --format=$format: control bytes" mishandled "raw control bytes" oi_nothing_raw
done
attempt "report: a file name with an escape sequence" 0 "$dpbench" report "$oi/raw" &&
  settle "report: a file name with an escape sequence" mishandled "not named escaped: $(cat "$work/err")" \
    grep -qF '\x1B[2Jjunk.json: not JSON' "$work/err"
oi_edit "$oi_system" "$oi/raw_system.json" 'd["\u001b[2J"] = {"value": 1, "source": "x"}'
attempt "predict: a system file's unknown field with an escape sequence" 1 "$dpbench" predict "$oi/base.json" \
  --system "$oi/raw_system.json" &&
  settle "predict: a system file's unknown field with an escape sequence" mishandled "not escaped" \
    grep -qF "unknown field '\\x1B[2J'" "$work/err"
