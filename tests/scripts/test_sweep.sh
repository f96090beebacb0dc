#!/usr/bin/env bash
# Tests of scripts/sweep.sh, registered with ctest (tests/CMakeLists.txt).
#   test_sweep.sh dry-run DPBENCH      the dry run's exact commands, GPU selection, names, errors
#   test_sweep.sh fake DPBENCH         real runs of a fake dpbench (a script): the environment
#                                      and arguments each run gets, failures, the report call, the
#                                      run tags, the folder's lock, signals, stale temporary files
#                                      (the sweep asks the real DPBENCH what strategy tokens mean)
#   test_sweep.sh reference DPBENCH    a real sweep on the reference backend (--device=cpu): one
#                                      result per combination, skipping, re-running a corrupt or
#                                      stale result, a failed run recorded while the others succeed,
#                                      run tags, and no dpbench left running by a stopped sweep
# Needs bash, coreutils, flock and Linux's /proc (python3 and jq are used when present, as sweep.sh
# uses them). Every wait is bounded; every process started here is ended on the way out.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sweep=$here/../../scripts/sweep.sh
mode=${1:?usage: test_sweep.sh dry-run|fake|reference DPBENCH}
real_dpbench=${2:?usage: test_sweep.sh dry-run|fake|reference DPBENCH}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_sweep.XXXXXX")
dpbench_comm=dpbench  # the command name of the dpbench under test
process_groups=()  # process groups started here (sweeps, and the runs they started), ended on exit
cleanup() {
  local g fakes=()
  # The fake dpbench's runs, each the leader of its process group.
  if [ -f "$tmp/fake_pids" ]; then mapfile -t fakes <"$tmp/fake_pids"; fi
  for g in "${process_groups[@]}" "${fakes[@]}"; do kill -s KILL -- "-$g" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap 'cleanup 2>/dev/null' EXIT  # bash's notices of the processes it kills, too
unset CUDA_VISIBLE_DEVICES DPBENCH_END_WITH_PID DPBENCH_RUN_TAG

checks=0
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
check() {  # check DESCRIPTION COMMAND...
  local what=$1
  shift
  checks=$((checks + 1))
  "$@" || fail "$what"
}
# Runs sweep.sh, keeping its stdout, stderr and exit code in $tmp/stdout, $tmp/stderr, $rc.
sweep() {
  rc=0
  bash "$sweep" "$@" >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
}
expect_rc() {
  checks=$((checks + 1))
  [ "$rc" = "$1" ] || {
    echo "--- stdout:" >&2; cat "$tmp/stdout" >&2; echo "--- stderr:" >&2; cat "$tmp/stderr" >&2
    fail "$2: exit code $rc, expected $1"
  }
}
lines() { grep -c '' "$1" || true; }

# ---- processes -----------------------------------------------------------------------------------
# Whether process PID exists and is no zombie (a parent may not have reaped it yet).
alive() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}
# The live processes (pids) whose FIELD (ppid or pgrp) is VALUE.
processes_with() {
  local field=$1 value=$2 file stat state ppid pgrp
  for file in /proc/[0-9]*/stat; do
    { read -r stat <"$file"; } 2>/dev/null || continue
    read -r state ppid pgrp _ <<<"${stat##*) }"
    [ "$state" != Z ] || continue
    if { [ "$field" = ppid ] && [ "$ppid" = "$value" ]; } || { [ "$field" = pgrp ] && [ "$pgrp" = "$value" ]; }; then
      echo "${stat%% *}"
    fi
  done
}
# start_sweep NAME ARGS...: starts sweep.sh in the background in a process group of its own, as a
# shell with job control does (a background job of a script would ignore SIGINT); its output in
# $tmp/NAME.stdout and $tmp/NAME.stderr, its pid in $bg.
start_sweep() {
  local name=$1
  shift
  set -m
  bash "$sweep" "$@" >"$tmp/$name.stdout" 2>"$tmp/$name.stderr" &
  bg=$!
  set +m
  process_groups+=("$bg")
}
# wait_until SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.1 s; fails after SECONDS.
wait_until() {
  local limit=$(($1 * 10)) what=$2 tenths=0
  shift 2
  until "$@"; do
    ((tenths++ < limit)) || fail "waited $((limit / 10)) s for: $what"
    sleep 0.1
  done
}
gone() { ! alive "$1"; }
# wait_sweep NAME PID SECONDS: waits for a started sweep to end (killing it after SECONDS); its
# exit status in rc, its output copied to $tmp/stdout and $tmp/stderr.
wait_sweep() {
  local name=$1 pid=$2 limit=$3 tenths=0
  while alive "$pid"; do
    ((tenths++ < limit * 10)) || { kill -s KILL -- "-$pid" 2>/dev/null; fail "the sweep $name (pid $pid) did not end within $limit s"; }
    sleep 0.1
  done
  rc=0
  wait "$pid" || rc=$?
  cp "$tmp/$name.stdout" "$tmp/stdout"
  cp "$tmp/$name.stderr" "$tmp/stderr"
}
# started_runs PID N: whether N runs of the fake dpbench started by sweep PID have started.
started_runs() {
  local n
  n=$(grep -cs "end_with_pid=$1 " "$tmp/calls.env" || true)
  [ "${n:-0}" -ge "$2" ]
}
# The pid of the fake dpbench run whose DPBENCH_END_WITH_PID is PID (the sweep that started it).
fake_run_of() { sed -n "s/^pid=\([0-9]*\) end_with_pid=$1 .*/\1/p" "$tmp/calls.env" | tail -n 1; }
# One usage error: exit 2, one line on stderr containing TEXT, nothing on stdout, nothing created.
expect_usage_error() {
  local text=$1
  shift
  sweep "$@"
  expect_rc 2 "usage error ($text)"
  check "one error line for ($text), got: $(cat "$tmp/stderr")" [ "$(lines "$tmp/stderr")" = 1 ]
  check "error line names '$text': $(cat "$tmp/stderr")" grep -qF -- "$text" "$tmp/stderr"
  check "error line starts with 'sweep.sh: error:'" grep -q '^sweep.sh: error: ' "$tmp/stderr"
  check "no stdout for a usage error ($text)" [ ! -s "$tmp/stdout" ]
  check "nothing created for a usage error ($text)" [ ! -e "$tmp/never" ]
}

dry_run_tests() {
  local d=$real_dpbench o=$tmp/out

  # The exact commands of a small matrix, in order: model x GPU count x strategy.
  sweep --models=trivial,resnet50 --gpus=1,2 --strategies='independent; replicated:nccl' --out="$o/" \
    --dpbench="$d" --dry-run -- --num_batches=7
  expect_rc 0 "dry run"
  cat >"$tmp/expected" <<EOF
CUDA_VISIBLE_DEVICES=0 $d --model=trivial --num_gpus=1 --variable_update=independent --num_batches=7 --result_file=$o/trivial__independent__1gpu.json
CUDA_VISIBLE_DEVICES=0 $d --model=trivial --num_gpus=1 --variable_update=replicated --all_reduce_spec=nccl --num_batches=7 --result_file=$o/trivial__replicated-nccl__1gpu.json
CUDA_VISIBLE_DEVICES=0,1 $d --model=trivial --num_gpus=2 --variable_update=independent --num_batches=7 --result_file=$o/trivial__independent__2gpu.json
CUDA_VISIBLE_DEVICES=0,1 $d --model=trivial --num_gpus=2 --variable_update=replicated --all_reduce_spec=nccl --num_batches=7 --result_file=$o/trivial__replicated-nccl__2gpu.json
CUDA_VISIBLE_DEVICES=0 $d --model=resnet50 --num_gpus=1 --variable_update=independent --num_batches=7 --result_file=$o/resnet50__independent__1gpu.json
CUDA_VISIBLE_DEVICES=0 $d --model=resnet50 --num_gpus=1 --variable_update=replicated --all_reduce_spec=nccl --num_batches=7 --result_file=$o/resnet50__replicated-nccl__1gpu.json
CUDA_VISIBLE_DEVICES=0,1 $d --model=resnet50 --num_gpus=2 --variable_update=independent --num_batches=7 --result_file=$o/resnet50__independent__2gpu.json
CUDA_VISIBLE_DEVICES=0,1 $d --model=resnet50 --num_gpus=2 --variable_update=replicated --all_reduce_spec=nccl --num_batches=7 --result_file=$o/resnet50__replicated-nccl__2gpu.json
$d report $o --output $o/REPORT.md --plots $o/plots
sweep.sh (dry run): 8 runs, 0 with a result present (would be skipped); nothing was run
EOF
  check "dry run lines differ: $(diff "$tmp/expected" "$tmp/stdout")" cmp -s "$tmp/expected" "$tmp/stdout"
  check "dry run writes nothing to stderr" [ ! -s "$tmp/stderr" ]
  check "dry run creates no output folder" [ ! -e "$o" ]

  # Every strategy form, repeats and the count: 2 models x 3 counts x 5 strategies x 2 repeats.
  sweep --models=nmt,rnnlm --gpus=1,2,4 --out="$o" --dpbench="$d" --dry-run --repeats=2 --no-report \
    --strategies='independent;parameter_server:gpu;parameter_server:cpu;replicated:xring#2;replicated:nccl+--overlap_comm=false+--bucket_cap_mb=4'
  expect_rc 0 "dry run, big matrix"
  grep "^CUDA_VISIBLE_DEVICES=" "$tmp/stdout" >"$tmp/commands" || true
  check "60 commands, got $(lines "$tmp/commands")" [ "$(lines "$tmp/commands")" = 60 ]
  check "60 distinct result files" [ "$(grep -o -- '--result_file=[^ ]*' "$tmp/commands" | sort -u | wc -l)" = 60 ]
  check "summary line counts 60" [ "$(tail -n 1 "$tmp/stdout")" = "sweep.sh (dry run): 60 runs, 0 with a result present (would be skipped); nothing was run" ]
  check "--no-report: no report command" [ "$(grep -c ' report ' "$tmp/stdout" || true)" = 0 ]
  check "4-GPU runs see CUDA_VISIBLE_DEVICES=0,1,2,3 (20 of them)" \
    [ "$(grep -c '^CUDA_VISIBLE_DEVICES=0,1,2,3 .* --num_gpus=4 ' "$tmp/commands" || true)" = 20 ]
  check "parameter_server:cpu flags and name" grep -qxF -- \
    "CUDA_VISIBLE_DEVICES=0,1 $d --model=rnnlm --num_gpus=2 --variable_update=parameter_server --local_parameter_device=cpu --result_file=$o/rnnlm__parameter_server-cpu__2gpu__r2.json" \
    "$tmp/commands"
  check "replicated:xring#2 flags and name" grep -qxF -- \
    "CUDA_VISIBLE_DEVICES=0 $d --model=nmt --num_gpus=1 --variable_update=replicated --all_reduce_spec=xring#2 --result_file=$o/nmt__replicated-xring-2__1gpu__r1.json" \
    "$tmp/commands"
  check "raw flags in a token, and their name" grep -qxF -- \
    "CUDA_VISIBLE_DEVICES=0,1,2,3 $d --model=nmt --num_gpus=4 --variable_update=replicated --all_reduce_spec=nccl --overlap_comm=false --bucket_cap_mb=4 --result_file=$o/nmt__replicated-nccl+overlap_comm=false+bucket_cap_mb=4__4gpu__r2.json" \
    "$tmp/commands"

  # --rounds=K: the same runs as --repeats=K, round-robin: every combination once, then again.
  sweep --models=trivial --gpus=1,2 --strategies='independent;replicated' --out="$o" --dpbench="$d" --dry-run \
    --no-report --rounds=2 -- --device=cpu
  expect_rc 0 "dry run, --rounds=2"
  check "--rounds=2 goes round-robin: $(grep -o -- '--result_file=[^ ]*' "$tmp/stdout" | tr '\n' ' ')" \
    [ "$(grep -o -- '--result_file=[^ ]*' "$tmp/stdout" | sed 's|.*/||' | tr '\n' ' ')" = \
    "trivial__independent__1gpu__r1.json trivial__replicated__1gpu__r1.json trivial__independent__2gpu__r1.json trivial__replicated__2gpu__r1.json trivial__independent__1gpu__r2.json trivial__replicated__1gpu__r2.json trivial__independent__2gpu__r2.json trivial__replicated__2gpu__r2.json " ]
  check "--rounds=2 counts 8 runs" [ "$(tail -n 1 "$tmp/stdout")" = "sweep.sh (dry run): 8 runs, 0 with a result present (would be skipped); nothing was run" ]

  # Newlines separate strategy tokens too; empty list items are dropped.
  sweep --models=trivial, --gpus=1 --strategies=$'independent\n replicated:psgpu ;\n' --out="$o" --dpbench="$d" --dry-run --no-report
  expect_rc 0 "dry run, tokens on lines"
  check "tokens on lines: $(cat "$tmp/stdout")" [ "$(grep -o -- '--result_file=[^ ]*' "$tmp/stdout" | tr '\n' ' ')" = \
    "--result_file=$o/trivial__independent__1gpu.json --result_file=$o/trivial__replicated-psgpu__1gpu.json " ]

  # The caller's CUDA_VISIBLE_DEVICES is the list the runs take their first N from.
  rc=0
  CUDA_VISIBLE_DEVICES=3,5,7 bash "$sweep" --models=trivial --gpus=1,3 --strategies=independent --out="$o" \
    --dpbench="$d" --dry-run --no-report >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  expect_rc 0 "dry run under CUDA_VISIBLE_DEVICES=3,5,7"
  check "first N of the caller's CUDA_VISIBLE_DEVICES: $(cat "$tmp/stdout")" \
    [ "$(grep -o '^CUDA_VISIBLE_DEVICES=[^ ]*' "$tmp/stdout" | tr '\n' ' ')" = "CUDA_VISIBLE_DEVICES=3 CUDA_VISIBLE_DEVICES=3,5,7 " ]
  rc=0
  CUDA_VISIBLE_DEVICES=3,5,7 bash "$sweep" --models=trivial --gpus=4 --strategies=independent --out="$tmp/never" \
    --dpbench="$d" --dry-run >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  expect_rc 2 "more GPUs than CUDA_VISIBLE_DEVICES lists"
  check "says how many CUDA_VISIBLE_DEVICES lists" grep -q "CUDA_VISIBLE_DEVICES=3,5,7 lists 3" "$tmp/stderr"

  # --select=indices passes --gpu_indices instead; --device=cpu only --num_gpus.
  sweep --models=trivial --gpus=2 --strategies=independent --out="$o" --dpbench="$d" --dry-run --no-report --select=indices
  expect_rc 0 "dry run, --select=indices"
  check "--select=indices: $(head -n 1 "$tmp/stdout")" [ "$(head -n 1 "$tmp/stdout")" = \
    "$d --model=trivial --num_gpus=2 --gpu_indices=0,1 --variable_update=independent --result_file=$o/trivial__independent__2gpu.json" ]
  sweep --models=trivial --gpus=2 --strategies=independent --out="$o" --dpbench="$d" --dry-run --no-report -- --device cpu
  expect_rc 0 "dry run, --device cpu"
  check "--device=cpu: no GPU selection: $(head -n 1 "$tmp/stdout")" [ "$(head -n 1 "$tmp/stdout")" = \
    "$d --model=trivial --num_gpus=2 --variable_update=independent --device cpu --result_file=$o/trivial__independent__2gpu.json" ]

  # Errors: one line, exit 2, before anything runs.
  local ok=(--models=trivial --gpus=1 --out="$tmp/never" --dpbench="$d")
  expect_usage_error "'foo'" "${ok[@]}" --strategies='independent;foo'
  expect_usage_error "unknown all-reduce algorithm 'ring'" "${ok[@]}" --strategies='replicated:ring'
  expect_usage_error "'overlap' is not a --flag" "${ok[@]}" --strategies='independent+overlap'
  expect_usage_error "'mpi' is not a parameter device" "${ok[@]}" --strategies='parameter_server:mpi'
  expect_usage_error "a '+' with no flag after it" "${ok[@]}" --strategies='independent+'
  expect_usage_error "--model is set by the sweep" "${ok[@]}" --strategies='replicated+--model=vgg16'
  expect_usage_error "both write results named 'independent'" "${ok[@]}" --strategies='independent;independent'
  expect_usage_error "runs one process per GPU; add --launcher=mpirun (or srun, torchrun)" "${ok[@]}" --strategies='distributed_all_reduce'
  expect_usage_error "--rounds=0: must be a positive integer" "${ok[@]}" --strategies=independent --rounds=0
  expect_usage_error "give one of them (--rounds interleaves the repeats)" "${ok[@]}" --strategies=independent \
    --rounds=2 --repeats=3
  expect_usage_error "--models is missing" --gpus=1 --strategies=independent --out="$tmp/never"
  expect_usage_error "--gpus is missing" --models=trivial --strategies=independent --out="$tmp/never"
  expect_usage_error "--strategies is missing" --models=trivial --gpus=1 --out="$tmp/never"
  expect_usage_error "--out is missing" --models=trivial --gpus=1 --strategies=independent
  expect_usage_error "'0' is not a positive integer" "${ok[@]}" --gpus=1,0 --strategies=independent
  expect_usage_error "and 'independent' runs as one process" "${ok[@]}" --strategies=independent --launcher=mpirun
  expect_usage_error "independent takes no ':VALUE'" "${ok[@]}" --strategies='independent:gpu'
  expect_usage_error "--launcher=pbs: accepted: none, mpirun, srun, torchrun" "${ok[@]}" --strategies=horovod --launcher=pbs
  expect_usage_error "--launcher=torchrun starts one process per GPU, and 'independent'" "${ok[@]}" --strategies=independent --launcher=torchrun
  expect_usage_error "use --select=visible" "${ok[@]}" --strategies=horovod --launcher=mpirun --select=indices

  # mpirun: N ranks, no --num_gpus, the GPUs through CUDA_VISIBLE_DEVICES, MPIRUN_ARGS before -np.
  rc=0
  MPIRUN=/opt/mpi/bin/mpirun MPIRUN_ARGS="-x NCCL_NVLS_ENABLE" bash "$sweep" --models=nmt --gpus=2 \
    --strategies='horovod;distributed_replicated+--overlap_comm=false' --launcher=mpirun --out="$o" \
    --dpbench="$d" --dry-run >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  expect_rc 0 "dry run, --launcher=mpirun"
  check "mpirun command: $(head -n 1 "$tmp/stdout")" [ "$(head -n 1 "$tmp/stdout")" = \
    "CUDA_VISIBLE_DEVICES=0,1 /opt/mpi/bin/mpirun -x NCCL_NVLS_ENABLE -np 2 $d --model=nmt --variable_update=horovod --result_file=$o/nmt__horovod__2gpu.json" ]
  check "mpirun command with flags: $(sed -n 2p "$tmp/stdout")" [ "$(sed -n 2p "$tmp/stdout")" = \
    "CUDA_VISIBLE_DEVICES=0,1 /opt/mpi/bin/mpirun -x NCCL_NVLS_ENABLE -np 2 $d --model=nmt --variable_update=distributed_replicated --overlap_comm=false --result_file=$o/nmt__distributed_replicated+overlap_comm=false__2gpu.json" ]
  # srun and torchrun: N tasks (workers), their own arguments first.
  rc=0
  SRUN=/opt/slurm/bin/srun SRUN_ARGS="--gpus-per-task=1 --mpi=none" bash "$sweep" --models=nmt --gpus=2 \
    --strategies=horovod --launcher=srun --out="$o" --dpbench="$d" --dry-run >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  expect_rc 0 "dry run, --launcher=srun"
  check "srun command: $(head -n 1 "$tmp/stdout")" [ "$(head -n 1 "$tmp/stdout")" = \
    "CUDA_VISIBLE_DEVICES=0,1 /opt/slurm/bin/srun --gpus-per-task=1 --mpi=none -n 2 $d --model=nmt --variable_update=horovod --result_file=$o/nmt__horovod__2gpu.json" ]
  rc=0
  TORCHRUN_ARGS="--nnodes=1" bash "$sweep" --models=nmt --gpus=2 --strategies=distributed_replicated \
    --launcher=torchrun --out="$o" --dpbench="$d" --dry-run >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  expect_rc 0 "dry run, --launcher=torchrun"
  check "torchrun command: $(head -n 1 "$tmp/stdout")" [ "$(head -n 1 "$tmp/stdout")" = \
    "CUDA_VISIBLE_DEVICES=0,1 torchrun --nnodes=1 --nproc_per_node=2 --no-python $d --model=nmt --variable_update=distributed_replicated --result_file=$o/nmt__distributed_replicated__2gpu.json" ]
  # fully_sharded runs either way: one process driving every device, or one process per GPU.
  rc=0
  bash "$sweep" --models=gpt --gpus=2 --strategies=fully_sharded --launcher=torchrun --out="$o" --dpbench="$d" \
    --dry-run >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  expect_rc 0 "dry run, fully_sharded under torchrun"
  check "fully_sharded under torchrun: $(head -n 1 "$tmp/stdout")" [ "$(head -n 1 "$tmp/stdout")" = \
    "CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 --no-python $d --model=gpt --variable_update=fully_sharded --result_file=$o/gpt__fully_sharded__2gpu.json" ]
  sweep --models=gpt --gpus=2 --strategies=fully_sharded --out="$o" --dpbench="$d" --dry-run --no-report
  expect_rc 0 "dry run, fully_sharded in one process"
  check "fully_sharded in one process: $(head -n 1 "$tmp/stdout")" [ "$(head -n 1 "$tmp/stdout")" = \
    "CUDA_VISIBLE_DEVICES=0,1 $d --model=gpt --num_gpus=2 --variable_update=fully_sharded --result_file=$o/gpt__fully_sharded__2gpu.json" ]
  expect_usage_error "--num_gpus after --" "${ok[@]}" --strategies=independent -- --num_gpus=8
  expect_usage_error "unknown option '--model=x'" "${ok[@]}" --strategies=independent --model=x
  expect_usage_error "unexpected argument 'resnet50'" "${ok[@]}" --strategies=independent resnet50
  expect_usage_error "not an executable at '$tmp/none'" --models=trivial --gpus=1 --strategies=independent \
    --out="$tmp/never" --dpbench="$tmp/none"

  sweep --help
  expect_rc 0 "--help"
  check "--help lists the strategy tokens" grep -q 'parameter_server:DEVICE' "$tmp/stdout"
}

# ---- a fake dpbench: the environment and arguments real runs get, and the report call ----------
# It records how it was called (FAKE_CALLS), and in FAKE_CALLS.env its pid, DPBENCH_END_WITH_PID,
# DPBENCH_RUN_TAG and the tag the sweep had recorded by then. It writes a small result tagged as
# dpbench tags it (with FAKE_TAG instead when set), fails when given --fake_fail, and given
# --fake_sleep=S runs S seconds first, keeping dpbench's DPBENCH_END_WITH_PID promise: once that
# process has gone (and FAKE_LINGER more seconds) it ends with exit 143, writing nothing.
write_fake() {
  cat >"$1" <<'FAKE'
#!/usr/bin/env bash
[ "$1" != strategies ] || exec "$FAKE_REAL_DPBENCH" "$@"  # what the strategy tokens mean
echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset} $*" >>"$FAKE_CALLS"
if [ "$1" = report ]; then
  [ -z "${FAKE_REPORT_FAIL:-}" ] || { echo "fake report: nothing to report" >&2; exit 3; }
  echo "| row |" >"$4"
  exit 0
fi
sleep_s=0
for arg; do
  case $arg in
    --result_file=*) result=${arg#--result_file=} ;;
    --fake_sleep=*) sleep_s=${arg#--fake_sleep=} ;;
  esac
done
tag_file=$(dirname "$result")/logs/$(basename "$result" .json).tag
recorded=$(cat "$tag_file" 2>/dev/null || echo none)
end_with=${DPBENCH_END_WITH_PID-unset}
echo "pid=$$ end_with_pid=${end_with%@*} run_tag=${DPBENCH_RUN_TAG-unset} recorded=$recorded" >>"$FAKE_CALLS.env"
echo "$$" >>"$FAKE_PIDS"
case " $* " in *" --fake_fail "*) echo "fake: failing as asked" >&2; exit 7 ;; esac
# As dpbench ends on these: a bash without traps may outlive a SIGINT that reaches it while its
# `sleep` ends of itself (it then takes the signal as the child's to handle).
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
deadline=$((SECONDS + sleep_s))
while ((SECONDS < deadline)); do
  if [ -n "${DPBENCH_END_WITH_PID:-}" ] && ! kill -0 "${DPBENCH_END_WITH_PID%@*}" 2>/dev/null; then
    sleep "${FAKE_LINGER:-0}"
    echo "fake: the sweep has ended" >&2
    exit 143
  fi
  sleep 0.1
done
printf '{"summary": {"items_per_sec": 1234.56, "unit": "images/s"}, "invocation": {"run_tag": "%s", "argv": []}}\n' \
  "${FAKE_TAG:-$DPBENCH_RUN_TAG}" >"$result"
FAKE
  chmod +x "$1"
}

fake_tests() {
  local fake=$tmp/fake_dpbench o=$tmp/out
  write_fake "$fake"
  export FAKE_CALLS=$tmp/calls FAKE_PIDS=$tmp/fake_pids FAKE_REAL_DPBENCH=$real_dpbench

  sweep --models=m '--gpus=1,2' --strategies='independent;replicated:nccl+--fake_fail' --out="$o" --dpbench="$fake" -- --x=1
  expect_rc 1 "fake sweep with two failing runs"
  cat >"$tmp/expected" <<EOF
CUDA_VISIBLE_DEVICES=0 --model=m --num_gpus=1 --variable_update=independent --x=1 --result_file=$o/m__independent__1gpu.json
CUDA_VISIBLE_DEVICES=0 --model=m --num_gpus=1 --variable_update=replicated --all_reduce_spec=nccl --fake_fail --x=1 --result_file=$o/m__replicated-nccl+fake_fail__1gpu.json
CUDA_VISIBLE_DEVICES=0,1 --model=m --num_gpus=2 --variable_update=independent --x=1 --result_file=$o/m__independent__2gpu.json
CUDA_VISIBLE_DEVICES=0,1 --model=m --num_gpus=2 --variable_update=replicated --all_reduce_spec=nccl --fake_fail --x=1 --result_file=$o/m__replicated-nccl+fake_fail__2gpu.json
CUDA_VISIBLE_DEVICES=unset report $o --output $o/REPORT.md --plots $o/plots
EOF
  check "the runs' environment and arguments: $(diff "$tmp/expected" "$tmp/calls")" cmp -s "$tmp/expected" "$tmp/calls"
  check "rate read and rounded: $(cat "$tmp/stdout")" grep -qE '^\[1/4\] m independent 1 GPU \.\.\. 1234\.6 images/s \([0-9]+ s\)$' "$tmp/stdout"
  check "failed run's line: $(cat "$tmp/stdout")" grep -qxF \
    "[4/4] m replicated:nccl+--fake_fail 2 GPUs ... FAILED (exit 7): fake: failing as asked (log: $o/logs/m__replicated-nccl+fake_fail__2gpu.log)" "$tmp/stdout"
  check "two lines in failures.txt, with exit=7" [ "$(grep -c ' exit=7 CUDA_VISIBLE_DEVICES=0' "$o/failures.txt" || true)" = 2 ]
  check "report line: $(cat "$tmp/stdout")" grep -qxF "sweep.sh: report written to $o/REPORT.md, plots to $o/plots" "$tmp/stdout"
  check "summary: $(tail -n 1 "$tmp/stdout")" [ "$(tail -n 1 "$tmp/stdout")" = \
    "sweep.sh: 4 runs: 2 ran, 0 skipped (result present), 2 failed (see $o/failures.txt)" ]
  # Each run had its own tag, recorded before it started (the failing ones too).
  check "4 runs recorded their environment" [ "$(lines "$tmp/calls.env")" = 4 ]
  check "each run's DPBENCH_RUN_TAG was recorded before it started: $(cat "$tmp/calls.env")" \
    [ "$(grep -cE ' run_tag=([0-9]+-[0-9]+-[0-9]+) recorded=\1$' "$tmp/calls.env" || true)" = 4 ]
  check "4 different tags" [ "$(grep -o ' run_tag=[^ ]*' "$tmp/calls.env" | sort -u | wc -l)" = 4 ]
  check "args recorded for a failed run too" [ -s "$o/logs/m__replicated-nccl+fake_fail__2gpu.args" ]

  # A report that fails is one line and leaves the exit status to the runs.
  rm -f "$tmp/calls"
  rc=0
  FAKE_REPORT_FAIL=1 bash "$sweep" --models=m '--gpus=1,2' --strategies=independent --out="$o" \
    --dpbench="$fake" -- --x=1 >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  expect_rc 0 "fake sweep, all present, failing report"
  check "report failure line: $(cat "$tmp/stdout")" grep -qxF \
    "sweep.sh: the report could not be generated: dpbench report exited 3: fake report: nothing to report (log: $o/logs/report.log)" "$tmp/stdout"
  check "only the report ran (results present, made with the same arguments): $(cat "$tmp/calls")" \
    [ "$(lines "$tmp/calls")" = 1 ]

  # The caller's CUDA_VISIBLE_DEVICES: runs take its first N.
  rm -f "$tmp/calls"
  rc=0
  CUDA_VISIBLE_DEVICES=6,7 bash "$sweep" --models=m '--gpus=1,2' --strategies=parameter_server --out="$o" --no-report \
    --dpbench="$fake" >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  expect_rc 0 "fake sweep under CUDA_VISIBLE_DEVICES=6,7"
  check "runs see 6 and 6,7: $(cat "$tmp/calls")" [ "$(cut -d ' ' -f 1 "$tmp/calls" | tr '\n' ' ')" = \
    "CUDA_VISIBLE_DEVICES=6 CUDA_VISIBLE_DEVICES=6,7 " ]

  # --select=indices leaves the environment alone.
  rm -f "$tmp/calls"
  sweep --models=m --gpus=2 --strategies=independent --out="$tmp/out2" --no-report --select=indices --dpbench="$fake"
  expect_rc 0 "fake sweep, --select=indices"
  check "--select=indices: $(cat "$tmp/calls")" [ "$(cat "$tmp/calls")" = \
    "CUDA_VISIBLE_DEVICES=unset --model=m --num_gpus=2 --gpu_indices=0,1 --variable_update=independent --result_file=$tmp/out2/m__independent__2gpu.json" ]

  fake_tag_tests "$fake"
  fake_folder_tests "$fake"
  fake_mpirun_tests "$fake"
  fake_lock_tests "$fake"
  fake_signal_tests "$fake"
}

# A result counts only when its invocation.run_tag is the tag recorded for its run, with each
# JSON reader; a run whose result carries another run's tag failed.
fake_tag_tests() {
  local fake=$1 o=$tmp/tags tool tools=(grep)
  command -v python3 >/dev/null 2>&1 && tools+=(python3)
  command -v jq >/dev/null 2>&1 && tools+=(jq)
  local matrix=(--models=m --gpus=1 --strategies='independent;replicated' --out="$o" --dpbench="$fake" --no-report)
  sweep "${matrix[@]}"
  expect_rc 0 "tagged sweep"
  for tool in "${tools[@]}"; do
    # One result from an earlier launch (an orphan that renamed its result over the rerun's), one
    # recorded and present: the first runs again, the second is skipped.
    echo "1-1-1" >"$o/logs/m__independent__1gpu.tag"
    rc=0
    SWEEP_JSON_TOOL=$tool bash "$sweep" "${matrix[@]}" >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
    expect_rc 0 "($tool) sweep with a result of another launch"
    check "($tool) the other launch's result runs again: $(cat "$tmp/stdout")" grep -qE \
      '^\[1/2\] m independent 1 GPU \.\.\. re-running \(result not from the recorded run\) \.\.\. 1234\.6 images/s' "$tmp/stdout"
    check "($tool) the recorded one is skipped: $(cat "$tmp/stdout")" grep -qxF \
      "[2/2] m replicated 1 GPU ... skipped, result present (1234.6 images/s)" "$tmp/stdout"
    # A result without "invocation" (an older dpbench) runs again.
    printf '{"summary": {"items_per_sec": 5, "unit": "images/s"}}\n' >"$o/m__replicated__1gpu.json"
    rc=0
    SWEEP_JSON_TOOL=$tool bash "$sweep" "${matrix[@]}" >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
    expect_rc 0 "($tool) sweep with an untagged result"
    check "($tool) an untagged result runs again: $(cat "$tmp/stdout")" grep -qF \
      "[2/2] m replicated 1 GPU ... re-running (result not from the recorded run) ... 1234.6 images/s" "$tmp/stdout"
    check "($tool) the first is skipped now: $(tail -n 1 "$tmp/stdout")" \
      [ "$(tail -n 1 "$tmp/stdout")" = "sweep.sh: 2 runs: 1 ran, 1 skipped (result present), 0 failed" ]
  done
  rc=0
  FAKE_TAG=9-9-9 bash "$sweep" "${matrix[@]}" --strategies=parameter_server >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  expect_rc 1 "a run whose result names another launch"
  check "its result is another run's: $(cat "$tmp/stdout")" grep -qE \
    "^\[1/1\] m parameter_server 1 GPU \.\.\. FAILED \(exit 0: its result is another launch's \(run_tag 9-9-9, expected [0-9-]+\)\): " "$tmp/stdout"
}

# A folder where a result goes is a failed run; stale temporary files are removed, live ones kept.
fake_folder_tests() {
  local fake=$1 o=$tmp/folder
  mkdir -p "$o/m__independent__2gpu.json/inside"
  sleep 0 &
  local gone=$!
  wait "$gone"
  touch "$o/m__independent__1gpu.json.tmp.$gone" "$o/.m__independent__1gpu.tmp.$gone" \
    "$o/m__replicated__1gpu.json.tmp.$$" "$o/notes.tmp.x" "$o/m.json.tmp.${gone}x"
  sweep --models=m --gpus=1,2 --strategies=independent --out="$o" --dpbench="$fake" --no-report
  expect_rc 1 "a folder at a result's path"
  check "the blocked run failed, not run: $(cat "$tmp/stdout")" grep -qxF \
    "[2/2] m independent 2 GPUs ... FAILED (not run): rm: cannot remove '$o/m__independent__2gpu.json': Is a directory" "$tmp/stdout"
  check "the other run ran: $(cat "$tmp/stdout")" grep -qE '^\[1/2\] m independent 1 GPU \.\.\. 1234\.6 images/s' "$tmp/stdout"
  check "summary after a blocked run: $(cat "$tmp/stdout")" [ "$(tail -n 1 "$tmp/stdout")" = \
    "sweep.sh: 2 runs: 1 ran, 0 skipped (result present), 1 failed (see $o/failures.txt)" ]
  check "failures.txt: exit=none: $(cat "$o/failures.txt")" grep -qF \
    " exit=none CUDA_VISIBLE_DEVICES=0,1 $fake --model=m --num_gpus=2" "$o/failures.txt"
  check "no error on stderr: $(cat "$tmp/stderr")" [ ! -s "$tmp/stderr" ]
  check "says it removed 2 temporary files: $(cat "$tmp/stdout")" grep -qxF \
    "sweep.sh: removed 2 stale temporary files left in $o by dpbench runs that have ended" "$tmp/stdout"
  check "removed an ended process's file" [ ! -e "$o/m__independent__1gpu.json.tmp.$gone" ]
  check "removed an ended process's file with a shortened name" [ ! -e "$o/.m__independent__1gpu.tmp.$gone" ]
  check "kept a live process's file" [ -e "$o/m__replicated__1gpu.json.tmp.$$" ]
  check "kept names that end in no pid" [ -e "$o/notes.tmp.x" ] && [ -e "$o/m.json.tmp.${gone}x" ]
}

# mpirun passes the sweep's variables on to the ranks (-x); the printed command leaves them out.
fake_mpirun_tests() {
  local fake=$1 o=$tmp/mpi mpirun=$tmp/fake_mpirun
  cat >"$mpirun" <<'FAKE'
#!/usr/bin/env bash
# Records its flags; runs the command after -np N once.
echo "$*" >>"$FAKE_CALLS.mpirun"
while (($#)); do case $1 in -np) shift 2; break ;; *) shift ;; esac; done
exec "$@"
FAKE
  chmod +x "$mpirun"
  rm -f "$tmp/calls.env"
  rc=0
  MPIRUN=$mpirun MPIRUN_ARGS="-x NCCL_DEBUG" bash "$sweep" --models=m --gpus=2 --strategies=horovod --launcher=mpirun \
    --out="$o" --dpbench="$fake" --no-report >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  expect_rc 0 "fake mpirun sweep"
  check "mpirun gets -x for the sweep's variables: $(cat "$tmp/calls.mpirun")" [ "$(cat "$tmp/calls.mpirun")" = \
    "-x NCCL_DEBUG -x DPBENCH_END_WITH_PID -x DPBENCH_RUN_TAG -np 2 $fake --model=m --variable_update=horovod --result_file=$o/m__horovod__2gpu.json" ]
  check "the recorded arguments leave them out: $(cat "$o/logs/m__horovod__2gpu.args")" [ "$(cat "$o/logs/m__horovod__2gpu.args")" = \
    "CUDA_VISIBLE_DEVICES=0,1 $mpirun -x NCCL_DEBUG -np 2 --model=m --variable_update=horovod" ]
  check "the rank had a tag and the sweep's pid: $(cat "$tmp/calls.env")" \
    grep -qE '^pid=[0-9]+ end_with_pid=[0-9]+ run_tag=[0-9-]+ recorded=[0-9-]+$' "$tmp/calls.env"
}
# Two sweeps into one folder: the second says who holds it and exits 1, or waits with --wait; a
# dry run needs no lock.
fake_lock_tests() {
  local fake=$1 o=$tmp/lock first waiter
  local matrix=(--models=m --gpus=1 --out="$o" --dpbench="$fake" --no-report)
  rm -f "$tmp/calls"
  start_sweep first "${matrix[@]}" --strategies='independent+--fake_sleep=30'
  first=$bg
  wait_until 10 "the first sweep's run to start" grep -qs fake_sleep "$tmp/calls"
  sweep "${matrix[@]}" --strategies=replicated
  expect_rc 1 "a second sweep into a locked folder"
  check "one line says who holds the folder: $(cat "$tmp/stderr")" [ "$(lines "$tmp/stderr")" = 1 ]
  check "it names the holder's pid, host and start: $(cat "$tmp/stderr")" \
    grep -qE "^sweep\.sh: another sweep \(pid $first on $HOSTNAME, started [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}[+-][0-9]{4}: " "$tmp/stderr"
  check "and its command and what to do: $(cat "$tmp/stderr")" grep -qF \
    ": $sweep ${matrix[*]} --strategies=independent+--fake_sleep=30) is running into $o; wait for it or pass --wait" "$tmp/stderr"
  check "the second sweep ran nothing" [ "$(lines "$tmp/calls")" = 1 ]
  sweep "${matrix[@]}" --strategies=replicated --dry-run
  expect_rc 0 "a dry run into a locked folder"
  start_sweep waiter "${matrix[@]}" --strategies=replicated --wait
  waiter=$bg
  wait_until 10 "the waiting sweep to say it waits" grep -q "^sweep\.sh: another sweep (pid $first .*; waiting for it (--wait)$" "$tmp/waiter.stdout"
  check "the waiting sweep runs nothing yet" [ "$(lines "$tmp/calls")" = 1 ]
  kill -s TERM "$first"
  wait_sweep first "$first" 20
  expect_rc 143 "the first sweep, stopped"
  wait_sweep waiter "$waiter" 20
  expect_rc 0 "the sweep that waited"
  check "it ran once the first had ended: $(cat "$tmp/stdout")" grep -qE '^\[1/1\] m replicated 1 GPU \.\.\. 1234\.6 images/s' "$tmp/stdout"
  check "the lock names its last holder: $(cat "$o/.sweep.lock")" grep -qx "pid=$waiter" "$o/.sweep.lock"
}

# SIGINT, SIGTERM and SIGHUP end the running child's whole process group and say what ran; after
# SIGKILL the child ends itself (DPBENCH_END_WITH_PID), and until it has, it keeps the folder locked.
fake_signal_tests() {
  local fake=$1 sig code o pid run
  for sig in INT:130 TERM:143 HUP:129; do
    code=${sig#*:}
    sig=${sig%:*}
    o=$tmp/signal-$sig
    start_sweep signal --models=m --gpus=1 --strategies='independent;replicated+--fake_sleep=30;parameter_server' \
      --out="$o" --dpbench="$fake"
    pid=$bg
    wait_until 10 "the slow run to start" started_runs "$pid" 2
    run=$(fake_run_of "$pid")
    kill -s "$sig" "$pid"
    wait_sweep signal "$pid" 15
    expect_rc "$code" "sweep stopped by SIG$sig"
    check "SIG$sig: the progress line ends 'interrupted': $(cat "$tmp/stdout")" [ "$(tail -n 1 "$tmp/stdout")" = \
      "[2/3] m replicated+--fake_sleep=30 1 GPU ... interrupted" ]
    local said="sweep.sh: stopped after 1 ran, 0 skipped, 0 failed of 3; not run: 2; run the same command again to resume"
    [ "$sig" = HUP ] ||
      said="sweep.sh: SIG$sig: dpbench stops after its current step and keeps what it measured (SIG$sig again stops it at once)
$said"
    check "SIG$sig: what ran and what did not: $(cat "$tmp/stderr")" [ "$(cat "$tmp/stderr")" = "$said" ]
    check "SIG$sig: the run has ended" gone "$run"
    check "SIG$sig: nothing of its process group is left: $(processes_with pgrp "$run")" [ -z "$(processes_with pgrp "$run")" ]
    check "SIG$sig: no report after a stop" [ ! -e "$o/REPORT.md" ]
  done

  o=$tmp/killed
  local matrix=(--models=m --gpus=1 --out="$o" --dpbench="$fake" --no-report)
  export FAKE_LINGER=3
  start_sweep killed "${matrix[@]}" --strategies='independent+--fake_sleep=30'
  pid=$bg
  wait_until 10 "the run of the sweep to be killed to start" started_runs "$pid" 1
  run=$(fake_run_of "$pid")
  disown "$pid"  # no "Killed" notice from bash
  kill -s KILL "$pid"
  wait_until 5 "the sweep to die of SIGKILL" gone "$pid"
  unset FAKE_LINGER
  sweep "${matrix[@]}" --strategies=replicated
  expect_rc 1 "a sweep into a folder locked by a run left behind"
  check "the run left behind holds the lock: $(cat "$tmp/stderr")" grep -qF \
    "sweep.sh: a run left behind by a sweep that has ended (pid $pid on $HOSTNAME, started " "$tmp/stderr"
  wait_until 6 "the run left behind to end itself" gone "$run"
  check "it ended because the sweep had: $(cat "$o/logs/m__independent+fake_sleep=30__1gpu.log")" \
    grep -qxF "fake: the sweep has ended" "$o/logs/m__independent+fake_sleep=30__1gpu.log"
  check "it wrote no result" [ ! -e "$o/m__independent+fake_sleep=30__1gpu.json" ]
  sweep "${matrix[@]}" --strategies=replicated
  expect_rc 0 "a sweep once the run left behind has ended"
}

# ---- the real sweep ------------------------------------------------------------------------------
# A field of a result, with a JSON parser when one is present, else from the pretty-printed text.
num_devices() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"]["num_devices"])' "$1"
  elif command -v jq >/dev/null 2>&1; then
    jq -r .summary.num_devices "$1"
  else
    grep -o '"num_devices": *[0-9]*' "$1" | sed 's/.*: *//'
  fi
}
# invocation.run_tag of a result ("-" when it has none).
run_tag() {
  local tag
  if command -v python3 >/dev/null 2>&1; then
    tag=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("invocation", {}).get("run_tag", "-"))' "$1")
  elif command -v jq >/dev/null 2>&1; then
    tag=$(jq -r '.invocation.run_tag // "-"' "$1")
  else
    tag=$(grep -o '"run_tag": *"[^"]*"' "$1" | sed 's/.*: *"//; s/"$//')
  fi
  echo "${tag:--}"
}
# The pid of the dpbench that sweep PID runs, if any.
dpbench_child_of() {
  local c comm
  for c in $(processes_with ppid "$1"); do
    { read -r comm <"/proc/$c/comm"; } 2>/dev/null || continue
    [ "$comm" = "$dpbench_comm" ] && echo "$c"
  done
  return 0
}
has_dpbench_child() { [ -n "$(dpbench_child_of "$1")" ]; }
# Progress lines with the elapsed time dropped, so two sweeps can be compared.
progress() { grep '^\[' "$tmp/stdout" | sed 's/ ([0-9]* s)$//'; }

reference_tests() {
  local d=${1:?reference mode needs the dpbench path}
  local o=$tmp/out
  local flags=(--device=cpu --num_batches=3 --num_warmup_batches=1 --display_every=100)
  local matrix=(--models=trivial '--gpus=1,2,4' --strategies='independent;replicated:nccl' --out="$o" --dpbench="$d")
  local names=() n s
  for n in 1 2 4; do for s in independent replicated-nccl; do names+=("trivial__${s}__${n}gpu"); done; done

  # 1. Everything runs: one result per combination, with the right device count.
  sweep "${matrix[@]}" -- "${flags[@]}"
  expect_rc 0 "first sweep"
  check "first sweep summary: $(tail -n 1 "$tmp/stdout")" \
    [ "$(tail -n 1 "$tmp/stdout")" = "sweep.sh: 6 runs: 6 ran, 0 skipped (result present), 0 failed" ]
  check "6 result files, got: $(ls "$o")" [ "$(find "$o" -maxdepth 1 -name '*.json' | wc -l)" = 6 ]
  for name in "${names[@]}"; do
    n=${name##*__}
    n=${n%gpu}
    check "$name.json exists" [ -f "$o/$name.json" ]
    check "$name.json has num_devices $n" [ "$(num_devices "$o/$name.json")" = "$n" ]
    check "$name log kept" [ -s "$o/logs/$name.log" ]
  done
  check "a progress line per run with its rate: $(cat "$tmp/stdout")" [ "$(progress | grep -cE \
    '^\[[1-6]/6\] trivial (independent|replicated:nccl) [124] devices? \.\.\. [0-9]+\.[0-9] images/s$' || true)" = 6 ]
  check "third run is independent on 2 devices" grep -q '^\[3/6\] trivial independent 2 devices \.\.\. ' "$tmp/stdout"
  check "no failures.txt after a clean sweep" [ ! -e "$o/failures.txt" ]
  check "the report was written: $(cat "$tmp/stdout")" grep -qxF \
    "sweep.sh: report written to $o/REPORT.md, plots to $o/plots" "$tmp/stdout"
  # The sweep recorded a tag per run; dpbench wrote it into the result (DPBENCH_RUN_TAG).
  for name in "${names[@]}"; do
    check "$name.json has invocation.run_tag $(cat "$o/logs/$name.tag") as recorded, got '$(run_tag "$o/$name.json")' (does this dpbench write DPBENCH_RUN_TAG into invocation.run_tag?)" \
      [ "$(run_tag "$o/$name.json")" = "$(cat "$o/logs/$name.tag")" ]
  done
  # The report: one table per strategy with a row per device count (batch 64 per device, 3 batches),
  # the comparison table with both strategies, and the figures.
  local report=$o/REPORT.md series
  for series in independent "replicated (nccl)"; do
    check "report has the $series series" grep -qxF \
      "### trivial, $series, fp32, NCHW, reference backend, batch 64 per device (weak scaling)" "$report"
    for n in 1 2 4; do
      check "report: $series row for $n devices" [ "$(sed -n "/^### trivial, $series,/,/^###/p" "$report" | \
        grep -cE "^\| $n \| 64 \| $((64 * n)) \| [0-9]+\.[0-9]{3} \| [0-9]+\.[0-9] \| [0-9]+\.[0-9]{2} \| [0-9]+\.[0-9] \|" || true)" = 1 ]
    done
  done
  check "report: the 1-device rows are the baseline" [ "$(grep -cE '^\| 1 \| 64 \| 64 \| [0-9.]+ \| [0-9.]+ \| 1\.00 \| 100\.0 \|' "$report" || true)" = 2 ]
  check "report: comparison table of both strategies" grep -qxF "| GPU number | independent | replicated (nccl) |" "$report"
  check "report: speedup figure" [ -s "$o/plots/speedup_trivial_fp32_nchw_reference_backend_batch_64_per_device_weak_scaling.svg" ]
  check "report: step-time figures of the 4-device runs" [ "$(find "$o/plots" -name 'steps_*_4gpu.svg' | wc -l)" = 2 ]
  mkdir "$tmp/before"
  cp -p "$o"/*.json "$tmp/before/"
  progress | sed 's/ \.\.\. .*//' >"$tmp/labels"

  # 2. Run again: everything is skipped, nothing is touched; the same with each JSON reader.
  local tools=(grep)
  command -v python3 >/dev/null 2>&1 && tools+=(python3)
  command -v jq >/dev/null 2>&1 && tools+=(jq)
  local tool first=""
  for tool in "${tools[@]}"; do
    rc=0
    SWEEP_JSON_TOOL=$tool bash "$sweep" "${matrix[@]}" --no-report -- "${flags[@]}" >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
    expect_rc 0 "second sweep ($tool)"
    check "second sweep ($tool) skips all: $(tail -n 1 "$tmp/stdout")" \
      [ "$(tail -n 1 "$tmp/stdout")" = "sweep.sh: 6 runs: 0 ran, 6 skipped (result present), 0 failed" ]
    check "($tool) every line says skipped with the rate" [ "$(progress | grep -cE \
      ' \.\.\. skipped, result present \([0-9]+\.[0-9] images/s\)$' || true)" = 6 ]
    if [ -z "$first" ]; then first=$(progress); fi
    check "($tool) reads the same rates as ${tools[0]}" [ "$(progress)" = "$first" ]
    for name in "${names[@]}"; do check "$name.json untouched" cmp -s "$o/$name.json" "$tmp/before/$name.json"; done
  done

  # 3. A corrupt (partial) result is run again, and only it.
  local bad=trivial__replicated-nccl__2gpu
  head -c 200 "$tmp/before/$bad.json" >"$o/$bad.json"
  sweep "${matrix[@]}" --no-report -- "${flags[@]}"
  expect_rc 0 "sweep after corrupting $bad.json"
  check "only the corrupt one ran: $(tail -n 1 "$tmp/stdout")" \
    [ "$(tail -n 1 "$tmp/stdout")" = "sweep.sh: 6 runs: 1 ran, 5 skipped (result present), 0 failed" ]
  check "the re-run one is replicated:nccl on 2 devices" grep -qE \
    '^\[4/6\] trivial replicated:nccl 2 devices \.\.\. re-running \(incomplete result file\) \.\.\. [0-9.]+ images/s' "$tmp/stdout"
  check "$bad.json complete again with num_devices 2" [ "$(num_devices "$o/$bad.json")" = 2 ]
  for name in "${names[@]}"; do
    [ "$name" = "$bad" ] || check "$name.json untouched by the re-run" cmp -s "$o/$name.json" "$tmp/before/$name.json"
  done

  # 3b. A result that is not the recorded run's (another launch's tag) is run again, and only it.
  local other=trivial__independent__4gpu
  echo "1-1-1" >"$o/logs/$other.tag"
  sweep "${matrix[@]}" --no-report -- "${flags[@]}"
  expect_rc 0 "sweep after changing the tag of $other"
  check "only the other launch's result ran: $(tail -n 1 "$tmp/stdout")" \
    [ "$(tail -n 1 "$tmp/stdout")" = "sweep.sh: 6 runs: 1 ran, 5 skipped (result present), 0 failed" ]
  check "it says why: $(cat "$tmp/stdout")" grep -qE \
    '^\[5/6\] trivial independent 4 devices \.\.\. re-running \(result not from the recorded run\) \.\.\. [0-9.]+ images/s' "$tmp/stdout"
  check "$other.json carries its new tag" [ "$(run_tag "$o/$other.json")" = "$(cat "$o/logs/$other.tag")" ]

  # 4. A run that fails (a total batch of 6 does not divide over 4 devices) is recorded; the rest
  #    of the sweep runs and the exit status says a run failed.
  sweep --models=trivial --gpus=1,2,4 --strategies='independent;replicated:nccl;replicated:nccl+--total_batch_size=6' \
    --out="$o" --dpbench="$d" --no-report -- "${flags[@]}"
  expect_rc 1 "sweep with a failing run"
  check "summary of the failing sweep: $(tail -n 1 "$tmp/stdout")" [ "$(tail -n 1 "$tmp/stdout")" = \
    "sweep.sh: 9 runs: 2 ran, 6 skipped (result present), 1 failed (see $o/failures.txt)" ]
  local failing=trivial__replicated-nccl+total_batch_size=6__4gpu
  check "failure progress line" grep -qF "[9/9] trivial replicated:nccl+--total_batch_size=6 4 devices ... FAILED (exit 2): " "$tmp/stdout"
  check "failures.txt has one line" [ "$(lines "$o/failures.txt")" = 1 ]
  check "failures.txt starts with the time: $(cat "$o/failures.txt")" grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+[+-][0-9]{4} ' "$o/failures.txt"
  check "failures.txt: exit code and command: $(cat "$o/failures.txt")" [ "$(cut -d ' ' -f 2- "$o/failures.txt")" = \
    "exit=2 $d --model=trivial --num_gpus=4 --variable_update=replicated --all_reduce_spec=nccl --total_batch_size=6 ${flags[*]} --result_file=$o/$failing.json" ]
  check "failing run's log kept" grep -q 'total_batch_size' "$o/logs/$failing.log"
  check "no result for the failing run" [ ! -e "$o/$failing.json" ]
  for n in 1 2; do
    check "total_batch_size=6 on $n devices succeeded" [ "$(num_devices "$o/trivial__replicated-nccl+total_batch_size=6__${n}gpu.json")" = "$n" ]
  done

  # 5. A result made with other arguments (here another --num_batches) is stale and runs again.
  sweep --models=trivial --gpus=1 --strategies=independent --out="$o" --dpbench="$d" --no-report -- \
    --device=cpu --num_batches=4 --num_warmup_batches=1 --display_every=100
  expect_rc 0 "sweep with other arguments"
  check "stale result re-run: $(cat "$tmp/stdout")" grep -qF \
    "[1/1] trivial independent 1 device ... re-running (made with other arguments, see $o/logs/trivial__independent__1gpu.args) ... " \
    "$tmp/stdout"
  check "the re-run has 4 measured steps" grep -qE '"measured_steps": *4' "$o/trivial__independent__1gpu.json"

  reference_stop_tests "$d"
}

# A stopped sweep leaves no dpbench running: SIGTERM stops it through the sweep's trap (it keeps
# what it measured, marked interrupted, and the same command run again runs it again), SIGKILL
# through dpbench's watch of DPBENCH_END_WITH_PID.
reference_stop_tests() {
  local d=$1 o=$tmp/stop pid run
  local endless=(--models=trivial --gpus=2 --strategies=independent --out="$o" --dpbench="$d" --no-report -- \
    --device=cpu --num_batches=1000000 --num_warmup_batches=1 --display_every=1000)
  local name=trivial__independent__2gpu
  dpbench_comm=$(basename "$d" | cut -c 1-15)  # the kernel keeps 15 characters of a command name

  start_sweep stop "${endless[@]}"
  pid=$bg
  wait_until 20 "dpbench to start under the sweep" has_dpbench_child "$pid"
  run=$(dpbench_child_of "$pid")
  wait_until 30 "dpbench to measure" grep -q "^Done warm up" "$o/logs/$name.log"
  kill -s TERM "$pid"
  wait_sweep stop "$pid" 20
  expect_rc 143 "sweep stopped by SIGTERM"
  check "SIGTERM: the progress line: $(cat "$tmp/stdout")" [ "$(tail -n 1 "$tmp/stdout")" = "[1/1] trivial independent 2 devices ... interrupted" ]
  check "SIGTERM: what ran and what did not: $(cat "$tmp/stderr")" [ "$(cat "$tmp/stderr")" = \
"sweep.sh: SIGTERM: dpbench stops after its current step and keeps what it measured (SIGTERM again stops it at once)
sweep.sh: stopped after 0 ran, 0 skipped, 0 failed of 1; not run: 1 (the interrupted one kept its partial result, marked interrupted, in $o/$name.json); run the same command again to resume" ]
  check "SIGTERM: dpbench (pid $run) has ended" gone "$run"
  check "SIGTERM: the partial result is marked interrupted" grep -qE '"interrupted": *true' "$o/$name.json"
  sweep --dry-run "${endless[@]}"
  expect_rc 0 "a dry run after the stop"
  check "the interrupted run would run again: $(cat "$tmp/stdout")" grep -q -- "--result_file=$o/$name.json" "$tmp/stdout"
  check "it is not skipped: $(cat "$tmp/stdout")" [ "$(grep -c '^# present' "$tmp/stdout")" = 0 ]

  # dpbench must end itself within a few seconds of its sweep's SIGKILL.
  grep -q DPBENCH_END_WITH_PID "$d" ||
    fail "$d does not know DPBENCH_END_WITH_PID, so a dpbench outlives a sweep killed by SIGKILL (build a dpbench that watches it)"
  start_sweep killed "${endless[@]}"
  pid=$bg
  wait_until 20 "dpbench to start under the sweep" has_dpbench_child "$pid"
  run=$(dpbench_child_of "$pid")
  sleep 0.5  # into its run (dpbench also ends at once when the process it watches is gone)
  disown "$pid"  # no "Killed" notice from bash
  kill -s KILL "$pid"
  wait_until 5 "the sweep to die of SIGKILL" gone "$pid"
  local tenths=0
  while alive "$run" && ((tenths++ < 50)); do sleep 0.1; done
  if alive "$run"; then
    kill -s KILL -- "-$run" 2>/dev/null || true
    fail "dpbench (pid $run) still ran 5 s after its sweep (pid $pid) was killed by SIGKILL: it does not end with DPBENCH_END_WITH_PID (log: $(tail -n 2 "$o/logs/$name.log"))"
  fi
  checks=$((checks + 1))
  check "SIGKILL: no result" [ ! -e "$o/$name.json" ]
  check "SIGKILL: no temporary file left: $(ls -A "$o")" [ -z "$(find "$o" -maxdepth 1 -name '*.tmp.*')" ]
}

case $mode in
  dry-run) dry_run_tests ;;
  fake) fake_tests ;;
  reference) reference_tests "$real_dpbench" ;;
  *) fail "unknown mode '$mode' (dry-run, fake, reference)" ;;
esac
echo "test_sweep.sh $mode: $checks checks passed"
