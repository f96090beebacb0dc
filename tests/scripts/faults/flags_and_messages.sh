# Fault cases (sourced by tests/scripts/fault_injection.sh): flag values of any length or byte,
# messages that name the real problem, a run whose training diverges, and sweeps whose output
# folder is odd or goes away.
# shellcheck shell=bash
# shellcheck disable=SC2154  # dpbench, work, quick, faults, onto_full_device...: set by the harness
# shellcheck source=tests/scripts/stdout_helpers.sh
source "$faults/../stdout_helpers.sh"

# ---- no argument's length crashes the parser (each is one line and exit 2, never a signal) ----
long_word() { head -c "$1" /dev/zero | tr '\0' "${2:-x}"; }
for length in 4096 30000 100000 131000; do  # 131071: the longest argument Linux passes
  reject "--model= of $length characters" "${quick[@]}" --model="$(long_word "$length" m)"
  reject "--result_file= of $length characters" "${quick[@]}" --result_file="$work/$(long_word "$length" r).json"
  reject "an unknown flag of $length characters" "${quick[@]}" "--$(long_word "$length" z)=1"
done
reject "--precision= of 30000 characters" "${quick[@]}" --precision="$(long_word 30000 p)"
reject "--variable_update= of 30000 characters" "${quick[@]}" --variable_update="$(long_word 30000 v)"
reject "--trace_file= of 30000 characters" "${quick[@]}" --trace_file="$work/$(long_word 30000 t).json"
reject "--data_dir= of 30000 characters" "${quick[@]}" --data_dir="$work/$(long_word 30000 d)"
reject "--gpu_indices= of 30000 characters" "${quick[@]}" --gpu_indices="$(long_word 30000 1)"
reject "--batch_size= of 30000 digits" "${quick[@]}" --batch_size="$(long_word 30000 9)"
reject "--learning_rate= of 30000 digits" "${quick[@]}" --learning_rate="0.$(long_word 30000 1)x"
reject "--trace_steps= of 30000 digits" "${quick[@]}" --trace_file="$work/t.json" --trace_steps="1:$(long_word 30000 9)"
reject "a value of 30000 characters as the next argument" "${quick[@]}" --model "$(long_word 30000 q)"
reject "a stray word of 30000 characters" "${quick[@]}" "$(long_word 30000 w)"
# A small stack: the path of PATH_MAX bytes once overflowed a recursive parser.
attempt "PATH_MAX path under ulimit -s 1024" 2 bash -c 'ulimit -s 1024 && exec "$@"' _ "$dpbench" "${quick[@]}" \
  --result_file="$work/missing/$(long_word 4080 s).json" && verdict "PATH_MAX path under ulimit -s 1024" handled
attempt "30000-character model under ulimit -s 1024" 2 bash -c 'ulimit -s 1024 && exec "$@"' _ "$dpbench" "${quick[@]}" \
  --model="$(long_word 30000 m)" && verdict "30000-character model under ulimit -s 1024" handled
many_flags=()
for ((i = 0; i < 20000; i++)); do many_flags+=(--display_every=1); done
run_ok "20000 repeats of one flag" "$dpbench" "${quick[@]}" "${many_flags[@]}" --result_file=
for command in report compare predict comm_bench strategies; do
  attempt "$command with a 100000-character flag" any "$dpbench" "$command" "--$(long_word 100000 f)=1" &&
    settle "$command with a 100000-character flag" mishandled "more than one line" test "$(grep -c . "$work/err")" -le 1
done
# Every command reads its command line with one reader (cli/flag_reader.h): one wording each.
one_wording() {  # name, the line expected, dpbench's arguments...
  local name=$1 line=$2
  shift 2
  attempt "$name" 2 "$dpbench" "$@" &&
    settle "$name" mishandled "not the one wording: $(head -c 300 "$work/err")" grep -qxF "dpbench: error: $line" "$work/err"
}
for entry in "run num_batches N" "report format FORMAT" "compare format FORMAT" "predict format FORMAT" \
  "comm_bench iters N" "strategies format text|json"; do
  read -r command flag hint <<<"$entry"
  help="dpbench $command --help"
  [ "$command" = run ] && help="dpbench --help"  # run is the default command
  one_wording "$command: --$flag given twice" "--$flag is given twice, as 3 and as 4; give it once" \
    "$command" "--$flag=3" "-$flag" 4
  one_wording "$command: --${flag}s misspelt" \
    "--${flag}s=3: unknown flag; did you mean --$flag? $help lists the accepted flags" "$command" "--${flag}s=3"
  one_wording "$command: --$flag without its value" "--$flag: missing a value; e.g. --$flag=$hint" "$command" "--$flag"
  if [ "$command" = run ] || [ "$command" = comm_bench ] || [ "$command" = strategies ]; then
    one_wording "$command: a stray word" \
      "unexpected argument 'stray'; flags take the form --name=value (see $help)" "$command" stray
  fi
done
one_wording "report: an empty --output" "--output: empty value; e.g. --output=FILE" report --output= "$work"

# ---- values with control bytes: one line, the bytes escaped ----
for flag in model precision variable_update data_format optimizer device all_reduce_spec; do
  reject "--$flag with a newline" "${quick[@]}" "--$flag=bad"$'\n'"value"
  reject "--$flag with an escape sequence" "${quick[@]}" "--$flag="$'\e[2J'"x"
done
reject "--num_batches with a newline" "${quick[@]}" --num_batches=$'3\n4'
reject "--seed with a carriage return" "${quick[@]}" --seed=$'1\r'
reject "a stray word with an escape" "${quick[@]}" $'\e[31mred'
reject "an unknown flag with a newline" "${quick[@]}" $'--bo\ngus=1'
reject "one flag twice with newlines" "${quick[@]}" --model=trivial --model=$'tri\nvial'

# ---- each message names the real problem ----
# message NAME EXPECTED-EXIT WORDS ARGS...: a refused or failed run (exit 1 or 2) is handled when
# its one line holds WORDS and it wrote no result; a run that must go on (0, any) when it ends so.
message() {
  local name=$1 expected=$2 words=$3
  shift 3
  rm -f "$work/new.json"
  attempt "$name" "$expected" "$dpbench" "$@" --result_file="$work/new.json" || return
  if [ "$expected" = 1 ] || [ "$expected" = 2 ]; then
    [ -e "$work/new.json" ] && { verdict "$name" lost "a result was written"; return; }
    grep -q -- "$words" "$work/err" ||
      { verdict "$name" mishandled "the line lacks '$words': $(head -c 300 "$work/err")"; return; }
  fi
  verdict "$name" handled
}
traced=(--trace_file="$work/trace.json")
message "--trace_steps=1:1000000000 is out of range" 2 "measured steps are 1..2" "${quick[@]}" "${traced[@]}" \
  --trace_steps=1:1000000000
message "--trace_steps=1:99999999999999999999 is out of range" 2 "measured steps are 1..2" "${quick[@]}" "${traced[@]}" \
  --trace_steps=1:99999999999999999999
message "--trace_steps=w1:w1000000000 is out of range" 2 "warm-up steps are w1..w1" "${quick[@]}" "${traced[@]}" \
  --trace_steps=w1:w1000000000
message "--trace_steps=1:x is no window" 2 "not A:B" "${quick[@]}" "${traced[@]}" --trace_steps=1:x
message "--learning_rate=1e-320 is too small, not 'not a number'" 2 "too small" "${quick[@]}" --learning_rate=1e-320
message "--learning_rate=1e-39 is too small" 2 "too small" "${quick[@]}" --learning_rate=1e-39
message "--learning_rate=1e400 is not finite" 2 "not a finite number" "${quick[@]}" --learning_rate=1e400
message "--momentum=1e-320 is a momentum" 0 "" "${quick[@]}" --optimizer=momentum --momentum=1e-320
message "--peak_tflops=1e-300 is refused" 2 "from 0.001 to" "${quick[@]}" --peak_tflops=1e-300
message "--peak_tflops=0.0001 is refused" 2 "from 0.001 to" "${quick[@]}" --peak_tflops=0.0001
message "--peak_tflops=0.001 runs" 0 "" "${quick[@]}" --peak_tflops=0.001
message "--collective_timeout=1e-320 is out of range" 2 "collective_timeout" "${quick[@]}" --collective_timeout=1e-320
message "--dropout=1e-320 is a rate" any "" --device=cpu --model=nmt --encoder_type=transformer --num_batches=1 \
  --num_warmup_batches=0 --num_heads=2 --ffn_units=8 --num_units=8 --embedding_dim=8 --src_vocab_size=8 \
  --tgt_vocab_size=8 --src_max_len=4 --tgt_max_len=4 --num_encoder_layers=1 --num_decoder_layers=1 --dropout=1e-320
cp "$work/earlier.json" "$work/tiny_a.json"
cp "$work/earlier.json" "$work/tiny_b.json"
attempt "compare --fail_above=1e-320 is a percentage" 0 "$dpbench" compare "$work/tiny_a.json" "$work/tiny_b.json" \
  --fail_above=1e-320 && verdict "compare --fail_above=1e-320 is a percentage" handled
attempt "compare --noise_floor=1e-320 is a percentage" 0 "$dpbench" compare "$work/tiny_a.json" "$work/tiny_b.json" \
  --noise_floor=1e-320 && verdict "compare --noise_floor=1e-320 is a percentage" handled
attempt "compare --fail_above=1e400 is refused" 2 "$dpbench" compare "$work/tiny_a.json" "$work/tiny_b.json" \
  --fail_above=1e400 && verdict "compare --fail_above=1e400 is refused" handled
# Out of host memory: the remedy names what the command was holding.
message "a model too large for the host names its size flags" 1 "size flags" --device=cpu --model=rnnlm \
  --num_units=65536 --embedding_dim=65536 --vocab_size=10000000 --num_batches=1 --num_warmup_batches=0
message "batches too large for the host name --batch_size" 1 "batch_size" --device=cpu --model=resnet50 \
  --batch_size=100000 --num_batches=1 --num_warmup_batches=0

# ---- a loss that turns NaN or infinite fails the run: one line, exit 1, no result ----
for rate in 1e30 1e35; do
  message "trivial diverges at --learning_rate=$rate" 1 "training diverged" "${quick[@]}" --learning_rate="$rate"
  message "momentum diverges at --learning_rate=$rate" 1 "training diverged" "${quick[@]}" --optimizer=momentum \
    --learning_rate="$rate"
done
message "adam diverges at --learning_rate=1e38 (rnnlm)" 1 "training diverged" --device=cpu --model=rnnlm \
  --num_batches=3 --num_warmup_batches=0 --num_units=8 --embedding_dim=8 --vocab_size=16 --seq_len=4 \
  --batch_size=2 --learning_rate=1e38
message "a diverged run says where it began" 1 "step 1" "${quick[@]}" --learning_rate=1e35
message "a run that does not diverge writes its result" 0 "" "${quick[@]}" --learning_rate=0.001
[ -s "$work/new.json" ] || verdict "a run that does not diverge: result" lost "no result written"
attempt "report sets no diverged run aside: there is none" 0 "$dpbench" report "$work/new.json" &&
  verdict "report over the finite run" handled

# ---- sweeps: odd output folders, a folder that goes away, a lock file with escape bytes ----
sweep=$(cd "$faults/../../.." && pwd)/scripts/sweep.sh
sweep_args=(--models=trivial --gpus=1 --strategies=independent --dpbench="$dpbench" --no-report)
sweep_quick=(--device=cpu --num_batches=2 --num_warmup_batches=1)
sweep_run() { attempt "$1" "$2" bash "$sweep" "${sweep_args[@]}" "${@:3}" -- "${sweep_quick[@]}"; }
mkdir -p "$work/sweeps" && cd "$work/sweeps" || exit 2
sweep_run "sweep --out starting with '-'" 0 --out=-dash && settle "sweep --out starting with '-'" mishandled \
  "no result in ./-dash" test -s "./-dash/trivial__independent__1gpu.json"
sweep_run "sweep --out with a newline" 2 --out=$'new\nline' &&
  settle "sweep --out with a newline" lost "a folder was made" test ! -e $'new\nline'
sweep_run "sweep --out with an escape" 2 --out=$'esc\e[2J' && verdict "sweep --out with an escape" handled
[ -e "$work/plainfile" ] || printf x >"$work/plainfile"
sweep_run "sweep --out under a file" 2 --out="$work/plainfile/sub" && verdict "sweep --out under a file" handled
# The folder removed as the first run starts (by a dpbench wrapper): one line, exit 1.
printf '#!/bin/sh\nrm -rf "%s"\nexec "%s" "$@"\n' "$work/sweeps/vanishing" "$dpbench" >"$work/sweeps/remove_then_run"
chmod +x "$work/sweeps/remove_then_run"
attempt "sweep whose folder is removed mid-sweep" 1 bash "$sweep" --models=trivial --gpus=1,2,3 \
  --strategies=independent --dpbench="$work/sweeps/remove_then_run" --no-report --out="$work/sweeps/vanishing" -- \
  "${sweep_quick[@]}" && settle "sweep whose folder is removed mid-sweep" mishandled \
  "the line does not say the folder is gone: $(head -c 300 "$work/err")" grep -q "is gone" "$work/err"
mkdir -p "$work/sweeps/locked"
printf 'pid=1\e[2J\nhost=%s\e]0;title\a\nstarted=now\ncommand=evil\e[31m\n' "$(hostname)" >"$work/sweeps/locked/.sweep.lock"
( flock -n 9 && sleep 8 ) 9<>"$work/sweeps/locked/.sweep.lock" &
holder=$!
sleep 0.5
sweep_run "sweep into a folder locked by a holder with escape bytes" 1 --out="$work/sweeps/locked" &&
  settle "sweep into a folder locked by a holder with escape bytes" mishandled "the holder is not named" \
    grep -q "another sweep\|left behind" "$work/err"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
cd "$work" || exit 2

# ---- help, version and the strategies' list are outputs too: a full stdout is an error ----
if [ -c /dev/full ]; then
  for words in "--help" "--version" "strategies" "strategies --format=json" "strategies --help" \
    "strategies --sweep_token=replicated:nccl"; do
    read -r -a command_words <<<"$words"
    attempt "dpbench $words into /dev/full" 1 "${onto_full_device[@]}" "$dpbench" "${command_words[@]}" &&
      verdict "dpbench $words into /dev/full" handled
  done
fi
for words in "--help" "strategies"; do
  read -r -a command_words <<<"$words"
  attempt "dpbench $words into a closed pipe" 1 "${into_closed_pipe[@]}" "$dpbench" "${command_words[@]}" &&
    verdict "dpbench $words into a closed pipe" handled
done

# ---- comm_bench's own flags: every value it must refuse, in one line and exit 2 ----
comm=(comm_bench --device=cpu --num_gpus=2 --min_bytes=1K --max_bytes=4K --iters=1 --warmup_iters=0)
for bad in --op=all_to_all --op= --data_type=fp8 --device=tpu --num_gpus=0 --num_gpus=-1 --num_gpus=abc \
  --num_gpus=100000 --min_bytes=0 --min_bytes=-1 --min_bytes=1X --min_bytes=99999999999999999999 \
  --max_bytes=2000G --max_bytes=abc --iters=0 --iters=-1 --iters=1.5 --iters=1000001 --warmup_iters=-1 \
  --warmup_iters=abc --json="$work/folder" --json="$work/missing/c.json" --bogus=1 --op \
  --beside_compute --beside_compute=maybe --compute_shape=1x2x3 --compute_shape=1x2 --compute_shape=0x1x1 \
  --compute_shape=65536x65536x1; do
  attempt "comm_bench $bad" 2 "$dpbench" "${comm[@]}" "$bad" && verdict "comm_bench $bad" handled
done
attempt "comm_bench --min_bytes above --max_bytes" 2 "$dpbench" "${comm[@]}" --min_bytes=8K --max_bytes=4K &&
  verdict "comm_bench --min_bytes above --max_bytes" handled
attempt "comm_bench with a stray word" 2 "$dpbench" "${comm[@]}" stray && verdict "comm_bench with a stray word" handled
attempt "comm_bench --op with a newline" 2 "$dpbench" "${comm[@]}" --op=$'all\nreduce' &&
  verdict "comm_bench --op with a newline" handled

# ---- traces: the window, the kinds of path, and a trace kept whole when the run is refused ----
mkdir -p "$work/traces"
for window in 0 0:1 3:2 w0 w2 1:101 -1 1: :1 x:y 1:2:3; do
  reject "--trace_steps=$window" "${quick[@]}" --trace_file="$work/traces/t.json" --trace_steps="$window"
done
reject "--trace_steps without --trace_file" "${quick[@]}" --trace_steps=1:2
for bad in "$work/folder" "$work/missing/t.json" /proc/version "$work/plainfile/t.json"; do
  reject "--trace_file=$bad" "${quick[@]}" --trace_file="$bad"
done
printf '{"earlier": true}' >"$work/traces/kept.json"
reject "a refused run keeps the earlier trace" "${quick[@]}" --trace_file="$work/traces/kept.json" --num_batches=0
grep -q '"earlier"' "$work/traces/kept.json" || verdict "earlier trace afterwards" lost "the trace was replaced"
run_ok "a trace of one warm-up and one measured step" "$dpbench" "${quick[@]}" --trace_file="$work/traces/ok.json" \
  --trace_steps=w1:1 --result_file=
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$work/traces/ok.json" 2>/dev/null ||
  verdict "the trace written" mishandled "not JSON"
