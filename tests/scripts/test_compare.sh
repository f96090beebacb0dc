#!/usr/bin/env bash
# dpbench compare as a CI job runs it: the real executable on a real result of the reference
# backend whose measured step times are replaced by made-up ones (a steady run, the same run, and
# one 5% slower), checking the exit codes a gate relies on: 0 when nothing is slower than
# --fail_above allows, 3 when a series is (the output still written, one error line naming it),
# 2 for a bad command line and 1 for a side with no results (one line each, no output written).
# Usage: test_compare.sh DPBENCH
set -uo pipefail
dpbench=${1:?usage: test_compare.sh DPBENCH}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/scripts/result_checks.sh
source "$(dirname "$0")/result_checks.sh"

"$dpbench" --device=cpu --model=trivial --num_batches=20 --num_warmup_batches=2 --result_file="$work/run.json" \
  >/dev/null 2>&1 || { echo "test_compare: dpbench cannot run at all here" >&2; exit 2; }
# Steady made-up step times (10 ms, +/- 1% alternately): the verdicts cannot depend on this
# machine's noise.
python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
run = json.load(open(f"{work}/run.json"))
def with_step_ms(step_ms):
    result = json.loads(json.dumps(run))
    measured = [s for s in result["steps"] if not s["warmup"] and not s.get("after_measurement")]
    for i, step in enumerate(measured):
        step["time_ms"] = step_ms * (1.01 if i % 2 else 0.99)
    return result
for name, step_ms in [("base", 10.0), ("same", 10.0), ("slower", 10.0 / 0.95)]:
    os.makedirs(f"{work}/{name}")
    json.dump(with_step_ms(step_ms), open(f"{work}/{name}/run.json", "w"))
PY
mkdir -p "$work/empty" "$work/out"

expect() {  # name, expected exit code, arguments of dpbench compare...
  local name=$1 expected=$2
  shift 2
  expect_exit "$name" "$expected" "$dpbench" compare "$@"
}
one_error_line() {  # name, pattern the line matches (other lines may only inform, e.g. of --output)
  if [ "$(grep -c '^dpbench: error: ' "$work/stderr")" != 1 ] || [ "$(grep -vc '^dpbench: info: ' "$work/stderr")" != 1 ] ||
    ! grep -q "^dpbench: error: $2" "$work/stderr"; then
    fail "$1: not one error line matching '$2': $(head -c 300 "$work/stderr")"
  fi
}

expect "the same run" 0 "$work/base" "$work/same" --fail_above=2
grep -q "| within noise |" "$work/stdout" || fail "the same run: no 'within noise' row: $(cat "$work/stdout")"
grep -q "Gate (--fail_above=2%): passed" "$work/stdout" || fail "the same run: the gate did not pass"

expect "5% slower, gate at 2%" 3 "$work/base" "$work/slower" --fail_above=2 --output "$work/out/compare.md"
grep -q "| -5.0% | slower, over --fail_above |" "$work/out/compare.md" 2>/dev/null ||
  fail "5% slower: the output is not written, or lacks the row: $(cat "$work/out/compare.md" 2>&1)"
one_error_line "5% slower" "compare: 1 series slower beyond the noise by more than --fail_above=2%: trivial"
[ "$(find "$work/out" -type f | wc -l)" = 1 ] || fail "5% slower: more than the output in $work/out: $(ls "$work/out")"

expect "5% slower as JSON" 3 "$work/base" "$work/slower" --fail_above=2 --format=json --output "$work/out/compare.json"
[ "$(field "$work/out/compare.json" 'd["over_fail_above"]')" = 1 ] || fail "5% slower as JSON: over_fail_above is not 1"
[ "$(field "$work/out/compare.json" 'd["series"][0]["verdict"]')" = slower ] || fail "5% slower as JSON: not slower"

expect "5% slower, gate at 10%" 0 "$work/base" "$work/slower" --fail_above=10
expect "5% slower, no gate" 0 "$work/base" "$work/slower"
grep -q "| slower |" "$work/stdout" || fail "5% slower, no gate: no 'slower' row: $(cat "$work/stdout")"

# Nothing in common: it passes, but says so.
python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
result = json.load(open(f"{work}/base/run.json"))
result["config"]["batch_size"] = 32
os.makedirs(f"{work}/other")
json.dump(result, open(f"{work}/other/run.json", "w"))
PY
expect "no series in common" 0 "$work/base" "$work/other" --fail_above=2
grep -q "^dpbench: warning: compare: no series is in both BASE and NEW" "$work/stderr" ||
  fail "no series in common: no warning: $(cat "$work/stderr")"

# Another workload (a learning rate, here): 5% slower, but refused, not gated, the flag named.
python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
result = json.load(open(f"{work}/slower/run.json"))
result["config"]["learning_rate"] = 9.0
os.makedirs(f"{work}/other_workload")
json.dump(result, open(f"{work}/other_workload/run.json", "w"))
PY
expect "another workload" 1 "$work/base" "$work/other_workload" --fail_above=2
grep -q "| refused: workloads differ |" "$work/stdout" || fail "another workload: no refused row: $(cat "$work/stdout")"
grep -q "^dpbench: warning: compare: refused .*: the runs differ in learning_rate (BASE .*; NEW 9.0)" "$work/stderr" ||
  fail "another workload: no warning naming the flag: $(cat "$work/stderr")"

rm -f "$work/out/bad.md"
expect "a bad --fail_above" 2 "$work/base" "$work/slower" --fail_above=two --output "$work/out/bad.md"
one_error_line "a bad --fail_above" "--fail_above=two: not a number"
expect "a flag given twice" 2 "$work/base" "$work/slower" --fail_above=2 --fail_above=5 --output "$work/out/bad.md"
one_error_line "a flag given twice" "--fail_above is given twice, as 2 and as 5; give it once"
expect "a misspelt flag" 2 "$work/base" "$work/slower" --fail-above=2 --output "$work/out/bad.md"
one_error_line "a misspelt flag" "--fail-above=2: unknown flag; did you mean --fail_above? dpbench compare --help"
expect "one path only" 2 "$work/base"
one_error_line "one path only" "compare: give two result files or folders"
expect "a missing path" 2 "$work/base" "$work/nowhere" --output "$work/out/bad.md"
one_error_line "a missing path" "compare: no such file or folder"
expect "a side without results" 1 "$work/base" "$work/empty" --output "$work/out/bad.md"
one_error_line "a side without results" "compare: no dpbench results in NEW"
[ ! -e "$work/out/bad.md" ] || fail "an output was written by a failed compare"

finish "test_compare.sh: every case as expected"
