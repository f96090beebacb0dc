#!/usr/bin/env bash
# Tests of scripts/sweep.sh, registered with ctest (tests/CMakeLists.txt).
#   test_sweep.sh dry-run              the dry run's exact commands, GPU selection, names, errors
#   test_sweep.sh fake                 real runs of a fake dpbench (a script): the environment
#                                      and arguments each run gets, failures, the report call
#   test_sweep.sh reference DPBENCH    a real sweep on the reference backend (--device=cpu): one
#                                      result per combination, skipping, re-running a corrupt or
#                                      stale result, a failed run recorded while the others succeed
# Needs bash and coreutils only (python3 and jq are used when present, as sweep.sh uses them).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sweep=$here/../../scripts/sweep.sh
mode=${1:?usage: test_sweep.sh dry-run | fake | reference DPBENCH}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_sweep.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset CUDA_VISIBLE_DEVICES

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
  local d=/opt/dpbench/bin/dpbench o=$tmp/out

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
  expect_usage_error "'ring' is not an all-reduce spec" "${ok[@]}" --strategies='replicated:ring'
  expect_usage_error "'overlap' is not a --flag" "${ok[@]}" --strategies='independent+overlap'
  expect_usage_error "'mpi' is not a parameter device" "${ok[@]}" --strategies='parameter_server:mpi'
  expect_usage_error "a '+' with no flag after it" "${ok[@]}" --strategies='independent+'
  expect_usage_error "--model is set by the sweep" "${ok[@]}" --strategies='replicated+--model=vgg16'
  expect_usage_error "both write results named 'independent'" "${ok[@]}" --strategies='independent;independent'
  expect_usage_error "runs one process per GPU; add --launcher=mpirun" "${ok[@]}" --strategies='distributed_all_reduce'
  expect_usage_error "--models is missing" --gpus=1 --strategies=independent --out="$tmp/never"
  expect_usage_error "--gpus is missing" --models=trivial --strategies=independent --out="$tmp/never"
  expect_usage_error "--strategies is missing" --models=trivial --gpus=1 --out="$tmp/never"
  expect_usage_error "--out is missing" --models=trivial --gpus=1 --strategies=independent
  expect_usage_error "'0' is not a positive integer" "${ok[@]}" --gpus=1,0 --strategies=independent
  expect_usage_error "which only distributed_all_reduce" "${ok[@]}" --strategies=independent --launcher=mpirun
  expect_usage_error "--launcher=srun: accepted: none, mpirun" "${ok[@]}" --strategies=independent --launcher=srun
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
  expect_usage_error "--num_gpus after --" "${ok[@]}" --strategies=independent -- --num_gpus=8
  expect_usage_error "unknown option '--model=x'" "${ok[@]}" --strategies=independent --model=x
  expect_usage_error "unexpected argument 'resnet50'" "${ok[@]}" --strategies=independent resnet50
  expect_usage_error "not an executable at '$tmp/none'" --models=trivial --gpus=1 --strategies=independent \
    --out="$tmp/never" --dpbench="$tmp/none"

  sweep --help
  expect_rc 0 "--help"
  check "--help lists the strategy tokens" grep -q 'parameter_server:DEV' "$tmp/stdout"
}

# ---- a fake dpbench: the environment and arguments real runs get, and the report call ----------
fake_tests() {
  local fake=$tmp/fake_dpbench o=$tmp/out
  cat >"$fake" <<'FAKE'
#!/usr/bin/env bash
# Records how it was called; writes a small result, or fails when given --fake_fail.
echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset} $*" >>"$FAKE_CALLS"
if [ "$1" = report ]; then
  [ -z "${FAKE_REPORT_FAIL:-}" ] || { echo "fake report: nothing to report" >&2; exit 3; }
  echo "| row |" >"$4"
  exit 0
fi
case " $* " in *" --fake_fail "*) echo "fake: failing as asked" >&2; exit 7 ;; esac
for arg; do case $arg in --result_file=*) result=${arg#--result_file=} ;; esac; done
printf '{"summary": {"items_per_sec": 1234.56, "unit": "images/s"}}\n' >"$result"
FAKE
  chmod +x "$fake"
  export FAKE_CALLS=$tmp/calls

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
  # The report: one table per strategy with a row per device count (batch 64 per device, 3 batches),
  # the comparison table with both strategies, and the figures.
  local report=$o/REPORT.md series
  for series in independent "replicated (nccl)"; do
    check "report has the $series series" grep -qxF \
      "### trivial, $series, fp32, NCHW, reference backend, batch 64 per GPU (weak scaling)" "$report"
    for n in 1 2 4; do
      check "report: $series row for $n devices" [ "$(sed -n "/^### trivial, $series,/,/^###/p" "$report" | \
        grep -cE "^\| $n \| 64 \| $((64 * n)) \| [0-9]+\.[0-9]{3} \| [0-9]+\.[0-9] \| [0-9]+\.[0-9]{2} \| [0-9]+\.[0-9] \|" || true)" = 1 ]
    done
  done
  check "report: the 1-device rows are the baseline" [ "$(grep -cE '^\| 1 \| 64 \| 64 \| [0-9.]+ \| [0-9.]+ \| 1\.00 \| 100\.0 \|' "$report" || true)" = 2 ]
  check "report: comparison table of both strategies" grep -qxF "| GPU number | independent | replicated (nccl) |" "$report"
  check "report: speedup figure" [ -s "$o/plots/speedup_trivial_fp32_nchw_reference_backend_batch_64_per_gpu_weak_scaling.svg" ]
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
}

case $mode in
  dry-run) dry_run_tests ;;
  fake) fake_tests ;;
  reference) reference_tests "${2:-}" ;;
  *) fail "unknown mode '$mode' (dry-run, fake, reference)" ;;
esac
echo "test_sweep.sh $mode: $checks checks passed"
