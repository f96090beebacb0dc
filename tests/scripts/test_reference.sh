#!/usr/bin/env bash
# Reference results through the real executable (README, "Is my number normal?"):
# - dpbench's own references, found from the build tree without any setting: a copy of one is
#   its own reference (ratio 1, within noise, exit 0), the copy made 10% slower trips
#   --fail_above=5 (exit 3), a copy of another batch has none (exit 0, a warning naming the nearest);
# - a run on the reference backend with DPBENCH_REFERENCE_RESULTS naming a folder of
#   reference-backend references: its console's Reference: line and summary.reference, matched
#   and not (one line); without the variable, neither (dpbench's references are GPU runs);
# - `dpbench compare --reference` as a gate on reference-backend results with made-up steady step
#   times, and on hand-made GPU results (a reference-backend result made an H200 run at 700 W,
#   against one at a 500 W cap): exit codes 0, 3, 1 (refused, no results) and 2 (command lines),
#   and the machine difference named.
# Usage: test_reference.sh DPBENCH
set -uo pipefail
dpbench=${1:?usage: test_reference.sh DPBENCH}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/scripts/result_checks.sh
source "$(dirname "$0")/result_checks.sh"
unset DPBENCH_REFERENCE_RESULTS

# ---- dpbench's own references, from the build tree ----------------------------------------------
shipped=$source_dir/reference_results/2026-11-29_h200/gpt_124m_b16_bf16_1gpu.json
[ -f "$shipped" ] || { fail "no $shipped"; finish ""; }
mkdir -p "$work/mine"
cp "$shipped" "$work/mine/same.json"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
run = json.load(open(f"{work}/mine/same.json"))
slower = json.loads(json.dumps(run))
for step in slower["steps"]:
    step["time_ms"] /= 0.9
json.dump(slower, open(f"{work}/slower.json", "w"))
other = json.loads(json.dumps(run))
other["config"]["batch_size"] = 32
json.dump(other, open(f"{work}/other_batch.json", "w"))
PY
expect_exit "a shipped reference against itself" 0 "$dpbench" compare --reference "$work/mine" --fail_above=5 --format=json
[ "$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["base"]["path"])' <"$work/stdout")" = \
  "$source_dir/reference_results" ] || fail "the build's dpbench does not read the checkout's references: $(head -c 300 "$work/stdout")"
[ "$(python3 -c 'import json,sys; d=json.load(sys.stdin); s=d["series"][0]; print(s["ratio"], s["verdict"], s["reference"]["label"])' \
  <"$work/stdout")" = "1.0 within noise H200 reference (2026-11-29, 700 W)" ] ||
  fail "a shipped reference against itself: $(head -c 600 "$work/stdout")"
expect_exit "a shipped reference 10% slower" 3 "$dpbench" compare --reference "$work/slower.json" --fail_above=5
grep -q "| -10.0% | slower, over --fail_above |" "$work/stdout" || fail "10% slower: no row: $(cat "$work/stdout")"
grep -q "^dpbench: error: compare: 1 series slower beyond the noise by more than --fail_above=5%: gpt 124m" "$work/stderr" ||
  fail "10% slower: no error line: $(cat "$work/stderr")"
expect_exit "another batch" 0 "$dpbench" compare --reference "$work/other_batch.json" --fail_above=5
grep -q "^dpbench: warning: compare: no reference for gpt 124m, independent, bf16, batch 32 per GPU (weak scaling), 1 GPU (nearest: .*, which differs in batch_size (this run 32; reference 16))" \
  "$work/stderr" || fail "another batch: no warning naming the nearest: $(cat "$work/stderr")"

# ---- runs on the reference backend against reference-backend references -------------------------
run() {  # result file, more flags...: a short trivial run on the reference backend
  local result=$1
  shift
  "$dpbench" --device=cpu --model=trivial --num_batches=20 --num_warmup_batches=2 --result_file="$result" "$@"
}
mkdir -p "$work/refs"
run "$work/refs/trivial.json" >/dev/null 2>&1 || { fail "dpbench cannot run at all here"; finish ""; }
DPBENCH_REFERENCE_RESULTS=$work/refs expect_exit "a run with a reference" 0 run "$work/run.json"
[ "$(grep -c '^Reference:    reference-backend reference (.*): .* images/s; this run [0-9]*% (.*)$' "$work/stdout")" = 1 ] ||
  fail "a run with a reference: no Reference: line: $(cat "$work/stdout")"
[ "$(field "$work/run.json" 'd["summary"]["reference"]["matched"], d["summary"]["reference"]["files"]')" = "(True, ['trivial.json'])" ] ||
  fail "a run with a reference: summary.reference: $(field "$work/run.json" 'd["summary"].get("reference")' 2>&1)"
close_to "$(field "$work/run.json" 'd["summary"]["reference"]["ratio"]')" \
  "$(field "$work/run.json" 'd["summary"]["reference"]["run_speed"] / d["summary"]["reference"]["reference_speed"]')" ||
  fail "a run with a reference: the ratio is not run_speed / reference_speed"
DPBENCH_REFERENCE_RESULTS=$work/refs expect_exit "a run without a reference" 0 run "$work/other.json" --batch_size=32
if [ "$(grep -c '^Reference:' "$work/stdout")" != 1 ] ||
  ! grep -q "^Reference:    none for this workload among 1 reference result in $work/refs (nearest: trivial.json, reference-backend reference (.*), which differs in batch_size (this run 32; reference 64))$" \
    "$work/stdout"; then
  fail "a run without a reference: not one line naming the nearest: $(grep -A1 Reference "$work/stdout")"
fi
# The line after it is the summary's closing rule: one line, nothing more.
grep -A1 '^Reference:' "$work/stdout" | tail -n 1 | grep -q '^-\{64\}$' || fail "a run without a reference: more than one line"
[ "$(field "$work/other.json" 'd["summary"]["reference"]["matched"]')" = False ] || fail "a run without a reference: matched"
expect_exit "a reference-backend run, no folder given" 0 run "$work/plain.json"
! grep -q '^Reference:' "$work/stdout" || fail "a reference-backend run compared with dpbench's GPU references: $(cat "$work/stdout")"
[ "$(field "$work/plain.json" '"reference" in d["summary"]')" = False ] || fail "a reference-backend run has summary.reference"

# ---- the gate on reference-backend results -------------------------------------------------------
# Steady made-up step times (10 ms, +/- 1% alternately), so the verdicts do not depend on this
# machine's noise; and the same made GPU runs (an H200 at 700 W; one at a 500 W cap).
python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
run = json.load(open(f"{work}/run.json"))
run["summary"].pop("reference", None)
def made(step_ms, gpu=None, power_limit=700.0, **config):
    result = json.loads(json.dumps(run))
    measured = [s for s in result["steps"] if not s["warmup"] and not s.get("after_measurement")]
    for i, step in enumerate(measured):
        step["time_ms"] = step_ms * (1.01 if i % 2 else 0.99)
    result["config"].update(config)
    if gpu:
        environment = result["environment"]
        environment["backend"] = "cuda"
        environment["devices"] = [{"index": 0, "name": gpu, "memory_bytes": 150109880320,
                                   "compute_capability": "9.0", "pci_bus_id": "0000:00:06.0"}]
        environment.update({"driver": "580.159.04", "cuda": "13.0", "cuda_driver": "13.0", "cudnn": "9.14.0",
                            "nccl": "2.28.3", "cublas": "13.1.0"})
        result["config"]["device"] = "gpu"
        result["summary"]["gpu_telemetry"] = {
            "available": True, "source": "nvml", "power_limit_w_mean": power_limit, "sm_clock_mhz_mean": 1980.0,
            "power_w_mean": 500.0, "power_capped_share": 0.0, "thermal_limited_share": 0.0,
            "devices": [{"pci_bus_id": "0000:00:06.0", "max_sm_clock_mhz": 1980.0, "power_limit_w": power_limit,
                         "nvlink_peers": [], "hardware_slowdown_share": 0.0}]}
    return result
cases = {
    "refs_made/trivial.json": made(10.0),
    "refs_made/h200.json": made(10.0, gpu="NVIDIA H200"),
    "same/run.json": made(10.0),
    "slower/run.json": made(10.0 / 0.95),
    "mixed/a.json": made(10.0),
    "mixed/b.json": made(10.0, learning_rate=9.0),
    "gpu_capped/run.json": made(10.0 / 0.9, gpu="NVIDIA H200", power_limit=500.0),
}
for path, result in cases.items():
    os.makedirs(os.path.dirname(f"{work}/{path}"), exist_ok=True)
    json.dump(result, open(f"{work}/{path}", "w"))
PY
mkdir -p "$work/empty" "$work/out"
refs=--reference_dir=$work/refs_made
expect_exit "the same run" 0 "$dpbench" compare --reference "$refs" "$work/same" --fail_above=2
grep -q "| within noise |" "$work/stdout" || fail "the same run: no 'within noise' row: $(cat "$work/stdout")"
grep -q "Gate (--fail_above=2%): passed" "$work/stdout" || fail "the same run: the gate did not pass"
expect_exit "5% slower, gate at 2%" 3 "$dpbench" compare --reference "$refs" "$work/slower" --fail_above=2 \
  --output "$work/out/compare.md"
grep -q "| -5.0% | slower, over --fail_above |" "$work/out/compare.md" 2>/dev/null ||
  fail "5% slower: the output is not written, or lacks the row: $(cat "$work/out/compare.md" 2>&1)"
expect_exit "5% slower, gate at 10%" 0 "$dpbench" compare --reference "$refs" "$work/slower" --fail_above=10
expect_exit "runs of two workloads" 1 "$dpbench" compare --reference "$refs" "$work/mixed" --fail_above=2
grep -q "^dpbench: warning: compare: refused .*: the runs differ in learning_rate" "$work/stderr" ||
  fail "runs of two workloads: no warning naming the flag: $(cat "$work/stderr")"
# A hand-made GPU run at a 500 W cap, 10% slower than the H200 reference at 700 W: the gate
# fails, the power limit named as what could explain it.
expect_exit "a capped GPU" 3 "$dpbench" compare --reference "$refs" "$work/gpu_capped" --fail_above=5
grep -q "H200 reference (.*, 700 W) (\`$work/refs_made/h200.json\`); the machines differ: power limit 500 W (reference 700 W)" \
  "$work/stdout" || fail "a capped GPU: the difference is not named: $(cat "$work/stdout")"
expect_exit "a capped GPU, gate at 12%" 0 "$dpbench" compare --reference "$refs" "$work/gpu_capped" --fail_above=12

rm -f "$work/out/bad.md"
expect_exit "--reference without results" 2 "$dpbench" compare --reference "$refs" --output "$work/out/bad.md"
expect_exit "--reference_dir without --reference" 2 "$dpbench" compare "$refs" "$work/same" "$work/slower" \
  --output "$work/out/bad.md"
expect_exit "a missing --reference_dir" 2 "$dpbench" compare --reference --reference_dir="$work/nowhere" "$work/same" \
  --output "$work/out/bad.md"
expect_exit "an empty --reference_dir" 1 "$dpbench" compare --reference --reference_dir="$work/empty" "$work/same" \
  --output "$work/out/bad.md"
grep -q "^dpbench: error: compare: no dpbench results in the reference results '$work/empty': no \*.json files in it$" \
  "$work/stderr" || fail "an empty --reference_dir: $(cat "$work/stderr")"
expect_exit "results without results" 1 "$dpbench" compare --reference "$refs" "$work/empty" --output "$work/out/bad.md"
[ ! -e "$work/out/bad.md" ] || fail "an output was written by a failed compare"
DPBENCH_REFERENCE_RESULTS=$work/refs_made expect_exit "DPBENCH_REFERENCE_RESULTS for compare" 0 \
  "$dpbench" compare --reference "$work/same" --format=json
[ "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["base"]["path"])' <"$work/stdout")" = "$work/refs_made" ] ||
  fail "compare --reference does not read DPBENCH_REFERENCE_RESULTS: $(head -c 300 "$work/stdout")"

finish "test_reference.sh: every case as expected"
