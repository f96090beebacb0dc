#!/usr/bin/env bash
# A closed, full or unread standard output never costs a run its result: piped into `head -1` or
# `grep -m1` the run ends with its usual exit code and a whole result file; piped into a reader
# that never reads it does not block (its console lines are dropped, and stderr says so); with
# the result or trace on standard output, stdout holds that document alone. `report`, `compare`
# and `predict`, whose product is what they print, exit 1 with one line when it cannot be written
# (a closed pipe, /dev/full, a closed descriptor).
# Usage: test_closed_stdout.sh DPBENCH
set -uo pipefail
dpbench=${1:?usage: test_closed_stdout.sh DPBENCH}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/scripts/result_checks.sh
source "$(dirname "$0")/result_checks.sh"
# shellcheck source=tests/scripts/stdout_helpers.sh
source "$(dirname "$0")/stdout_helpers.sh"

# More progress lines (one per step) than a pipe holds.
run=(--device=cpu --model=trivial --batch_size=1 --num_batches=1500 --num_warmup_batches=1 --display_every=1)
whole_result() {  # name, result file, measured steps
  [ "$(field "$2" 'd["summary"]["measured_steps"]' 2>/dev/null)" = "$3" ] || fail "$1: no whole result in $2"
}

# ---- a run piped into a reader that leaves early ----
"$dpbench" "${run[@]}" --result_file="$work/head.json" 2>"$work/head.err" | head -1 >"$work/head.out"
codes=("${PIPESTATUS[@]}")
[ "${codes[0]}" = 0 ] || fail "| head -1: dpbench exited ${codes[0]}, expected 0: $(head -c 300 "$work/head.err")"
whole_result "| head -1" "$work/head.json" 1500
grep -q "^dpbench " "$work/head.out" || fail "| head -1: head did not get the first line"
grep -q "console lines not printed: standard output's reader closed it; the run went on to its end, and its result is in $work/head.json" \
  "$work/head.err" || fail "| head -1: stderr does not say what was lost: $(head -c 300 "$work/head.err")"

"$dpbench" "${run[@]}" --result_file="$work/grep.json" 2>"$work/grep.err" | grep -m1 Model >"$work/grep.out"
codes=("${PIPESTATUS[@]}")
[ "${codes[0]}" = 0 ] || fail "| grep -m1: dpbench exited ${codes[0]}, expected 0"
whole_result "| grep -m1" "$work/grep.json" 1500
grep -q "^Model:" "$work/grep.out" || fail "| grep -m1: grep did not get the Model line"

expect_exit "closed pipe" 0 "${into_closed_pipe[@]}" "$dpbench" "${run[@]}" --result_file="$work/closed.json"
whole_result "closed pipe" "$work/closed.json" 1500
expect_exit "closed descriptor (>&-)" 0 "${with_stdout_closed[@]}" "$dpbench" "${run[@]}" --result_file="$work/shut.json"
whole_result ">&-" "$work/shut.json" 1500
grep -q "standard output is not open for writing" "$work/stderr" || fail ">&-: stderr does not say so"
if [ -c /dev/full ]; then
  expect_exit "> /dev/full" 0 "${onto_full_device[@]}" "$dpbench" "${run[@]}" --result_file="$work/full.json"
  whole_result "> /dev/full" "$work/full.json" 1500
  grep -q "No space left on device" "$work/stderr" || fail "> /dev/full: stderr does not say so"
fi

# ---- a reader that never reads: the run ends anyway (without the fix it would wait for it) ----
# shellcheck disable=SC2216  # a reader that never reads, on purpose
( "$dpbench" "${run[@]}" --result_file="$work/slow.json" 2>"$work/slow.err"; echo $? >"$work/slow.code" ) | sleep 120 &
reader=$!
for _ in $(seq 900); do [ -s "$work/slow.code" ] && break; sleep 0.1; done
if [ -s "$work/slow.code" ]; then
  [ "$(cat "$work/slow.code")" = 0 ] || fail "| sleep: dpbench exited $(cat "$work/slow.code"), expected 0"
  whole_result "| sleep" "$work/slow.json" 1500
  grep -q "console lines not printed: standard output did not take them (its reader stopped reading)" "$work/slow.err" ||
    fail "| sleep: stderr does not say what was lost: $(head -c 300 "$work/slow.err")"
else
  fail "| sleep: the run waited 90 s for a reader that does not read"
fi
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null

# ---- the result, the trace or the JSON on standard output: that document alone ----
is_json() { python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }
quick=(--device=cpu --model=trivial --num_batches=3 --num_warmup_batches=1 --display_every=1)
expect_exit "--result_file=-" 0 "$dpbench" "${quick[@]}" --result_file=-
is_json "$work/stdout" || fail "--result_file=-: stdout is not the result alone: $(head -c 200 "$work/stdout")"
grep -q "images/s: " "$work/stderr" || fail "--result_file=-: the progress lines are not on stderr"
expect_exit "--trace_file=-" 0 "$dpbench" "${quick[@]}" --result_file="$work/t.json" --trace_file=-
is_json "$work/stdout" || fail "--trace_file=-: stdout is not the trace alone: $(head -c 200 "$work/stdout")"
grep -q "Trace written to -" "$work/stderr" || fail "--trace_file=-: the console lines are not on stderr"
expect_exit "--result_file=- --trace_file=/dev/fd/1" 2 "$dpbench" "${quick[@]}" --result_file=- --trace_file=/dev/fd/1
grep -q "it is standard output, and so is --result_file=-" "$work/stderr" || fail "both on stdout: not refused as such"
expect_exit "comm_bench --json=-" 0 "$dpbench" comm_bench --device=cpu --max_bytes=4K --min_bytes=1K --iters=2 --json=-
is_json "$work/stdout" || fail "comm_bench --json=-: stdout is not the JSON alone: $(head -c 200 "$work/stdout")"
expect_exit "--result_file=- into a closed pipe" 1 "${into_closed_pipe[@]}" "$dpbench" "${quick[@]}" --result_file=-
grep -q "^dpbench: error: cannot write result file to standard output: Broken pipe" "$work/stderr" ||
  fail "--result_file=- into a closed pipe: $(tail -c 300 "$work/stderr")"

# ---- report, compare and predict: what they print is their product ----
"$dpbench" --device=cpu --model=trivial --num_batches=5 --num_warmup_batches=1 --result_file="$work/base.json" \
  --trace_file="$work/base.trace.json" >/dev/null 2>&1 || fail "the base run failed"
system="$source_dir/systems/reference_backend.json"
for command in "report $work/base.json" "compare $work/base.json $work/base.json" \
  "predict $work/base.json --system $system"; do
  read -r -a args <<<"$command"
  name=${args[0]}
  expect_exit "$name to stdout" 0 "$dpbench" "${args[@]}"
  [ -s "$work/stdout" ] || fail "$name: nothing on stdout"
  for how in closed_pipe full closed_descriptor; do
    case $how in
      closed_pipe) expect_exit "$name into a closed pipe" 1 "${into_closed_pipe[@]}" "$dpbench" "${args[@]}" ;;
      full) [ -c /dev/full ] || continue
        expect_exit "$name > /dev/full" 1 "${onto_full_device[@]}" "$dpbench" "${args[@]}" ;;
      closed_descriptor) expect_exit "$name >&-" 1 "${with_stdout_closed[@]}" "$dpbench" "${args[@]}" ;;
    esac
    lines=$(grep -c . "$work/stderr")
    if [ "$lines" != 1 ] || ! grep -q "^dpbench: error: .*$name's output" "$work/stderr"; then
      fail "$name ($how): not one error line: $(head -c 300 "$work/stderr")"
    fi
  done
done

finish "closed stdout: every result whole, no run blocked, every lost output an error"
