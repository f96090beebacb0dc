#!/usr/bin/env bash
# Sweeps dpbench over models x device counts x synchronisation strategies (x repeats): one run and
# one self-named JSON result per combination in one output folder, failures recorded and skipped
# over, results already present not run again, and `dpbench report` regenerated at the end.
# `scripts/sweep.sh --help` says how; README.md ("Sweeps") has examples. Installed (cmake --install,
# the Debian package) it is `dpbench-sweep`, beside the dpbench it runs.
set -euo pipefail

# Its name in messages: sweep.sh in a checkout, dpbench-sweep where installed.
prog=${BASH_SOURCE[0]##*/}
usage_name=$prog
[ "$prog" != sweep.sh ] || usage_name=scripts/sweep.sh
# The dpbench it runs unless told: the one beside this script (followed through links) where it
# is installed, else the checkout's build.
script_dir=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
if [ -x "$script_dir/dpbench" ] && [ ! -d "$script_dir/dpbench" ]; then
  default_dpbench=$script_dir/dpbench
else
  default_dpbench=$(cd "$script_dir/.." && pwd)/build/dpbench
fi

usage() {
  cat <<EOF
Usage: $usage_name --models=M1,M2 --gpus=N1,N2 --strategies='S1;S2' --out=DIR [options] [-- DPBENCH_FLAGS...]

Runs dpbench once per model x device count x strategy x repeat, each writing its JSON result to
DIR/MODEL__STRATEGY__Ngpu.json (NAME__rK.json with --repeats=K>1), its output to DIR/logs/NAME.log.

Required:
  --models=LIST       comma-separated dpbench models, e.g. resnet50,nmt
  --gpus=LIST         comma-separated device counts, e.g. 1,2,4
  --strategies=LIST   strategy tokens separated by ';' or newlines (quote the list), e.g.
                      'independent;parameter_server:gpu;replicated:nccl'
  --out=DIR           output folder (created if missing)

Options:
  --dpbench=PATH      dpbench executable (default: $default_dpbench)
  --select=visible    (default) choose the GPUs of an N-GPU run with CUDA_VISIBLE_DEVICES: the first
                      N entries of the caller's CUDA_VISIBLE_DEVICES when it is set, else 0,...,N-1
  --select=indices    choose them with --gpu_indices=0,...,N-1 instead (environment untouched)
  --repeats=K         run every combination K times in a row (default 1); names get __r1 ... __rK
  --rounds=K          run every combination K times, round-robin: all combinations once, then all
                      again, ..., so a machine's slow drift falls on each alike; names as --repeats
  --launcher=none     run dpbench directly, one process driving all N devices (default)
  --launcher=mpirun   run N processes, one per GPU: \$MPIRUN (default mpirun) -np N dpbench ...;
                      for the strategies that run one process per GPU (each rank drives the GPU
                      of its host-local rank; with --select=visible the job's CUDA_VISIBLE_DEVICES).
                      Flags for mpirun itself (hosts, -x VAR) go in \$MPIRUN_ARGS (split on spaces)
  --launcher=srun     the same through Slurm: \$SRUN (default srun) \$SRUN_ARGS -n N dpbench ...
                      (e.g. SRUN_ARGS='--gpus-per-task=1 --mpi=none': a task that sees one GPU
                      uses it)
  --launcher=torchrun the same through torchrun: \$TORCHRUN (default torchrun) \$TORCHRUN_ARGS
                      --nproc_per_node=N --no-python dpbench ... (e.g. TORCHRUN_ARGS='--nnodes=2
                      --rdzv-endpoint=HOST:PORT' for several hosts)
  --dry-run           print every command (with its environment) and run nothing; a command
                      whose result is present is printed as "# present, would skip: COMMAND"
  --no-report         do not run \`dpbench report\` at the end
  --wait              when another sweep is running into DIR, wait for it to end instead of
                      exiting (see "One sweep per folder")
  -h, --help          this text
  -- FLAGS...         everything after -- goes to every dpbench run (e.g. --num_batches=50,
                      --device=cpu for the reference backend: then only --num_gpus picks devices)

Strategy tokens: BASE[+FLAG]...
  BASE is a strategy as \`dpbench strategies\` lists it (its "sweep token"): a name, or for a
  strategy with a main option NAME:VALUE, e.g.
  independent                      --variable_update=independent
  replicated:SPEC                  --variable_update=replicated --all_reduce_spec=SPEC (e.g. xring, nccl#2)
  parameter_server:DEVICE          --variable_update=parameter_server --local_parameter_device=DEVICE
  distributed_all_reduce           --variable_update=distributed_all_reduce (--launcher=mpirun, srun or torchrun)
                                   The sweep asks dpbench what a BASE stands for, so tokens and dpbench
                                   always agree; the strategies that run one process per GPU need
                                   a --launcher, those that run as one process refuse one, and
                                   those that run either way (fully_sharded) take it or not.
  BASE+--flag=value[+--flag2=...]  BASE plus raw dpbench flags for this strategy only, e.g.
                                   'replicated:nccl+--overlap_comm=false' (a value cannot hold + or ;)
  The file-name part of a token: ':' and '#' become '-', each '+--' becomes '+', other characters
  outside [A-Za-z0-9._=+-] become '-' (replicated:nccl+--overlap_comm=false ->
  replicated-nccl+overlap_comm=false). The flags that the sweep sets itself (--model, --num_gpus,
  --gpu_indices, --result_file, --variable_update, --all_reduce_spec, --local_parameter_device)
  are refused in tokens and after --; --device is refused in tokens (give it after --).

Re-running: a combination is skipped when its result is a complete JSON document (a "summary")
that belongs to the run the sweep recorded for it: before launching a run the sweep writes its
arguments to DIR/logs/NAME.args and a tag new for every launch to DIR/logs/NAME.tag, and hands the
tag to dpbench in DPBENCH_RUN_TAG, which writes it into the result as invocation.run_tag. A result
made with other arguments than this sweep's runs again ("made with other arguments"), as does a
partial or unreadable file, and a result whose invocation.run_tag is not the recorded tag ("result
not from the recorded run"): one left by a run that outlived an earlier sweep, and every result of
a dpbench too old to write an "invocation". A run that cannot start (a folder in the way of its
result) or fails keeps its log, appends "TIME exit=CODE COMMAND" (exit=none when it could not
start) to DIR/failures.txt and the sweep goes on. Finally
\`dpbench report DIR --output DIR/REPORT.md --plots DIR/plots\` runs (its output in
DIR/logs/report.log) and the last line counts the runs that ran (and succeeded), were skipped
and failed. Each run prints one progress line: "[3/12] resnet50 replicated:nccl 4 GPUs ... 1234.5
images/s (41 s)" (items_per_sec and unit read from its result).

One sweep per folder: a sweep (not a dry run) holds DIR/.sweep.lock (flock, util-linux) while it
runs and writes its pid, host, start time and command line into it. A second sweep into DIR says
which sweep holds it and exits 1, or with --wait waits for it. The runs inherit the lock: a run
left behind by a sweep that was killed keeps DIR locked until it ends. Once it holds the lock, a
sweep removes the temporary files (NAME.tmp.PID) that a dpbench killed while writing left in DIR,
when no process PID exists.

Stopping: SIGINT, SIGTERM or SIGHUP ends the progress line with "interrupted" and passes the
signal on to the running dpbench (its whole process group: the launcher and its local ranks too). On
SIGINT or SIGTERM dpbench stops after its current step and writes what it measured as a result
marked interrupted (summary.interrupted; reports skip it with a note); a second signal to the
sweep is passed on and stops it at once, and SIGKILL follows after 30 s. The sweep then says what
ran and what did not and exits 128 + the signal number; the same command run again resumes: it
skips the runs whose results are present and runs the interrupted one again. Every run gets
DPBENCH_END_WITH_PID=PID@HOST of the sweep in its environment (with mpirun also passed on by -x, as
is DPBENCH_RUN_TAG; neither is shown in the printed commands): dpbench on the sweep's host ends
itself, writing no result, soon after the sweep has ended, even when the sweep was killed by
SIGKILL (ranks on other hosts end with the job).

Exit status: 0 when every run succeeded or was skipped, 1 when a run failed or another sweep holds
DIR, 2 for a bad command line (nothing runs), 130, 143 or 129 when stopped by SIGINT, SIGTERM or
SIGHUP (or a run exited 130 or 143 itself). A report that cannot be generated is said in one line
and does not change the exit status.
EOF
}

die() {
  echo "$prog: error: $*" >&2
  exit 2
}

# A command word as the shell would need it: plain when it is made of safe characters only.
shell_word() {
  if [[ $1 =~ ^[A-Za-z0-9_./:=,+@%^-]+$ ]]; then
    printf '%s' "$1"
  else
    printf '%q' "$1"
  fi
}

render() {
  local out="" word
  for word in "$@"; do out+="${out:+ }$(shell_word "$word")"; done
  printf '%s' "$out"
}

# split SEPARATORS TEXT: the array fields holds TEXT's fields (all of TEXT, newlines included).
fields=()
split() {
  fields=()
  IFS=$1 read -r -d '' -a fields < <(printf '%s' "$2") || true
}

# ---- command line ------------------------------------------------------------------------------
sweep_command=$(render "$0" "$@")  # written into the folder's lock, for a second sweep to name
models_arg="" gpus_arg="" strategies_arg="" out_arg="" dpbench="" select=visible repeats=1
launcher=none dry_run=0 report=1 wait_for_lock=0 interleave=0 rounds=""
extra=()
have() { [ -n "${1-}" ]; }
while (($#)); do
  arg=$1
  shift
  case $arg in
    --) extra=("$@"); break ;;
    -h | --help) usage; exit 0 ;;
    --dry-run) dry_run=1; continue ;;
    --no-report) report=0; continue ;;
    --wait) wait_for_lock=1; continue ;;
    --*=*) name=${arg%%=*}; value=${arg#*=} ;;
    --models | --gpus | --strategies | --out | --dpbench | --select | --repeats | --rounds | --launcher)
      (($#)) || die "$arg needs a value (see --help)"
      name=$arg; value=$1; shift ;;
    *) die "unexpected argument '$arg' (dpbench flags go after --; see --help)" ;;
  esac
  case $name in
    --models) models_arg=$value ;;
    --gpus) gpus_arg=$value ;;
    --strategies) strategies_arg=$value ;;
    --out) out_arg=$value ;;
    --dpbench) dpbench=$value ;;
    --select) select=$value ;;
    --repeats) repeats=$value ;;
    --rounds) rounds=$value ;;
    --launcher) launcher=$value ;;
    *) die "unknown option '$arg' (see --help)" ;;
  esac
done

have "$models_arg" || die "--models is missing (e.g. --models=resnet50,nmt; see --help)"
have "$gpus_arg" || die "--gpus is missing (e.g. --gpus=1,2,4; see --help)"
have "$strategies_arg" || die "--strategies is missing (e.g. --strategies='independent;replicated:nccl'; see --help)"
have "$out_arg" || die "--out is missing (e.g. --out=results/; see --help)"
case $launcher in none | mpirun | srun | torchrun) ;; *) die "--launcher=$launcher: accepted: none, mpirun, srun, torchrun" ;; esac
[ "$launcher" = none ] || [ "$select" = visible ] ||
  die "--select=$select with --launcher=$launcher: each rank picks the GPU of its local rank; use --select=visible"
# The launcher's command and its own arguments (split on spaces).
launcher_cmd=() launcher_args=()
case $launcher in
  mpirun) launcher_cmd=("${MPIRUN:-mpirun}") && read -r -a launcher_args <<<"${MPIRUN_ARGS:-}" ;;
  srun) launcher_cmd=("${SRUN:-srun}") && read -r -a launcher_args <<<"${SRUN_ARGS:-}" ;;
  torchrun) launcher_cmd=("${TORCHRUN:-torchrun}") && read -r -a launcher_args <<<"${TORCHRUN_ARGS:-}" ;;
esac
case $select in visible | indices) ;; *) die "--select=$select: accepted: visible, indices" ;; esac
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats=$repeats: must be a positive integer"
if [ -n "$rounds" ]; then
  [[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds=$rounds: must be a positive integer"
  ((repeats == 1)) || die "--repeats=$repeats with --rounds=$rounds: give one of them (--rounds interleaves the repeats)"
  repeats=$rounds interleave=1
fi

out=$out_arg
while [[ $out == */ && $out != / ]]; do out=${out%/}; done
[[ $out == *[[:cntrl:]]* ]] &&
  die "--out=$(printf %q "$out_arg"): the folder name holds a newline or another control character; choose another name"
# A name that starts with '-' would read as an option to mkdir, find and dpbench report.
[[ $out == -* ]] && out=./$out
[ -n "$dpbench" ] || dpbench=$default_dpbench

split , "$models_arg"
models=("${fields[@]}")
seen=" "
for model in "${models[@]}"; do
  [[ $model =~ ^[A-Za-z0-9_.-]+$ ]] || die "--models: '$model' is not a model name (letters, digits, _ . -)"
  [[ $seen == *" $model "* ]] && die "--models: '$model' appears twice"
  seen+="$model "
done
((${#models[@]})) || die "--models names no model"

split , "$gpus_arg"
counts=("${fields[@]}")
seen=" "
max_count=0
for n in "${counts[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "--gpus: '$n' is not a positive integer"
  [[ $seen == *" $n "* ]] && die "--gpus: $n appears twice"
  seen+="$n "
  if ((n > max_count)); then max_count=$n; fi
done
((${#counts[@]})) || die "--gpus names no device count"

# The flags the sweep sets itself; refused in tokens and extra flags.
controlled=" --model --num_gpus --gpu_indices --result_file --variable_update --all_reduce_spec --local_parameter_device "

# Extra flags: the device they select (the last --device wins, as in dpbench).
device=auto
for ((i = 0; i < ${#extra[@]}; i++)); do
  flag=${extra[i]}
  name=${flag%%=*}
  [[ $controlled == *" $name "* ]] && die "$name after --: the sweep sets it itself (use --models, --gpus, --select or a strategy token)"
  if [ "$flag" = --device ] && ((i + 1 < ${#extra[@]})); then
    device=${extra[i + 1]}
  elif [[ $flag == --device=* ]]; then
    device=${flag#--device=}
  fi
done

# Strategy tokens -> flags: tokens, slugs (file-name parts) and token_flags (the flags of a token,
# one per line) are parallel arrays. What a token's BASE stands for, dpbench says (`dpbench
# strategies --sweep_token=BASE`: the process layout, then the flags, separated by tabs).
strategy_error() {
  die "strategy token '$1': $2 (\`$dpbench strategies\` lists the strategies and their tokens)"
}
base_flags() {  # BASE: sets layout and flags, or ends the sweep with dpbench's own line
  local line
  if ! line=$("$dpbench" strategies --sweep_token="$1" 2>&1); then
    line=${line%%$'\n'*}
    die "${line#dpbench: error: }"
  fi
  IFS=$'\t' read -r -a flags <<<"$line"
  layout=${flags[0]}
  flags=("${flags[@]:1}")
}
given_dpbench=$dpbench
if [[ $dpbench != */* ]]; then dpbench=$(command -v "$dpbench" || true); fi
if [ -z "$dpbench" ] || [ ! -x "$dpbench" ] || [ -d "$dpbench" ]; then
  die "dpbench is not an executable at '$given_dpbench' (build it, or give --dpbench=PATH)"
fi
tokens=() slugs=() token_flags=()
split $';\n' "$strategies_arg"
raw_tokens=("${fields[@]}")
for token in "${raw_tokens[@]}"; do
  token=${token#"${token%%[![:space:]]*}"}
  token=${token%"${token##*[![:space:]]}"}
  [ -n "$token" ] || continue
  base=${token%%+*}
  flags=() layout=""
  base_flags "$base"
  if [ "$layout" = one_process_per_gpu ] && [ "$launcher" = none ]; then
    strategy_error "$token" "'$base' runs one process per GPU; add --launcher=mpirun (or srun, torchrun)"
  fi
  if [ "$layout" = one_process ] && [ "$launcher" != none ]; then
    strategy_error "$token" "--launcher=$launcher starts one process per GPU, and '$base' runs as one process driving every device"
  fi
  slug=${base//[:#]/-}
  [[ $token == *+ ]] && strategy_error "$token" "a '+' with no flag after it"
  if [[ $token == *+* ]]; then
    split + "${token#*+}"
    raw_flags=("${fields[@]}")
    for flag in "${raw_flags[@]}"; do
      [[ $flag =~ ^--[a-z0-9_]+(=.*)?$ ]] || strategy_error "$token" "'$flag' is not a --flag or --flag=value"
      name=${flag%%=*}
      [[ $controlled == *" $name "* || $name == --device ]] && strategy_error "$token" "$name is set by the sweep or the strategy itself"
      flags+=("$flag")
      slug+="+${flag#--}"
    done
  fi
  slug=${slug//[^A-Za-z0-9._=+-]/-}
  for ((i = 0; i < ${#slugs[@]}; i++)); do
    [ "${slugs[i]}" = "$slug" ] && die "strategies '${tokens[i]}' and '$token' would both write results named '$slug'"
  done
  tokens+=("$token")
  slugs+=("$slug")
  token_flags+=("$(printf '%s\n' "${flags[@]}")")
done
((${#tokens[@]})) || die "--strategies names no strategy"

# GPU selection: the caller's CUDA_VISIBLE_DEVICES, when set, is the list the runs take from.
visible=()
if [ "$device" != cpu ] && [ "$select" = visible ] && [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  split , "$CUDA_VISIBLE_DEVICES"
  visible=("${fields[@]}")
  ((${#visible[@]} >= max_count)) ||
    die "--gpus asks for $max_count GPUs but CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES lists ${#visible[@]}"
fi


# ---- reading results ---------------------------------------------------------------------------
# SWEEP_JSON_TOOL (python3, jq or grep; default: the first one present) is for the tests.
json_tool=${SWEEP_JSON_TOOL:-}
if [ -z "$json_tool" ]; then
  if command -v python3 >/dev/null 2>&1; then json_tool=python3
  elif command -v jq >/dev/null 2>&1; then json_tool=jq
  else json_tool="grep"; fi
fi

# Prints "RATE UNIT RUN_TAG STATE" of a complete result (a JSON object with a "summary" object;
# RUN_TAG is invocation.run_tag, "-" when there is none; STATE is "interrupted" for a run stopped
# early, whose summary.interrupted is true, else "complete"); fails otherwise.
read_result() {
  [ -f "$1" ] && [ -s "$1" ] || return 1
  case $json_tool in
    python3)
      python3 - "$1" <<'PY'
import json, sys
try:
    with open(sys.argv[1]) as f:
        doc = json.load(f)
except (OSError, ValueError):
    sys.exit(1)
summary = doc.get("summary") if isinstance(doc, dict) else None
if not isinstance(summary, dict):
    sys.exit(1)
rate, unit = summary.get("items_per_sec"), summary.get("unit")
ok = isinstance(rate, (int, float)) and not isinstance(rate, bool)
invocation = doc.get("invocation")
tag = invocation.get("run_tag") if isinstance(invocation, dict) else None
print(rate if ok else "?", unit if isinstance(unit, str) and unit and " " not in unit else "items/s",
      tag if isinstance(tag, str) and tag and not any(c.isspace() for c in tag) else "-",
      "interrupted" if summary.get("interrupted") is True else "complete")
PY
      ;;
    jq)
      jq -r 'if type == "object" and (.summary | type) == "object"
             then "\(.summary.items_per_sec | if type == "number" then . else "?" end) \(.summary.unit // "items/s") \(
                   .invocation | if type == "object" then .run_tag else null end
                   | if type == "string" and test("^\\S+$") then . else "-" end) \(
                   if .summary.interrupted == true then "interrupted" else "complete" end)"
             else error("no summary") end' "$1" 2>/dev/null
      ;;
    grep)
      # No JSON parser: complete means a "summary" key and a last non-blank character '}'.
      grep -q '"summary"' "$1" && [ "$(tr -d '[:space:]' <"$1" | tail -c 1)" = "}" ] || return 1
      local rate unit tag state=complete
      rate=$(grep -o '"items_per_sec": *[-0-9.eE+]*' "$1" | head -n 1 | sed 's/.*: *//')
      unit=$(grep -o '"unit": *"[^" ]*"' "$1" | head -n 1 | sed 's/.*: *"//; s/"$//')
      tag=$(grep -o '"run_tag": *"[^"[:space:]]*"' "$1" | head -n 1 | sed 's/.*: *"//; s/"$//')
      if grep -q '"interrupted": *true' "$1"; then state=interrupted; fi
      echo "${rate:-?} ${unit:-items/s} ${tag:--} $state"
      ;;
    *) echo "$prog: SWEEP_JSON_TOOL=$json_tool: accepted: python3, jq, grep" >&2; return 1 ;;
  esac
}

# Sets present ("RATE UNIT" of a result that stands for this run: skip it) or stale (why a result
# that is there runs again) for $result, $args_file, $tag_file and $args_line.
judge_result() {
  present="" stale=""
  local found rate unit tag state
  if ! found=$(read_result "$result"); then
    if [ -f "$result" ]; then stale="incomplete result file"; fi
    return 0
  fi
  read -r rate unit tag state <<<"$found"
  if [ "$state" = interrupted ]; then
    stale="the result of an interrupted run"
  elif [ -f "$args_file" ] && [ "$(cat "$args_file")" != "$args_line" ]; then
    stale="made with other arguments, see $args_file"
  elif [ ! -f "$args_file" ] || [ ! -f "$tag_file" ] || [ "$tag" != "$(cat "$tag_file")" ]; then
    stale="result not from the recorded run"
  else
    present="$rate $unit"
  fi
}

# "1234.5 images/s" from "RATE UNIT".
format_rate() {
  local rate=${1%% *} unit=${1#* }
  if [[ $rate =~ ^[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]]; then
    LC_ALL=C printf '%.1f %s' "$rate" "$unit"
  else
    printf '? %s' "$unit"
  fi
}

# "1 run", "2 runs".
count() { if (($1 == 1)); then printf '1 %s' "$2"; else printf '%d %ss' "$1" "$2"; fi; }

# ---- running a child, and stopping it -----------------------------------------------------------
# Note [children end with the sweep]: each child (dpbench, mpirun, the report, flock) runs in its
# own process group (set -m), waited for with `wait`, which a trapped signal interrupts (a
# foreground child would hold the trap back until it ended). A terminal's Ctrl-C reaches the
# sweep only; the trap passes the signal on to the child's whole group (mpirun's local ranks too)
# and waits for it. A background child without job control would ignore SIGINT: set -m avoids
# that as well. For SIGKILL, which no trap sees, dpbench watches DPBENCH_END_WITH_PID itself.
child="" line_open=0 rc=0 run_running=0

# run_child LOG COMMAND...: runs COMMAND (stdin /dev/null, output to LOG), its exit status in rc.
run_child() {
  local log=$1
  shift
  set -m
  "$@" </dev/null >"$log" 2>&1 &
  child=$!
  set +m
  rc=0
  wait "$child" || rc=$?
  child=""
}

# Whether no process PID exists: kill -0 also fails for another user's process, which does.
process_gone() {
  local why
  why=$( (LC_ALL=C; kill -0 "$1") 2>&1) && return 1
  [[ $why == *"No such process"* ]]
}

# stop_child SIGNAL: sends SIGNAL to the running child's process group, SIGKILL after 30 s, and
# waits (at most 5 s more) until the group is gone. On SIGINT or SIGTERM dpbench stops after its
# current step and keeps what it measured (the 30 s are for that); a second signal to the sweep
# meanwhile is passed on and ends it at once.
stop_grace_tenths=300
stop_child() {
  [ -n "$child" ] || return 0
  kill -s "$1" -- "-$child" 2>/dev/null || true
  local tenths=0
  while kill -0 -- "-$child" 2>/dev/null && ((tenths < stop_grace_tenths + 50)); do
    ((++tenths != stop_grace_tenths)) || kill -s KILL -- "-$child" 2>/dev/null || true
    sleep 0.1
  done
}

# pass_on SIGNAL: a second signal while the child stops: it ends at once.
pass_on() {
  [ -z "$child" ] || kill -s "$1" -- "-$child" 2>/dev/null || true
}

# Says what ran and what did not, and how to go on, once the sweep is stopped: the run that was
# stopped keeps its partial result (marked interrupted) when dpbench could write one, and a
# rerun of the same command runs it again and those after it, skipping the rest.
say_stopped() {
  local not_run=$((total - ran - skipped - failed)) kept="" found
  if ((run_running)) && found=$(read_result "$result") && [ "${found##* }" = interrupted ]; then
    kept=" (the interrupted one kept its partial result, marked interrupted, in $result)"
  fi
  echo "$prog: stopped after $ran ran, $skipped skipped, $failed failed of $total; not run: $not_run$kept;" \
    "run the same command again to resume" >&2 || true
}

# on_signal SIGNAL EXIT_CODE: ends the running child and the sweep.
on_signal() {
  trap 'pass_on INT' INT
  trap 'pass_on TERM' TERM
  trap 'pass_on HUP' HUP
  trap '' PIPE
  if ((line_open)); then finish_line "interrupted" || true; fi
  if ((run_running)) && [ "$1" != HUP ]; then
    echo "$prog: SIG$1: dpbench stops after its current step and keeps what it measured (SIG$1 again stops it at once)" >&2 || true
  fi
  stop_child "$1"
  say_stopped
  exit "$2"
}

# Ends a progress line.
finish_line() {
  echo "$*"
  line_open=0
}

# ---- the output folder -------------------------------------------------------------------------
lock_file=$out/.sweep.lock

# A value read from a file, fit for the terminal: control characters (an escape sequence that
# would clear the screen, a newline) shown as '?'.
printable() {
  local value=${1//[[:cntrl:]]/?}
  printf '%s' "$value"
}

# Who holds the folder's lock, from what the holder wrote into it.
lock_holder() {
  local key value pid="" host="" started="" command=""
  while IFS='=' read -r key value; do
    case $key in
      pid) pid=$value ;; host) host=$value ;; started) started=$value ;; command) command=$value ;;
    esac
  done <"$lock_file" 2>/dev/null || true
  pid=$(printable "$pid") host=$(printable "$host") started=$(printable "$started") command=$(printable "$command")
  if [ -z "$pid" ]; then
    printf 'another sweep is running into %s' "$out"
  elif [ "$host" = "$HOSTNAME" ] && process_gone "$pid"; then
    printf 'a run left behind by a sweep that has ended (pid %s on %s, started %s: %s) is still running into %s' \
      "$pid" "$host" "$started" "$command" "$out"
  else
    printf 'another sweep (pid %s on %s, started %s: %s) is running into %s' "$pid" "$host" "$started" "$command" "$out"
  fi
}

# Takes the folder's lock (see "One sweep per folder" in --help), or says who holds it. Its file
# descriptor stays open in every child, so the lock lasts as long as the last of them.
take_lock() {
  command -v flock >/dev/null 2>&1 || die "flock (util-linux) is missing; the sweep locks $out with it"
  # Opened without truncation: the holder's details must survive until it has the lock.
  exec {lock_fd}<>"$lock_file" || die "cannot open $lock_file"
  rc=0
  flock -n "$lock_fd" || rc=$?
  if ((rc != 0)); then
    ((rc == 1)) || die "cannot lock $lock_file (flock exited $rc)"  # 1: held by another
    if ((!wait_for_lock)); then
      echo "$prog: $(lock_holder); wait for it or pass --wait" >&2
      exit 1
    fi
    echo "$prog: $(lock_holder); waiting for it (--wait)"
    run_child /dev/null flock "$lock_fd"
    ((rc == 0)) || die "cannot lock $lock_file (flock exited $rc)"
  fi
  printf 'pid=%s\nhost=%s\nstarted=%s\ncommand=%s\n' "$$" "$HOSTNAME" "$(date '+%Y-%m-%dT%H:%M:%S%z')" \
    "$sweep_command" >"$lock_file"
}

# Removes DIR's NAME.tmp.PID files of processes that no longer exist: dpbench writes a result to
# such a name and renames it, so one killed in between leaves it behind. Under the lock no run of
# ours can be writing one.
remove_stale_temporaries() {
  local path removed=0
  while IFS= read -r -d '' path; do
    if [[ $path =~ \.tmp\.([0-9]+)$ ]] && process_gone "${BASH_REMATCH[1]}" && rm -f -- "$path"; then
      removed=$((removed + 1))
    fi
  done < <(find "$out" -mindepth 1 -maxdepth 1 -type f -name '*.tmp.[0-9]*' -print0)
  ((removed == 0)) ||
    echo "$prog: removed $(count "$removed" "stale temporary file") left in $out by dpbench runs that have ended"
}

# Clears the way for a run and records it before it starts: removes the old result, writes the
# arguments and the tag, empties the log. Prints why not when it cannot.
prepare_run() {
  local why
  why=$({ rm -f -- "$result" && printf '%s\n' "$args_line" >"$args_file" && printf '%s\n' "$tag" >"$tag_file" &&
    : >"$log"; } 2>&1) && return 0
  # "sweep.sh: line 9: PATH: Is a directory" -> "PATH: Is a directory"
  printf '%s' "$why" | sed 's/^[^:]*: line [0-9]*: //' | head -n 1
  return 1
}

# Runs the current combination and ends its progress line: records it, launches it, checks that
# the result is its own, counts it; a failure goes to failures.txt.
launch_run() {
  local started=$SECONDS why="" found rate unit found_tag last outcome
  tag="$$-$(date +%s%N)-$index"  # new for every launch: a result names the launch that made it
  if why=$(prepare_run); then
    run_running=1
    run_child "$log" env DPBENCH_RUN_TAG="$tag" "${env_words[@]}" "${run_launch[@]}" "${args[@]}"
    if ((rc == 130 || rc == 143)); then
      finish_line "interrupted (exit $rc)"
      say_stopped
      exit "$rc"
    fi
    run_running=0
    if ((rc == 0)); then
      if found=$(read_result "$result"); then
        read -r rate unit found_tag _ <<<"$found"
        # A result without a tag comes from a dpbench that predates DPBENCH_RUN_TAG.
        if [ "$found_tag" = "$tag" ] || [ "$found_tag" = - ]; then
          ran=$((ran + 1))
          finish_line "$(format_rate "$rate $unit") ($((SECONDS - started)) s)"
          return 0
        fi
        why="its result is another launch's (run_tag $found_tag, expected $tag)"
      else
        why="exit 0 but no complete result in $result"
      fi
    fi
    last=$(printable "$(grep -v '^[[:space:]]*$' "$log" 2>/dev/null | tail -n 1 | cut -c 1-200 || true)")
    outcome="FAILED (exit $rc${why:+: $why}): ${last:-no output} (log: $log)"
  else
    rc=none
    echo "$prog: not run: $why" 2>/dev/null >"$log" || true
    outcome="FAILED (not run): $why"
  fi
  failed=$((failed + 1))
  finish_line "$outcome"
  require_output_folder "$index"  # a run that failed because the folder went away ends the sweep
  { echo "$(date '+%Y-%m-%dT%H:%M:%S%z') exit=$rc $command_line" >>"$out/failures.txt"; } 2>/dev/null ||
    echo "$prog: cannot append to $out/failures.txt" >&2
}

# require_output_folder DONE: before each run, and after a failed one, the folder must still be
# there and writable. One removed or made read-only mid-sweep ends the sweep with one line (DONE
# runs done), rather than one raw error for every run left.
require_output_folder() {
  local probe=$out/logs/.sweep.probe.$$
  if { : >"$probe" && rm -f -- "$probe"; } 2>/dev/null; then return 0; fi
  local why="no longer writable"
  [ -d "$out/logs" ] || why="gone"
  echo "$prog: error: the output folder $(printable "$out")/logs is $why (removed or changed during the sweep);" \
    "stopping after $1 of $total runs" >&2
  exit 1
}

# ---- the sweep ---------------------------------------------------------------------------------
total=$((${#models[@]} * ${#counts[@]} * ${#tokens[@]} * repeats))
index=0 ran=0 skipped=0 failed=0 would_skip=0
if ((!dry_run)); then
  trap 'on_signal INT 130' INT
  trap 'on_signal TERM 143' TERM
  trap 'on_signal HUP 129' HUP
  why=$(mkdir -p -- "$out/logs" 2>&1) || die "cannot create $(printable "$out")/logs: ${why##*: }"
  take_lock
  remove_stale_temporaries
  # Every child ends itself soon after the sweep has ended, even by SIGKILL (Note [children end
  # with the sweep]); each run also gets DPBENCH_RUN_TAG (its own).
  DPBENCH_END_WITH_PID=$$@$(hostname)
  export DPBENCH_END_WITH_PID
  unset DPBENCH_RUN_TAG
fi

# One combination: MODEL, device count N, strategy token index S, repeat R. Sets the globals that
# judge_result and launch_run read (name, result, args, ...).
sweep_combination() {
  local model=$1 n=$2 s=$3 r=$4 k list unit_word
  env_words=()
  select_flags=()
  if [ "$device" = cpu ]; then
    unit_word=device
  else
    unit_word=GPU
    ids=()
    for ((k = 0; k < n; k++)); do
      if ((${#visible[@]})); then ids+=("${visible[k]}"); else ids+=("$k"); fi
    done
    list=$(IFS=,; echo "${ids[*]}")
    if [ "$select" = visible ]; then
      env_words=("CUDA_VISIBLE_DEVICES=$list")
    else
      select_flags=(--gpu_indices="$list")
    fi
  fi
  ((n == 1)) || unit_word+=s
  mapfile -t flags <<<"${token_flags[s]}"
  index=$((index + 1))
  name="${model}__${slugs[s]}__${n}gpu"
  label="$model ${tokens[s]} $n $unit_word"
  if ((repeats > 1)); then
    name+="__r$r"
    label+=" r$r"
  fi
  result=$out/$name.json
  if [ "$launcher" != none ]; then
    # One GPU per rank: the rank count is the device count. mpirun is given the sweep's own
    # variables explicitly (-x), as it need not pass its environment to the ranks; srun and
    # torchrun pass theirs.
    args=(--model="$model" "${flags[@]}" "${extra[@]}")
    case $launcher in
      mpirun)
        launch=("${launcher_cmd[@]}" "${launcher_args[@]}" -np "$n" "$dpbench")
        run_launch=("${launcher_cmd[@]}" "${launcher_args[@]}" -x DPBENCH_END_WITH_PID -x DPBENCH_RUN_TAG -np "$n" "$dpbench") ;;
      srun)
        launch=("${launcher_cmd[@]}" "${launcher_args[@]}" -n "$n" "$dpbench")
        run_launch=("${launch[@]}") ;;
      torchrun)
        launch=("${launcher_cmd[@]}" "${launcher_args[@]}" --nproc_per_node="$n" --no-python "$dpbench")
        run_launch=("${launch[@]}") ;;
    esac
  else
    args=(--model="$model" --num_gpus="$n" "${select_flags[@]}" "${flags[@]}" "${extra[@]}")
    launch=("$dpbench")
    run_launch=("$dpbench")
  fi
  args_line=$(render "${env_words[@]}" "${launch[@]:0:${#launch[@]}-1}" "${args[@]}")  # what made the result
  args+=(--result_file="$result")
  command_line=$(render "${env_words[@]}" "${launch[@]}" "${args[@]}")
  args_file=$out/logs/$name.args
  tag_file=$out/logs/$name.tag
  log=$out/logs/$name.log
  judge_result

  if ((dry_run)); then
    if [ -n "$present" ]; then
      would_skip=$((would_skip + 1))
      echo "# present, would skip: $command_line"
    else
      echo "$command_line"
    fi
    return 0
  fi

  require_output_folder $((index - 1))
  printf '[%d/%d] %s ... ' "$index" "$total" "$label"
  line_open=1
  if [ -n "$present" ]; then
    skipped=$((skipped + 1))
    finish_line "skipped, result present ($(format_rate "$present"))"
    return 0
  fi
  [ -n "$stale" ] && printf 're-running (%s) ... ' "$stale"
  launch_run
}

# --repeats=K runs a combination's repeats back to back; --rounds=K goes round-robin over every
# combination K times, so a machine's slow drift (clocks, temperature) falls on all of them alike.
if ((interleave)); then
  for ((r = 1; r <= repeats; r++)); do
    for model in "${models[@]}"; do
      for n in "${counts[@]}"; do
        for ((s = 0; s < ${#tokens[@]}; s++)); do sweep_combination "$model" "$n" "$s" "$r"; done
      done
    done
  done
else
  for model in "${models[@]}"; do
    for n in "${counts[@]}"; do
      for ((s = 0; s < ${#tokens[@]}; s++)); do
        for ((r = 1; r <= repeats; r++)); do sweep_combination "$model" "$n" "$s" "$r"; done
      done
    done
  done
fi

report_cmd=("$dpbench" report "$out" --output "$out/REPORT.md" --plots "$out/plots")
if ((dry_run)); then
  if ((report)); then render "${report_cmd[@]}"; echo; fi
  echo "$prog (dry run): $(count "$total" run), $would_skip with a result present (would be skipped); nothing was run"
  exit 0
fi

if ((report)); then
  run_child "$out/logs/report.log" "${report_cmd[@]}"
  if ((rc == 0)); then
    echo "$prog: report written to $out/REPORT.md, plots to $out/plots"
  else
    why=$(grep -v '^[[:space:]]*$' "$out/logs/report.log" | tail -n 1 | cut -c 1-300 || true)
    echo "$prog: the report could not be generated: dpbench report exited $rc: ${why:-no output} (log: $out/logs/report.log)"
  fi
fi

summary="$prog: $(count "$total" run): $ran ran, $skipped skipped (result present), $failed failed"
((failed)) && summary+=" (see $out/failures.txt)"
echo "$summary"
((failed == 0)) || exit 1
