#!/usr/bin/env bash
# Ctrl-C and SIGTERM sent to a real dpbench on the reference backend: the first signal stops the
# run after its current step, prints the summary marked interrupted, writes the result
# (summary.interrupted, the steps that ran) and exits 130 or 143; a second signal stops at once
# with no result; a signal during warm-up writes none. Under mpirun (given MPIEXEC), a SIGTERM
# to one rank stops every rank after the same step and rank 0 writes the result.
# Usage: test_interrupts.sh DPBENCH [MPIEXEC]
set -uo pipefail
dpbench=${1:?usage: test_interrupts.sh DPBENCH [MPIEXEC]}
mpiexec=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0 checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() {  # check DESCRIPTION COMMAND...
  local what=$1
  shift
  checks=$((checks + 1))
  "$@" || fail "$what"
}
field() {  # result file, python expression over d
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
# wait_for SECONDS FILE PATTERN: until FILE has a line matching PATTERN.
wait_for() {
  local tenths=0
  until grep -q "$3" "$2" 2>/dev/null; do
    ((tenths++ < $1 * 10)) || { fail "no line '$3' in $2 within $1 s: $(tail -n 3 "$2")"; return 1; }
    sleep 0.1
  done
}
# Sets rc to the exit code of background job PID, waiting at most SECONDS for it
# ("did-not-end" when it had to be killed). Not in $(...): a subshell cannot wait for the job.
end_of() {
  local pid=$1 tenths=0
  while kill -0 "$pid" 2>/dev/null && ((tenths++ < $2 * 10)); do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -s KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    rc=did-not-end
    return
  fi
  rc=0
  wait "$pid" || rc=$?
}

endless=(--device=cpu --model=trivial --batch_size=4 --num_batches=1000000 --num_warmup_batches=2 --display_every=5)

# One signal during the measured steps, on 1 and on 3 devices (3: replicated, so every device
# must stop after the same step or the exchange of the next one would wait forever).
for case in INT:130:1:independent TERM:143:3:replicated; do
  IFS=: read -r sig code devices strategy <<<"$case"
  tag=$sig-$devices
  "$dpbench" "${endless[@]}" --num_gpus="$devices" --variable_update="$strategy" --result_file="$work/$tag.json" \
    >"$work/$tag.out" 2>"$work/$tag.err" &
  pid=$!
  wait_for 60 "$work/$tag.out" '^ *10  images/s' || continue
  kill -s "$sig" "$pid"
  end_of "$pid" 30
  check "$tag: exit code $rc, expected $code" [ "$rc" = "$code" ]
  check "$tag: says what it does: $(cat "$work/$tag.err")" grep -q "^dpbench: SIG$sig: stopping after the current step" "$work/$tag.err"
  check "$tag: the summary is marked: $(tail -n 14 "$work/$tag.out")" grep -qE "^Interrupted: +stopped early, after [0-9]+ of 1000000 measured steps" "$work/$tag.out"
  check "$tag: the result is written" grep -q "^Result written to $work/$tag.json" "$work/$tag.out"
  [ -f "$work/$tag.json" ] || continue
  check "$tag: summary.interrupted" [ "$(field "$work/$tag.json" 'd["summary"]["interrupted"]')" = True ]
  measured=$(field "$work/$tag.json" 'd["summary"]["measured_steps"]')
  check "$tag: at least the 10 steps seen measured ($measured)" [ "$measured" -ge 10 ]
  check "$tag: the step records are the steps that ran" \
    [ "$(field "$work/$tag.json" 'len(d["steps"])')" = "$((measured + 2))" ]
  check "$tag: no temporary file left: $(ls "$work")" [ -z "$(find "$work" -name '*.tmp.*')" ]
  # Reports leave it out, with a note.
  "$dpbench" report "$work/$tag.json" >"$work/$tag.report" 2>&1
  check "$tag: the report skips it: $(cat "$work/$tag.report")" grep -q "skipped $work/$tag.json: an interrupted run" "$work/$tag.report"
done

# A second Ctrl-C stops at once, writing nothing: sent while a step of seconds runs (resnet50 on
# the reference backend), after the first was taken.
"$dpbench" --device=cpu --model=resnet50 --batch_size=1 --num_batches=1000 --num_warmup_batches=0 \
  --result_file="$work/twice.json" >"$work/twice.out" 2>"$work/twice.err" &
pid=$!
if wait_for 120 "$work/twice.out" '^No warm-up steps'; then
  kill -s INT "$pid"
  wait_for 10 "$work/twice.err" 'SIGINT: stopping after the current step'
  kill -s INT "$pid"
  end_of "$pid" 10
  check "twice: exit code $rc, expected 130" [ "$rc" = 130 ]
  check "twice: no result" [ ! -e "$work/twice.json" ]
  check "twice: no temporary file left" [ -z "$(find "$work" -name 'twice.json.tmp.*')" ]
  check "twice: says so: $(cat "$work/twice.err")" grep -q "^dpbench: stopped at once; no result written" "$work/twice.err"
fi

# A signal during warm-up: nothing was measured, nothing is written.
"$dpbench" --device=cpu --model=trivial --batch_size=4 --num_batches=5 --num_warmup_batches=1000000 \
  --result_file="$work/warmup.json" >"$work/warmup.out" 2>"$work/warmup.err" &
pid=$!
if wait_for 60 "$work/warmup.out" '^Running warm up'; then
  sleep 0.5
  kill -s TERM "$pid"
  end_of "$pid" 30
  check "warm-up: exit code $rc, expected 143" [ "$rc" = 143 ]
  check "warm-up: no result" [ ! -e "$work/warmup.json" ]
  check "warm-up: says why: $(cat "$work/warmup.err")" \
    grep -q "^dpbench: warning: stopped by SIGTERM before any step was measured; no result written" "$work/warmup.err"
fi

# Under mpirun: one rank's SIGTERM stops both after the same step.
if [ -n "$mpiexec" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  timeout 120 "$mpiexec" -n 2 "$dpbench" "${endless[@]}" --variable_update=distributed_all_reduce \
    --result_file="$work/mpi.json" >"$work/mpi.out" 2>&1 &
  pid=$!
  if wait_for 60 "$work/mpi.out" '^ *10  images/s'; then
    rank=$(pgrep -f -- "--result_file=$work/mpi.json" | while read -r p; do
      [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$(basename "$dpbench" | cut -c 1-15)" ] && echo "$p"; done | tail -n 1)
    check "mpi: a rank to signal" [ -n "$rank" ]
    [ -n "$rank" ] && kill -s TERM "$rank"
    end_of "$pid" 60
    check "mpi: the job ended ($rc)" [ "$rc" != did-not-end ]
    check "mpi: rank 0 wrote the result: $(tail -n 5 "$work/mpi.out")" [ -f "$work/mpi.json" ]
    if [ -f "$work/mpi.json" ]; then
      check "mpi: summary.interrupted" [ "$(field "$work/mpi.json" 'd["summary"]["interrupted"]')" = True ]
      check "mpi: 2 devices" [ "$(field "$work/mpi.json" 'd["summary"]["num_devices"]')" = 2 ]
    fi
  fi
fi

echo "$checks checks, $failures failures"
((failures == 0))
