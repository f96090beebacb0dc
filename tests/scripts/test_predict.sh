#!/usr/bin/env bash
# dpbench predict end to end on the reference backend: the trivial model on 1 device with
# --trace_file (the base, with summary.timeline), replicated on 2 and 4 devices (the measurements),
# then the prediction from the 1-device run and systems/reference_backend.json: it must succeed,
# print the table with the error column, write the SVG, and stay within a loose tolerance of the
# reference runs; the same from collective curves that dpbench comm_bench measured on 2 and 4
# devices (--curves); then the errors a user meets (one line, the right exit code, nothing
# written).
# Usage: test_predict.sh DPBENCH
set -uo pipefail
dpbench=${1:?usage: test_predict.sh DPBENCH}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
system="$source_dir/systems/reference_backend.json"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/scripts/result_checks.sh
source "$(dirname "$0")/result_checks.sh"

run() {  # devices, result file, extra flags...
  local devices=$1 result=$2
  shift 2
  "$dpbench" --device=cpu --model=trivial --num_gpus="$devices" --variable_update=replicated --num_batches=20 \
    --num_warmup_batches=3 --result_file="$result" "$@" >"$work/run.log" 2>&1 ||
    { echo "test_predict: dpbench cannot run here: $(tail -3 "$work/run.log")" >&2; exit 2; }
}
run 1 "$work/g1.json" --trace_file="$work/g1.trace.json" --trace_steps=1:20
run 2 "$work/g2.json"
run 4 "$work/g4.json"
[ "$(field "$work/g1.json" 'd["summary"]["timeline"]["traced_steps"]')" = 20 ] ||
  fail "the 1-device run with --trace_file has no summary.timeline of 20 steps"

mkdir -p "$work/out"
expect() {  # name, expected exit code, arguments of dpbench predict...
  local name=$1 expected=$2
  shift 2
  expect_exit "$name" "$expected" "$dpbench" predict "$@"
}
one_error_line() {  # name, pattern the line matches
  if [ "$(grep -c '^dpbench: error: ' "$work/stderr")" != 1 ] || ! grep -q "^dpbench: error: $2" "$work/stderr"; then
    fail "$1: not one error line matching '$2': $(head -c 300 "$work/stderr")"
  fi
}

expect "predict with measurements" 0 "$work/g1.json" "$work/g2.json" "$work/g4.json" --system "$system" \
  --max_gpus=8 --plot "$work/out/predict.svg"
grep -q "| Strategy | GPUs | Step (ms) | .* | Error |" "$work/stdout" || fail "no table with an error column: $(head -c 600 "$work/stdout")"
grep -q "^| replicated (nccl) | 4 | .* | [+-][0-9.]*% | - | - |$" "$work/stdout" || fail "no error for 4 devices: $(cat "$work/stdout")"
grep -q "<svg" "$work/out/predict.svg" 2>/dev/null || fail "no SVG written"
grep -q "replicated (nccl) (measured)" "$work/out/predict.svg" || fail "the SVG does not draw the measured runs"

# The tolerance. The reference backend's devices are host threads sharing this machine's cores,
# which the prediction does not model (a GPU's compute does not slow when another GPU works): N
# devices on C cores make every step up to N/C times slower (N times on one core), and its timing
# is wall clock on a shared CI machine (runs of one build differ by a third, README "dpbench
# compare"). So the measured speed may fall short of the prediction by up to 2N times, and exceed
# it by up to 2 times (nothing in an N-device reference run is faster than in the 1-device run it
# was predicted from; the factor 2 is noise). Narrower bounds would test the machine, not dpbench.
within_tolerance() {  # name, predict --format=json output
  python3 - "$2" <<'PY' || fail "$1: a prediction outside the tolerance (above)"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
measured = [r for r in rows if r["measured_items_per_sec"] is not None]
assert len(measured) == 2, f"expected the 2- and 4-device runs compared, got {len(measured)}"
bad = 0
for r in measured:
    ratio = r["items_per_sec"] / r["measured_items_per_sec"]
    n = r["gpu_number"]
    ok = 0.5 <= ratio <= 2 * n
    print(f"{r['strategy']}, {n} devices: predicted {r['items_per_sec']:.1f}, measured {r['measured_items_per_sec']:.1f}, "
          f"ratio {ratio:.2f} ({'within' if ok else 'outside'} [0.5, {2 * n}])")
    bad += not ok
one = [r for r in rows if r["gpu_number"] == 1]
assert all(r["efficiency_pct"] == 100 for r in one), "1 device is not the measured step"
sys.exit(1 if bad else 0)
PY
}
expect "as JSON" 0 "$work/g1.json" "$work/g2.json" "$work/g4.json" --system "$system" --max_gpus=4 --format=json \
  --output "$work/out/predict.json"
within_tolerance "the system file" "$work/out/predict.json"

# Collective curves: comm_bench's all-reduce on 2 and on 4 reference devices, each the curve of one
# prediction (one curve per collective and link kind; its busbw serves every rank count). The
# other collectives and the host copies stay the system file's.
for n in 2 4; do
  curve="$work/allreduce_g$n.json"
  "$dpbench" comm_bench --device=cpu --num_gpus="$n" --min_bytes=1K --max_bytes=16M --iters=5 --warmup_iters=1 \
    --json "$curve" >"$work/comm_bench.log" 2>&1 || { fail "comm_bench on $n devices: $(tail -2 "$work/comm_bench.log")"; continue; }
  [ "$(field "$curve" '(d["ranks"], d["hosts"], d["link"], d["config"]["op"], d["config"]["backend"])')" = \
    "($n, 1, 'intra_host', 'all_reduce', 'reference')" ] || fail "comm_bench on $n devices: ranks, hosts, link, op, backend"
  expect "curves of $n devices" 0 "$work/g1.json" "$work/g2.json" "$work/g4.json" --system "$system" --max_gpus=4 \
    --format=json --output "$work/out/curves_g$n.json" --curves "$curve"
  [ "$(field "$work/out/curves_g$n.json" '[(c["path"], c["op"], c["link"], c["ranks"], c["min_bytes"], c["max_bytes"]) for c in d["costs"]["curves"]]')" = \
    "[('$curve', 'all_reduce', 'intra_host', $n, 1024, 16777216)]" ] || fail "curves of $n devices: costs.curves"
  [ "$(field "$work/out/curves_g$n.json" '"all_reduce intra_host" not in d["costs"]["system_file"] and "host copies" in d["costs"]["system_file"]')" = True ] ||
    fail "curves of $n devices: costs.system_file"
  within_tolerance "curves of $n devices" "$work/out/curves_g$n.json"
done
expect "curves, markdown" 0 "$work/g1.json" "$work/g2.json" --system "$system" --max_gpus=2 --curves "$work/allreduce_g2.json"
grep -q "^Costs from measured curves" "$work/stdout" || fail "markdown: no line on the curves: $(head -c 900 "$work/stdout")"
grep -qF -- "- all_reduce intra_host: \`$work/allreduce_g2.json\`, 2 ranks on 1 host (reference backend, in-process, fp32), 1 KiB to 16 MiB" \
  "$work/stdout" || fail "markdown: the curve is not named: $(grep -A3 '^Costs' "$work/stdout")"
grep -q "^Costs from the system file (alpha-beta): reduce_scatter intra_host, .*host copies\.$" "$work/stdout" ||
  fail "markdown: the system file's costs are not named"
grep -qF "Compute beside a transfer: not slowed (the system file gives no compute_slowdown_beside_communication)." \
  "$work/stdout" || fail "markdown: does not say compute beside a transfer is not slowed"
# A curve that carries compute's slowdown beside the collective (comm_bench --beside_compute, on GPUs)
# slows compute beside its transfers, and the output says the slowdown came from it.
python3 - "$work/allreduce_g2.json" "$work/slowing_curve.json" <<'PY'
import json, sys
curve = json.load(open(sys.argv[1]))
for row in curve["rows"]:
    row["compute_slowdown"] = 0.5
    row["time_beside_compute_us"] = row["time_us"]
json.dump(curve, open(sys.argv[2], "w"))
PY
expect "a curve with compute's slowdown" 0 "$work/g1.json" "$work/g2.json" --system "$system" --max_gpus=2 \
  --curves "$work/slowing_curve.json"
grep -qF "Compute beside a transfer: slowed as comm_bench --beside_compute measured it beside all_reduce intra_host on 2 ranks" \
  "$work/stdout" || fail "markdown: does not say the slowdown came from the curve: $(grep 'Compute beside' "$work/stdout")"
grep -qF "compute beside it slowed 50.0% to 50.0%" "$work/stdout" || fail "markdown: the curve's slowdown is not described"
# A curve that disagrees with the system file (more ranks in one host than its GPUs per host) or
# comes from another backend than BASE is used, with a note saying so.
python3 - "$work/allreduce_g2.json" "$work/odd_curve.json" <<'PY'
import json, sys
curve = json.load(open(sys.argv[1]))
curve["ranks"], curve["config"]["backend"] = 128, "cuda"
json.dump(curve, open(sys.argv[2], "w"))
PY
expect "a curve the system file disagrees with" 0 "$work/g1.json" --system "$system" --max_gpus=2 --curves "$work/odd_curve.json"
grep -q "odd_curve.json\` was measured on 128 ranks inside one host, but the system file has 64 GPUs per host" "$work/stderr" ||
  fail "no note on a curve of more ranks than a host's GPUs: $(cat "$work/stderr")"
grep -q "odd_curve.json\` was measured on the cuda backend, BASE ran on reference" "$work/stderr" ||
  fail "no note on a curve of another backend: $(cat "$work/stderr")"
# Curves of one collective on 2 and 4 devices: each prices its own count, both are named.
expect "curves on two rank counts" 0 "$work/g1.json" "$work/g2.json" "$work/g4.json" --system "$system" --max_gpus=4 \
  --curves "$work/allreduce_g2.json" "$work/allreduce_g4.json"
{ grep -qF -- "\`$work/allreduce_g2.json\`, 2 ranks" "$work/stdout" && grep -qF -- "\`$work/allreduce_g4.json\`, 4 ranks" "$work/stdout"; } ||
  fail "markdown: both curves are not named: $(grep -A3 '^Costs' "$work/stdout")"
expect "curves, CSV" 0 "$work/g1.json" --system "$system" --max_gpus=2 --format=csv --curves "$work/allreduce_g2.json"
{ grep -q ",curve_files," "$work/stdout" && grep -qF "$work/allreduce_g2.json" "$work/stdout"; } || fail "CSV: no curve_files"

expect "CSV" 0 "$work/g1.json" --system "$system" --max_gpus=4 --format=csv
grep -q "^strategy,gpu_number,modelled,step_ms" "$work/stdout" || fail "CSV: no header"

rm -f "$work/out/bad.md"
expect "no --system" 2 "$work/g1.json" --output "$work/out/bad.md"
one_error_line "no --system" "predict: give the target system with --system FILE"
expect "a bad --max_gpus" 2 "$work/g1.json" --system "$system" --max_gpus=0
one_error_line "a bad --max_gpus" "--max_gpus=0"
expect "--system given twice" 2 "$work/g1.json" --system "$system" --system "$work/g2.json" --output "$work/out/bad.md"
one_error_line "--system given twice" "--system is given twice, as .* and as .*; give it once"
expect "a missing base" 2 "$work/nowhere.json" --system "$system"
one_error_line "a missing base" "predict: no such file or folder"
expect "a missing system file" 2 "$work/g1.json" --system "$work/nowhere_system.json"
one_error_line "a missing system file" "predict: no such system file"
expect "a multi-device base" 1 "$work/g2.json" --system "$system" --output "$work/out/bad.md"
one_error_line "a multi-device base" "predict: BASE '.*' is a 2-GPU result; give a 1-GPU run"
run 1 "$work/untraced.json"
expect "a base without timeline" 1 "$work/untraced.json" --system "$system" --output "$work/out/bad.md"
one_error_line "a base without timeline" "predict: BASE '.*' has no summary.timeline .* rerun it with --trace_file"
"$dpbench" --device=cpu --model=trivial --forward_only --num_batches=3 --num_warmup_batches=1 \
  --trace_file="$work/inference.trace.json" --result_file="$work/inference.json" >"$work/run.log" 2>&1 ||
  fail "a forward-only run: $(tail -2 "$work/run.log")"
expect "a forward-only base" 1 "$work/inference.json" --system "$system" --output "$work/out/bad.md"
one_error_line "a forward-only base" "predict: BASE '.*' is a forward-only run (--forward_only): it has no backward, .*; rerun it without --forward_only"
expect "an impossible --bucket_cap_mb" 2 "$work/g1.json" --system "$system" --bucket_cap_mb=1048577 --output "$work/out/bad.md"
one_error_line "an impossible --bucket_cap_mb" "--bucket_cap_mb=1048577: too large; accepted: up to 1048576 (1 TiB)"
python3 - "$system" "$work/bad_system.json" <<'PY'
import json, sys
system = json.load(open(sys.argv[1]))
system["nvlink_generation"] = {"value": 4, "source": "made up"}
json.dump(system, open(sys.argv[2], "w"))
PY
expect "an unknown system field" 1 "$work/g1.json" --system "$work/bad_system.json" --output "$work/out/bad.md"
one_error_line "an unknown system field" "system file '.*': unknown field 'nvlink_generation'; accepted: name,"
expect "a missing curve file" 2 "$work/g1.json" --system "$system" --curves "$work/nowhere_curve.json" --output "$work/out/bad.md"
one_error_line "a missing curve file" "predict: no such curve file: '.*nowhere_curve.json' (give files dpbench comm_bench --json FILE wrote)"
expect "a result as a curve" 1 "$work/g1.json" --system "$system" --curves "$work/g2.json" --output "$work/out/bad.md"
one_error_line "a result as a curve" "predict: curve file '.*g2.json': a training result, not dpbench comm_bench output"
expect "a folder as a curve" 1 "$work/g1.json" --system "$system" --curves "$work/out" --output "$work/out/bad.md"
one_error_line "a folder as a curve" "predict: cannot read curve file '.*out': it "
expect "two curves of one collective on one rank count" 1 "$work/g1.json" --system "$system" --output "$work/out/bad.md" \
  --curves "$work/allreduce_g2.json" "$work/allreduce_g2.json"
one_error_line "two curves of one collective on one rank count" \
  "predict: curve files '.*allreduce_g2.json' and '.*allreduce_g2.json' both measure all_reduce over intra_host on 2 ranks; give one curve per collective, link kind and rank count"
[ ! -e "$work/out/bad.md" ] || fail "an output was written by a failed predict"

finish "test_predict.sh: every case as expected"
