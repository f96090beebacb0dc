# Fault cases (sourced by tests/scripts/fault_injection.sh): no output replaces an input or
# another output of its command, however the paths are spelt (./, ../, absolute and relative, a
# symbolic link, a hard link, a linked folder, a name not there yet); every output pair of every
# subcommand (run: result, trace, console; report: output, plots, figures; compare: output;
# predict: output, plot; comm_bench: JSON, table); and a closed or full standard output never
# costs a run its result, while report, compare and predict fail on it with one line.
# shellcheck shell=bash
# shellcheck disable=SC2154  # dpbench, work, quick, faults, limit: set by the harness
# shellcheck source=tests/scripts/stdout_helpers.sh
source "$faults/../stdout_helpers.sh"

ident=$work/identity
mkdir -p "$ident/sub" "$ident/results" "$ident/more"
cp "$work/earlier.json" "$ident/r.json"
# Runs of their own, not copies: a report counts byte-identical results once, with a note.
"$dpbench" "${quick[@]}" --result_file="$ident/results/found.json" >/dev/null 2>&1
"$dpbench" "${quick[@]}" --result_file="$ident/more/other.json" >/dev/null 2>&1
# Names, kinds, link targets and contents (not times: checking an output path touches its folder).
snapshot() {
  (cd "$ident" && find . -printf '%p %y %l %s\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z |
    xargs -0 cat) | cksum
}
ln -s r.json "$ident/link.json"
ln -s link.json "$ident/link_to_link.json"
ln "$ident/r.json" "$ident/hard.json"
ln -s . "$ident/self"
ln -s results "$ident/results_link"
ln -s later.json "$ident/to_later.json"
ln -s /dev/stdout "$ident/to_stdout"
ln "$work/earlier.json" "$ident/earlier_hard.json"
in_ident=(env -C "$ident")
before=$(snapshot)
# Refused: exit 2, one line, and not a byte changed or added among the files the case names.
refused() {  # name, command...
  local name=$1
  shift
  attempt "$name" 2 "$@" || return
  if [ "$(snapshot)" != "$before" ]; then
    verdict "$name" lost "a file in the case's folder changed or appeared"
    before=$(snapshot)
    return
  fi
  verdict "$name" handled
}
json_file() { python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }
json_alone() { json_file "$work/out"; }
whole() { python3 -c 'import json, sys; json.load(open(sys.argv[1]))["summary"]["measured_steps"]' "$1" 2>/dev/null; }

# ---- run: --result_file and --trace_file, one file named two ways ----
result=(--result_file="$ident/r.json")
refused "run: trace = result, same path" "$dpbench" "${quick[@]}" "${result[@]}" --trace_file="$ident/r.json"
refused "run: trace = result through ./" "$dpbench" "${quick[@]}" "${result[@]}" --trace_file="$ident/./r.json"
refused "run: trace = result through ../" "$dpbench" "${quick[@]}" "${result[@]}" --trace_file="$ident/sub/../r.json"
refused "run: relative result, absolute trace" "${in_ident[@]}" "$dpbench" "${quick[@]}" --result_file=r.json \
  --trace_file="$ident/r.json"
refused "run: trace a symlink to the result" "$dpbench" "${quick[@]}" "${result[@]}" --trace_file="$ident/link.json"
refused "run: trace a link to a link to the result" "$dpbench" "${quick[@]}" "${result[@]}" \
  --trace_file="$ident/link_to_link.json"
refused "run: trace a hard link of the result" "$dpbench" "${quick[@]}" "${result[@]}" --trace_file="$ident/hard.json"
refused "run: trace through a linked folder" "$dpbench" "${quick[@]}" "${result[@]}" --trace_file="$ident/self/r.json"
refused "run: a new name twice" "$dpbench" "${quick[@]}" --result_file="$ident/new.json" --trace_file="$ident/new.json"
refused "run: a new name through ../" "$dpbench" "${quick[@]}" --result_file="$ident/new.json" \
  --trace_file="$ident/sub/../new.json"
refused "run: a new name, relative and absolute" "${in_ident[@]}" "$dpbench" "${quick[@]}" --result_file=new.json \
  --trace_file="$ident/new.json"
refused "run: a new name and a link to it" "$dpbench" "${quick[@]}" --result_file="$ident/later.json" \
  --trace_file="$ident/to_later.json"
refused "run: {rank} filled in names the trace" "$dpbench" "${quick[@]}" --result_file="$ident/r{rank}.json" \
  --trace_file="$ident/r0.json"
reject_keeping_earlier "run: trace a hard link of the earlier result" "${quick[@]}" --trace_file="$ident/earlier_hard.json"
# ---- run: both on standard output would interleave ----
refused "run: both -" "$dpbench" "${quick[@]}" --result_file=- --trace_file=-
refused "run: - and /dev/stdout" "$dpbench" "${quick[@]}" --result_file=- --trace_file=/dev/stdout
refused "run: - and /dev/fd/1" "$dpbench" "${quick[@]}" --result_file=/dev/fd/1 --trace_file=-
refused "run: /dev/stdout and /proc/self/fd/1" "$dpbench" "${quick[@]}" --result_file=/dev/stdout \
  --trace_file=/proc/self/fd/1
refused "run: a link to /dev/stdout and -" "$dpbench" "${quick[@]}" --result_file="$ident/to_stdout" --trace_file=-
# attempt sends stdout to $work/out: the trace on stdout would land in the result file.
refused "run: stdout redirected into the result file" "$dpbench" "${quick[@]}" --result_file="$work/out" --trace_file=-
# ---- run: what may share, and stdout as one document ----
attempt "run: both /dev/null" 0 "$dpbench" "${quick[@]}" --result_file=/dev/null --trace_file=/dev/null &&
  settle "run: both /dev/null" lost "/dev/null is no longer a device" test -c /dev/null
attempt "run: result -, trace /dev/null" 0 "$dpbench" "${quick[@]}" --result_file=- --trace_file=/dev/null &&
  settle "run: result -, trace /dev/null" mishandled "stdout is not the result alone" json_alone
attempt "run: result -, trace a file" 0 "$dpbench" "${quick[@]}" --result_file=- --trace_file="$ident/t1.json" &&
  settle "run: result -, trace a file" mishandled "stdout is not the result alone" json_alone
attempt "run: trace -, result a file" 0 "$dpbench" "${quick[@]}" --result_file="$ident/r1.json" --trace_file=- &&
  settle "run: trace -, result a file" mishandled "stdout is not the trace alone" json_alone
attempt "run: two names in one folder" 0 "$dpbench" "${quick[@]}" --result_file="$ident/r2.json" \
  --trace_file="$ident/t2.json" && settle "run: two names in one folder" mishandled "a file is missing" \
  test -s "$ident/r2.json" -a -s "$ident/t2.json"
rm -f "$ident"/r1.json "$ident"/r2.json "$ident"/t1.json "$ident"/t2.json
before=$(snapshot)

# ---- run: a closed or full stdout costs console lines, never the result ----
long=(--device=cpu --model=trivial --batch_size=1 --num_batches=300 --num_warmup_batches=1 --display_every=1)
attempt "run into a closed pipe" 0 "${into_closed_pipe[@]}" "$dpbench" "${long[@]}" --result_file="$work/piped_run.json" &&
  settle "run into a closed pipe" lost "no whole result" whole "$work/piped_run.json"
if [ -c /dev/full ]; then
  attempt "run > /dev/full" 0 "${onto_full_device[@]}" "$dpbench" "${long[@]}" --result_file="$work/full_run.json" &&
    settle "run > /dev/full" lost "no whole result" whole "$work/full_run.json"
  attempt "run --result_file=- > /dev/full" notes+1 "${onto_full_device[@]}" "$dpbench" "${quick[@]}" --result_file=- &&
    verdict "run --result_file=- > /dev/full" handled
fi
attempt "run >&-" 0 "${with_stdout_closed[@]}" "$dpbench" "${long[@]}" --result_file="$work/closed_run.json" &&
  settle "run >&-" lost "no whole result" whole "$work/closed_run.json"
# The result itself on a stdout that is gone: that is the product lost, an error (after the
# console's lines, which went to stderr).
attempt "run --result_file=- into a closed pipe" notes+1 "${into_closed_pipe[@]}" "$dpbench" "${quick[@]}" --result_file=- &&
  verdict "run --result_file=- into a closed pipe" handled
attempt "run --trace_file=- into a closed pipe" notes+1 "${into_closed_pipe[@]}" "$dpbench" "${quick[@]}" \
  --result_file="$work/traced_run.json" --trace_file=- && verdict "run --trace_file=- into a closed pipe" handled

# ---- report: --output, --plots and its figures against each other and the inputs ----
report=("$dpbench" report "$ident/r.json" "$ident/results")
refused "report: --output = an input" "${report[@]}" --output "$ident/r.json"
refused "report: --output = an input through ./" "${report[@]}" --output "$ident/./r.json"
refused "report: --output = a link to an input" "${report[@]}" --output "$ident/link.json"
refused "report: --output = a hard link of an input" "${report[@]}" --output "$ident/hard.json"
refused "report: --output = a file found in an input folder" "${report[@]}" --output "$ident/results/found.json"
refused "report: --output = a found file through a linked folder" "${report[@]}" \
  --output "$ident/results_link/found.json"
refused "report: --output = an input, relative" "${in_ident[@]}" "$dpbench" report r.json --output "$ident/r.json"
refused "report: --output and --plots one new name" "${report[@]}" --output "$ident/rep" --plots "$ident/sub/../rep"
mkdir -p "$work/figures"
"$dpbench" report "$ident/r.json" --plots "$work/figures" --output /dev/null >/dev/null 2>&1
figure=$(find "$work/figures" -name '*.svg' | head -1)
figure=${figure##*/}
if [ -n "$figure" ]; then
  mkdir -p "$ident/plots"  # report makes the --plots folder when it checks it
  before=$(snapshot)
  refused "report: --output at a figure's name" "${report[@]}" --plots "$ident/plots" --output "$ident/plots/$figure"
  mkdir -p "$work/figure_input"
  cp "$ident/r.json" "$work/figure_input/$figure"
  attempt "report: a figure would replace an input" 2 "$dpbench" report "$work/figure_input/$figure" \
    --plots "$work/figure_input" && settle "report: a figure would replace an input" lost "the input changed" \
    cmp -s "$work/figure_input/$figure" "$ident/r.json"
else
  verdict "report: figures" mishandled "report --plots wrote no figure"
fi
before=$(snapshot)
attempt "report: --output /dev/null with --plots" 0 "${report[@]}" --output /dev/null --plots "$work/figures" &&
  settle "report: --output /dev/null with --plots" lost "/dev/null is no longer a device" test -c /dev/null
attempt "report: --output in the --plots folder" 0 "${report[@]}" --plots "$work/figures" \
  --output "$work/figures/REPORT.md" && settle "report: --output in the --plots folder" mishandled "no report" \
  test -s "$work/figures/REPORT.md"
attempt "report --output=-" 0 "${report[@]}" --output=- && settle "report --output=-" mishandled "nothing on stdout" \
  test -s "$work/out"

# ---- compare: --output against BASE and NEW ----
compare=("$dpbench" compare "$ident/r.json" "$ident/results")
refused "compare: --output = BASE" "${compare[@]}" --output "$ident/r.json"
refused "compare: --output = a file in NEW" "${compare[@]}" --output "$ident/results/found.json"
refused "compare: --output = a link to BASE" "${compare[@]}" --output "$ident/link_to_link.json"
refused "compare: --output = a hard link of BASE" "${compare[@]}" --output "$ident/hard.json"
refused "compare: --output = NEW, a file" "$dpbench" compare "$ident/results" "$ident/more/other.json" \
  --output "$ident/more/./other.json"

# ---- predict: --output and --plot against each other, BASE, MEASURED, --system, --curves ----
system="$faults/../../../systems/reference_backend.json"
cp "$system" "$ident/system.json"
ln -s system.json "$ident/system_link.json"
"$dpbench" --device=cpu --model=trivial --num_batches=4 --num_warmup_batches=1 --result_file="$ident/base.json" \
  --trace_file="$work/base.trace.json" >/dev/null 2>&1
"$dpbench" comm_bench --device=cpu --num_gpus=2 --min_bytes=1K --max_bytes=4K --iters=2 \
  --json="$ident/curve.json" >/dev/null 2>&1
ln "$ident/curve.json" "$ident/curve_hard.json"
before=$(snapshot)
predict=("$dpbench" predict "$ident/base.json" "$ident/r.json" --system "$ident/system.json")
predict_base=("$dpbench" predict "$ident/base.json" --system "$ident/system.json")  # no notes on stderr
curves=(--curves "$ident/curve.json")
refused "predict: --output = BASE" "${predict[@]}" --output "$ident/base.json"
refused "predict: --output = MEASURED" "${predict[@]}" --output "$ident/hard.json"
refused "predict: --output = --system" "${predict[@]}" --output "$ident/system.json"
refused "predict: --output = --curves" "${predict[@]}" --output "$ident/curve.json" "${curves[@]}"
refused "predict: --plot = BASE" "${predict[@]}" --plot "$ident/./base.json"
refused "predict: --plot = --system through a link" "${predict[@]}" --plot "$ident/system_link.json"
refused "predict: --plot = --curves through a hard link" "${predict[@]}" "${curves[@]}" --plot "$ident/curve_hard.json"
refused "predict: --output and --plot one new name" "${predict[@]}" --output "$ident/p.md" --plot "$ident/p.md"
refused "predict: --output and --plot, a new name two ways" "${predict[@]}" --output "$ident/p.md" \
  --plot "$ident/sub/../p.md"
refused "predict: --plot=- with the table on stdout" "${predict[@]}" --plot=-
refused "predict: --plot=/dev/stdout, --output=-" "${predict[@]}" --plot=/dev/stdout --output=-
attempt "predict: --output and --plot both /dev/null" 0 "${predict[@]}" --output /dev/null --plot /dev/null &&
  settle "predict: --output and --plot both /dev/null" lost "/dev/null is no longer a device" test -c /dev/null

# ---- report, compare and predict: what they print is their product ----
for command in report compare predict; do
  case $command in
    report) args=("${report[@]}") ;;
    compare) args=("${compare[@]}") ;;
    predict) args=("${predict_base[@]}") ;;
  esac
  attempt "$command into a closed pipe" 1 "${into_closed_pipe[@]}" "${args[@]}" && verdict "$command into a closed pipe" handled
  if [ -c /dev/full ]; then
    attempt "$command > /dev/full" 1 "${onto_full_device[@]}" "${args[@]}" && verdict "$command > /dev/full" handled
  fi
  attempt "$command >&-" 1 "${with_stdout_closed[@]}" "${args[@]}" && verdict "$command >&-" handled
done

# ---- comm_bench: --json and the table ----
bench=("$dpbench" comm_bench --device=cpu --min_bytes=1K --max_bytes=4K --iters=2)
attempt "comm_bench --json=-" 0 "${bench[@]}" --json=- &&
  settle "comm_bench --json=-" mishandled "stdout is not the JSON alone" json_alone
attempt "comm_bench --json=/dev/stdout" 0 "${bench[@]}" --json=/dev/stdout &&
  settle "comm_bench --json=/dev/stdout" mishandled "stdout is not the JSON alone" json_alone
attempt "comm_bench into a closed pipe" 0 "${into_closed_pipe[@]}" "${bench[@]}" --json="$work/bench.json" &&
  settle "comm_bench into a closed pipe" lost "no JSON written" json_file "$work/bench.json"
attempt "comm_bench --json=- into a closed pipe" notes+1 "${into_closed_pipe[@]}" "${bench[@]}" --json=- &&
  verdict "comm_bench --json=- into a closed pipe" handled
[ "$(snapshot)" = "$before" ] || verdict "the identity cases' inputs" lost "a file changed after all"
