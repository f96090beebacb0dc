#!/usr/bin/env bash
# Fault injection: tries a few hundred bad inputs and faults on dpbench (reference backend) and
# checks that each is handled: bad flags, impossible combinations, unwritable, special and linked
# output paths, FIFOs, empty and binary data files, junk for report and compare, signals mid-run, a
# vanished parent, a full device. A case is handled when the exit code is the promised one, a
# rejected input gets exactly one clear line on stderr (no raw binary bytes), and nothing is lost:
# an earlier result at the path stays byte for byte, a device or FIFO stays what it was, no
# result appears where none should. Every case runs under a time limit; one that passes it hung.
# Prints one line per case that was not handled and a last line:
#   "fault injection: N tried, N handled, 0 mishandled, 0 lost, 0 hung"
# Usage: fault_injection.sh DPBENCH [MPIEXEC]     (exit 0 only when every case was handled)
set -uo pipefail
dpbench=${1:?usage: fault_injection.sh DPBENCH [MPIEXEC]}
mpiexec=${2:-}
[ -x "$dpbench" ] || { echo "fault_injection: no dpbench at $dpbench" >&2; exit 2; }
dpbench=$(cd "$(dirname "$dpbench")" && pwd)/$(basename "$dpbench")
faults=$(cd "$(dirname "$0")" && pwd)/faults
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 2
limit=${FAULT_CASE_SECONDS:-40}
tried=0 handled=0 mishandled=0 lost=0 hung=0

quick=(--device=cpu --model=trivial --num_batches=2 --num_warmup_batches=1 --display_every=1)

# An earlier result that failed runs must leave as it was.
"$dpbench" "${quick[@]}" --result_file="$work/earlier.json" >/dev/null 2>&1 ||
  { echo "fault_injection: dpbench cannot run at all here" >&2; exit 2; }
earlier_sum=$(cksum <"$work/earlier.json")
restore_earlier() { [ "$(cksum <"$work/earlier.json")" = "$earlier_sum" ] || return 1; }

verdict() {  # name, outcome (handled|mishandled|lost|hung), why
  tried=$((tried + 1))
  case $2 in
    handled) handled=$((handled + 1)) ;;
    lost) lost=$((lost + 1)); echo "LOST   $1: $3" ;;
    hung) hung=$((hung + 1)); echo "HUNG   $1: $3" ;;
    *) mishandled=$((mishandled + 1)); echo "WRONG  $1: $3" ;;
  esac
}

# After an attempt that held: handled when the check (the command after WHY) holds too.
settle() {  # name, outcome otherwise (mishandled|lost), why, check command...
  local name=$1 otherwise=$2 why=$3
  shift 3
  if "$@"; then verdict "$name" handled; else verdict "$name" "$otherwise" "$why"; fi
}

# One run: NAME, EXPECTED exit (2: rejected with one line; 1: failed with one line; 0: ran;
# any: 0 or 1, never a crash), then the command. The command runs with a clean stdout/stderr
# capture under the time limit.
attempt() {
  local name=$1 expected=$2 code lines
  shift 2
  timeout -k 5 "$limit" "$@" >"$work/out" 2>"$work/err" </dev/null
  code=$?
  if ((code == 124 || code == 137)); then verdict "$name" hung "no end within $limit s"; return 1; fi
  if ! restore_earlier; then verdict "$name" lost "the earlier result changed"; return 1; fi
  if LC_ALL=C grep -q '[^[:print:][:space:]]' "$work/err"; then
    verdict "$name" mishandled "raw bytes in the message"; return 1
  fi
  lines=$(grep -c . "$work/err")
  case $expected in
    2 | 1)
      if ((code != expected)); then
        verdict "$name" mishandled "exit $code, expected $expected: $(head -c 300 "$work/err")"; return 1
      fi
      if ((lines != 1)); then verdict "$name" mishandled "$lines lines on stderr: $(head -c 300 "$work/err")"; return 1; fi
      ;;
    0)
      if ((code != 0)); then verdict "$name" mishandled "exit $code: $(tail -c 300 "$work/err")"; return 1; fi
      ;;
    notes+1)  # exit 1, the error last, after notes on what was skipped
      if ((code != 1)); then verdict "$name" mishandled "exit $code, expected 1: $(tail -c 300 "$work/err")"; return 1; fi
      tail -n 1 "$work/err" | grep -q 'error:' || { verdict "$name" mishandled "the last line is no error"; return 1; }
      ;;
    any)
      if ((code > 2)); then verdict "$name" mishandled "exit $code (a crash?): $(tail -c 300 "$work/err")"; return 1; fi
      ;;
  esac
  return 0
}

# A rejected run: exit 2, one line, and no result written (at the case's own --result_file, or
# at new.json).
reject() {  # name, args...
  local name=$1 output=()
  shift
  rm -f "$work/new.json"
  case " $* " in *" --result_file="*) ;; *) output=(--result_file="$work/new.json") ;; esac
  attempt "$name" 2 "$dpbench" "$@" "${output[@]}" || return
  if [ -e "$work/new.json" ]; then verdict "$name" lost "a result was written by a rejected run"; return; fi
  verdict "$name" handled
}

# A rejected run that names a path the user gave: exit 2, one line, the earlier result kept.
reject_keeping_earlier() {  # name, args...
  local name=$1
  shift
  attempt "$name" 2 "$dpbench" "$@" --result_file="$work/earlier.json" && verdict "$name" handled
}

# ---- flag values: every count, size, number, choice and switch with values it must refuse ----
int_flags=(
  "num_batches:0 -1 abc 1.5 1e3 99999999999999999999 1000001 0x10"
  "num_warmup_batches:-1 abc 1.5 1000001 2147483648"
  "display_every:0 -3 x 2147483648"
  "batch_size:0 -8 abc 1048577 2147483648 16x"
  "total_batch_size:0 -2 abc 99999999999"
  "num_gpus:0 -1 abc 65 100000"
  "profile_step:-1 abc 3"
  "seed:-1 abc 1.5 18446744073709551616"
  "collective_timeout:0 -1 nan inf abc 86401 1e308"
  "learning_rate:0 -1 nan inf abc"
  "momentum:-0.1 1 nan abc"
  "bucket_cap_mb:-1 nan inf abc 1048577"
  "prefetch_depth:0 -1 1000000000 abc"
  "datasets_num_private_threads:-1 100000 abc"
  "num_epochs:-1 100001 abc"
)
for entry in "${int_flags[@]}"; do
  flag=${entry%%:*}
  extra=()
  case $flag in
    prefetch_depth | datasets_num_private_threads) extra=(--data_feed=host) ;;
    bucket_cap_mb) extra=(--variable_update=replicated) ;;
    num_gpus) extra=(--num_batches=2) ;;
  esac
  for value in ${entry#*:}; do
    reject "--$flag=$value" "${quick[@]}" "${extra[@]}" "--$flag=$value"
  done
done
replicated=(--variable_update=replicated --num_gpus=2)
for value in -1 abc 65537; do reject "--gradient_repacking=$value" "${quick[@]}" "${replicated[@]}" --gradient_repacking="$value"; done
for value in 0 -1 abc 65537; do reject "--agg_small_grads_max_group=$value" "${quick[@]}" "${replicated[@]}" --agg_small_grads_max_group="$value"; done
for value in -1 abc 2199023255553; do reject "--agg_small_grads_max_bytes=$value" "${quick[@]}" "${replicated[@]}" --agg_small_grads_max_bytes="$value"; done
rnnlm=(--device=cpu --model=rnnlm --num_batches=2 --num_warmup_batches=1)
for flag in vocab_size embedding_dim num_units num_layers seq_len; do
  for value in 0 -1 abc 99999999999; do reject "rnnlm --$flag=$value" "${rnnlm[@]}" "--$flag=$value"; done
done
reject "rnnlm --vocab_size=10000001" "${rnnlm[@]}" --vocab_size=10000001
reject "rnnlm --num_layers=1025" "${rnnlm[@]}" --num_layers=1025
nmt=(--device=cpu --model=nmt --num_batches=2 --num_warmup_batches=1)
for flag in src_vocab_size tgt_vocab_size num_encoder_layers src_max_len tgt_max_len; do
  for value in 0 abc 99999999999; do reject "nmt --$flag=$value" "${nmt[@]}" "--$flag=$value"; done
done
reject "nmt --src_max_len=65537" "${nmt[@]}" --src_max_len=65537
for choice in model=bogus device=tpu variable_update=bogus data_format=NCWH precision=fp8 optimizer=lamb \
  data_feed=disk data_name=imagenet local_parameter_device=tpu compact_gradient_transfer=fp8 \
  all_reduce_spec=bogus all_reduce_spec=nccl#0 all_reduce_spec=nccl#abc; do
  reject "--$choice" "${quick[@]}" --variable_update=replicated --num_gpus=2 "--$choice"
done
for switch in use_fp16 cuda_graph cudnn_benchmark deterministic overlap_comm independent_replica sharded_update \
  sparse_embedding_grads shuffle prefetch_data_to_device; do
  for value in maybe 2; do reject "--$switch=$value" "${quick[@]}" "--$switch=$value"; done
done
reject "rnnlm --encoder_type=gru" "${rnnlm[@]}" --encoder_type=gru
reject "nmt --direction=up" "${nmt[@]}" --direction=up

# ---- unknown flags, stray words, impossible combinations ----
reject "misspelt flag" "${quick[@]}" --num_batch=3
reject "unknown flag" "${quick[@]}" --bogus
reject "stray word" "${quick[@]}" foo
reject "flag without value" "${quick[@]}" --model
reject "uneven total batch" "${quick[@]}" --total_batch_size=7 --num_gpus=2
reject "batch and total disagree" "${quick[@]}" --batch_size=4 --total_batch_size=16 --num_gpus=2
reject "gpu_indices vs num_gpus" "${quick[@]}" --gpu_indices=0,1 --num_gpus=3
reject "gpu_indices junk" "${quick[@]}" --gpu_indices=0,,1
reject "fp16 and bf16" "${quick[@]}" --use_fp16 --precision=bf16
reject "loss scale on fp32" "${quick[@]}" --fp16_loss_scale=128
reject "epochs without data" "${quick[@]}" --num_epochs=2
reject "timed epochs without epochs" "${quick[@]}" --timed_epochs=0:1
reject "vocab_file with cifar" "${quick[@]}" --data_name=cifar10 --vocab_file=x
reject "profile past the end" "${quick[@]}" --profile_step=5
reject "sharded update with a parameter server" "${quick[@]}" --variable_update=parameter_server --sharded_update
reject "ptb without data_dir" "${rnnlm[@]}" --data_name=ptb
# A run far too large for the host stops at set-up: exit 1, one line naming the fix, no result.
failure() {  # name, words the line must hold, args...
  local name=$1 words=$2
  shift 2
  rm -f "$work/new.json"
  attempt "$name" 1 "$dpbench" "$@" --result_file="$work/new.json" || return
  if [ -e "$work/new.json" ]; then verdict "$name" lost "a result was written by a failed run"; return; fi
  grep -q "$words" "$work/err" || { verdict "$name" mishandled "the line lacks '$words': $(head -c 300 "$work/err")"; return; }
  verdict "$name" handled
}
failure "resnet50 at batch 100000 on the host" "out of host memory" --device=cpu --model=resnet50 --batch_size=100000 \
  --num_batches=1 --num_warmup_batches=0
failure "nmt with 10M-word vocabularies on the host" "out of host memory" "${nmt[@]}" --src_vocab_size=10000000 \
  --tgt_vocab_size=10000000 --num_units=4096 --embedding_dim=4096

# ---- output paths ----
mkdir -p "$work/folder" "$work/ro"
ln -s loop_b "$work/loop_a"; ln -s loop_a "$work/loop_b"
printf 'x' >"$work/plainfile"
long_ok=$(printf 'r%.0s' $(seq 250)).json
too_long=$(printf 'n%.0s' $(seq 300)).json
for bad in "$work/folder" "$work/missing/out.json" "/proc/version" "$work/$too_long" "$work/loop_a" \
  "$work/plainfile/out.json" "/proc/self/fd/999" "/dev/stdin-is-not-this/x.json"; do
  reject "--result_file=$bad" "${quick[@]}" --result_file="$bad"
done
run_ok() {  # name, then the command; expects exit 0
  local name=$1
  shift
  attempt "$name" 0 "$@" && verdict "$name" handled
}
run_ok "--result_file=/dev/null" "$dpbench" "${quick[@]}" --result_file=/dev/null
[ -c /dev/null ] || verdict "/dev/null afterwards" lost "/dev/null is no longer a device"
run_ok "--result_file=- (stdout)" "$dpbench" "${quick[@]}" --result_file=-
grep -q '"schema_version"' "$work/out" || verdict "--result_file=-" mishandled "no JSON on stdout"
run_ok "--result_file=/dev/stdout" "$dpbench" "${quick[@]}" --result_file=/dev/stdout
grep -q '"schema_version"' "$work/out" || verdict "--result_file=/dev/stdout" mishandled "no JSON on stdout"
run_ok "--result_file=$long_ok (255 bytes)" "$dpbench" "${quick[@]}" --result_file="$work/$long_ok"
[ -s "$work/$long_ok" ] || verdict "255-byte name" mishandled "no result at the long name"
ln -s target.json "$work/link.json"
run_ok "--result_file=a symlink" "$dpbench" "${quick[@]}" --result_file="$work/link.json"
{ [ -L "$work/link.json" ] && [ -s "$work/target.json" ]; } || verdict "symlink afterwards" lost "the link was replaced or its target not written"
mkfifo "$work/pipe.json"
(timeout 60 cat "$work/pipe.json" >"$work/piped.json") &
reader=$!
run_ok "--result_file=a FIFO with a reader" "$dpbench" "${quick[@]}" --result_file="$work/pipe.json"
wait "$reader"
{ [ -p "$work/pipe.json" ] && grep -q '"schema_version"' "$work/piped.json"; } ||
  verdict "FIFO afterwards" lost "the FIFO was replaced or its reader got nothing"
if [ -c /dev/full ]; then
  attempt "--result_file=/dev/full" 1 "$dpbench" "${quick[@]}" --result_file=/dev/full &&
    settle "--result_file=/dev/full" lost "/dev/full was replaced" test -c /dev/full
fi
# A stale temporary file of a killed writer is removed by the next run.
printf '{"half' >"$work/stale.json.tmp.999999999"
run_ok "stale temporary file" "$dpbench" "${quick[@]}" --result_file="$work/stale.json"
[ ! -e "$work/stale.json.tmp.999999999" ] || verdict "stale temporary file" mishandled "still there"

# ---- data files: missing, the wrong kind, empty, binary, truncated ----
mkdir -p "$work/cifar" "$work/ptb" "$work/nmt"
python3 - "$work" <<'PY'
import os, random, sys
w = sys.argv[1]
random.seed(1)
for i in range(1, 6):
    with open(f"{w}/cifar/data_batch_{i}.bin", "wb") as f:
        for _ in range(4):
            f.write(bytes([random.randrange(10)] + [random.randrange(256) for _ in range(3072)]))
with open(f"{w}/ptb/ptb.train.txt", "w") as f:
    f.write(" the cat sat on the mat \n" * 50)
for side in ("en", "de"):
    with open(f"{w}/nmt/train.{side}", "w") as f:
        f.write("a b c d\n" * 40)
PY
cifar=(--device=cpu --model=trivial --data_dir="$work/cifar" --num_batches=2 --num_warmup_batches=1 --batch_size=2)
ptb=(--device=cpu --model=rnnlm --data_name=ptb --data_dir="$work/ptb" --num_batches=2 --num_warmup_batches=1 --batch_size=2 --vocab_size=8)
nmt_data=(--device=cpu --model=nmt --data_name=parallel_text --data_dir="$work/nmt" --src=en --tgt=de --num_batches=1
          --num_warmup_batches=0 --batch_size=2 --src_vocab_size=7 --tgt_vocab_size=7 --num_units=8 --embedding_dim=8
          --src_max_len=8 --tgt_max_len=8)
run_ok "cifar data as given" "$dpbench" "${cifar[@]}" --result_file=
run_ok "ptb data as given" "$dpbench" "${ptb[@]}" --result_file=
run_ok "parallel text as given" "$dpbench" "${nmt_data[@]}" --result_file=
run_ok "parallel text through the transformer, padding masked" "$dpbench" "${nmt_data[@]}" --encoder_type=transformer \
  --num_heads=2 --ffn_units=16 --num_encoder_layers=1 --num_decoder_layers=1 --result_file=
swap() {  # file, replacement kind; runs the rest as a rejected run, then restores the file
  local file=$1 kind=$2 name=$3
  shift 3
  mv "$file" "$file.kept"
  case $kind in
    fifo) mkfifo "$file" ;;
    empty) : >"$file" ;;
    folder) mkdir "$file" ;;
    loop) ln -s "$file" "$file" ;;
    dangling) ln -s "$file.nowhere" "$file" ;;
    truncated) head -c 1000 "$file.kept" >"$file" ;;
    badlabel) { printf '\x63'; head -c 3072 /dev/zero; } >"$file" ;;
    missing) ;;
  esac
  reject "$name ($kind)" "$@"
  rm -rf "$file"
  mv "$file.kept" "$file"
}
for kind in fifo empty folder loop dangling truncated badlabel missing; do
  swap "$work/cifar/data_batch_2.bin" "$kind" "cifar data_batch_2.bin" "${cifar[@]}"
done
for kind in fifo empty folder loop dangling missing; do
  swap "$work/ptb/ptb.train.txt" "$kind" "ptb.train.txt" "${ptb[@]}"
  swap "$work/nmt/train.de" "$kind" "train.de" "${nmt_data[@]}"
done
reject "--data_dir is a file" "${cifar[@]}" --data_dir="$work/plainfile"
reject "--data_dir is a loop" "${cifar[@]}" --data_dir="$work/loop_a"
reject "--data_dir is missing" "${cifar[@]}" --data_dir="$work/nowhere"
mkfifo "$work/vocab.fifo"
reject "--vocab_file is a FIFO" "${ptb[@]}" --vocab_file="$work/vocab.fifo"
reject "--vocab_file is missing" "${ptb[@]}" --vocab_file="$work/none.txt"
reject "--vocab_file is a folder" "${ptb[@]}" --vocab_file="$work/folder"
: >"$work/empty_vocab.txt"
reject "--vocab_file is empty" "${ptb[@]}" --vocab_file="$work/empty_vocab.txt"
# Random bytes as a corpus: trains or refuses, but warns and never echoes the bytes.
mkdir -p "$work/binary"
head -c 200000 /dev/urandom >"$work/binary/ptb.train.txt"
attempt "binary corpus" any "$dpbench" "${ptb[@]}" --data_dir="$work/binary" --vocab_size=100000 --result_file= &&
  settle "binary corpus" mishandled "no warning: $(head -c 200 "$work/err")" grep -qi "binary\|not text" "$work/err"

# ---- dpbench report over junk ----
report_case() {  # name, expected exit, paths...
  local name=$1 expected=$2
  shift 2
  attempt "report: $name" "$expected" "$dpbench" report "$@" && verdict "report: $name" handled
}
mkdir -p "$work/junk"
cp "$work/earlier.json" "$work/junk/good.json"
cp "$work/earlier.json" "$work/junk/copy.json"
mkfifo "$work/junk/fifo.json"
ln -s nowhere.json "$work/junk/dangling.json"
ln -s loop2.json "$work/junk/loop1.json"; ln -s loop1.json "$work/junk/loop2.json"
ln -s .. "$work/junk/parent_loop"
printf 'not json' >"$work/junk/text.json"
printf '[1,2,3]' >"$work/junk/array.json"
: >"$work/junk/empty.json"
head -c 5000 /dev/urandom >"$work/junk/random.json"
python3 - "$work/junk" "$work/earlier.json" <<'PY'
import json, sys
folder, good = sys.argv[1], sys.argv[2]
doc = json.load(open(good))
for name, path, value in [("huge_rate", ("summary", "items_per_sec"), 1e308),
                          ("negative_time", ("summary", "total_time_s"), -1),
                          ("too_many_devices", ("summary", "num_devices"), 2**31),
                          ("zero_rate", ("summary", "items_per_sec"), 0),
                          ("string_rate", ("summary", "items_per_sec"), "fast")]:
    d = json.loads(json.dumps(doc))
    d[path[0]][path[1]] = value
    json.dump(d, open(f"{folder}/{name}.json", "w"))
open(f"{folder}/deep.json", "w").write("[" * 100000 + "]" * 100000)
PY
report_case "folder of junk" 0 "$work/junk"
grep -q "fifo.json" "$work/err" "$work/out" || verdict "report: FIFO listed" mishandled "the FIFO is not listed as skipped"
report_case "FIFO named directly" notes+1 "$work/junk/fifo.json"
report_case "only junk" notes+1 "$work/junk/text.json" "$work/junk/array.json" "$work/junk/empty.json"
report_case "missing path" 2 "$work/nowhere"
for output in "$work/folder" "$work/missing/r.md" "/proc/version" "$work/loop_a"; do
  report_case "--output $output" 2 "$work/junk/good.json" --output "$output"
done
attempt "report --output /dev/null" 0 "$dpbench" report "$work/junk/good.json" --output /dev/null &&
  settle "report --output /dev/null" lost "/dev/null was replaced" test -c /dev/null
report_case "--plots at a file" 2 "$work/junk/good.json" --plots "$work/plainfile"
report_case "--format bogus" 2 "$work/junk/good.json" --format=bogus

# ---- dpbench compare over the same junk: one line and exit 1 for a side without a result ----
compare_case() {  # name, expected exit, arguments...
  local name=$1 expected=$2
  shift 2
  attempt "compare: $name" "$expected" "$dpbench" compare "$@" && verdict "compare: $name" handled
}
compare_case "folders of junk" 0 "$work/junk" "$work/junk"
compare_case "FIFO named directly" 1 "$work/junk/fifo.json" "$work/junk/good.json"
compare_case "only junk" 1 "$work/junk/good.json" "$work/junk/text.json"
compare_case "missing path" 2 "$work/junk/good.json" "$work/nowhere"
for output in "$work/folder" "$work/missing/c.md" "/proc/version"; do
  compare_case "--output $output" 2 "$work/junk/good.json" "$work/junk/good.json" --output "$output"
done
attempt "compare --output /dev/null" 0 "$dpbench" compare "$work/junk/good.json" "$work/junk/good.json" \
  --output /dev/null && settle "compare --output /dev/null" lost "/dev/null was replaced" test -c /dev/null
compare_case "--fail_above bogus" 2 "$work/junk/good.json" "$work/junk/good.json" --fail_above=bogus
compare_case "--noise_floor out of range" 2 "$work/junk/good.json" "$work/junk/good.json" --noise_floor=100

# ---- signals mid-run: the earlier result stays whole or (SIGINT, SIGTERM after measured steps)
# is replaced whole by the interrupted run's, marked so; no temporary file stays ----
# Job control: a background job of a script otherwise starts with SIGINT ignored. The shell's
# own notes on ended jobs ("Killed ...") go nowhere.
set -m
exec 3>&2 2>/dev/null
for signal in INT TERM HUP KILL; do
  for delay in 0.3 1.0; do
    name="SIG$signal after ${delay}s"
    "$dpbench" --device=cpu --model=trivial --num_batches=100000 --num_warmup_batches=0 --display_every=1000 \
      --result_file="$work/earlier.json" >/dev/null 2>&1 &
    pid=$!
    sleep "$delay"
    kill -"$signal" "$pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      kill -9 "$pid"; wait "$pid" 2>/dev/null; verdict "$name" hung "still running 10 s after the signal"; continue
    fi
    wait "$pid" 2>/dev/null
    if ! restore_earlier; then
      if [ "$signal" = INT ] || [ "$signal" = TERM ]; then
        if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["summary"]["interrupted"] is True else 1)' \
          "$work/earlier.json" 2>/dev/null; then
          verdict "$name" handled
        else
          verdict "$name" lost "the earlier result changed, and not into a whole interrupted result"
        fi
        # The next case starts from the earlier result again.
        "$dpbench" "${quick[@]}" --result_file="$work/earlier.json" >/dev/null 2>&1
        earlier_sum=$(cksum <"$work/earlier.json")
        continue
      fi
      verdict "$name" lost "the earlier result changed"; continue
    fi
    verdict "$name" handled
  done
done
exec 2>&3 3>&-
set +m
rm -f "$work"/earlier.json.tmp.*

# ---- the process that started a run goes away ----
reject "DPBENCH_END_WITH_PID=abc" env DPBENCH_END_WITH_PID=abc "$dpbench" "${quick[@]}"
reject "DPBENCH_END_WITH_PID=1" env DPBENCH_END_WITH_PID=1 "$dpbench" "${quick[@]}"
sleep 30 &
parent=$!
env DPBENCH_END_WITH_PID=$parent "$dpbench" --device=cpu --model=trivial --num_batches=100000 --num_warmup_batches=0 \
  --display_every=1000 --result_file="$work/orphan.json" >/dev/null 2>"$work/orphan.err" &
orphan=$!
sleep 0.5
kill "$parent"; wait "$parent" 2>/dev/null
for _ in $(seq 50); do kill -0 "$orphan" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$orphan" 2>/dev/null; then
  kill -9 "$orphan"; verdict "parent gone" hung "the run outlived its parent by 5 s"
else
  wait "$orphan"; code=$?
  if [ -e "$work/orphan.json" ]; then verdict "parent gone" lost "an orphan wrote a result"
  elif ((code != 143)); then verdict "parent gone" mishandled "exit $code, expected 143"
  else verdict "parent gone" handled; fi
fi

# ---- mpirun: a rank that fails alone, a frozen rank ----
disagreement_said_and_nothing_written() { [ ! -e "$work/m.json" ] && grep -q disagree "$work/err"; }
if [ -n "$mpiexec" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  mpi=(--device=cpu --model=trivial --num_batches=2 --num_warmup_batches=1 --variable_update=distributed_all_reduce)
  attempt "mpirun: ranks disagree" any "$mpiexec" -n 1 "$dpbench" "${mpi[@]}" --seed=1 --result_file="$work/m.json" : \
    -n 1 "$dpbench" "${mpi[@]}" --seed=2 --result_file="$work/m.json" &&
    settle "mpirun: ranks disagree" mishandled "no message, or a result" disagreement_said_and_nothing_written
fi

# ---- the areas kept in files of their own (tests/scripts/faults/*.sh, sourced in name order):
# each uses the helpers above (attempt, reject, run_ok, failure, verdict, settle) and $work ----
for cases in "$faults"/*.sh; do
  # shellcheck source=/dev/null
  [ -f "$cases" ] && source "$cases"
done

echo "fault injection: $tried tried, $handled handled, $mishandled mishandled, $lost lost, $hung hung"
((mishandled == 0 && lost == 0 && hung == 0))
