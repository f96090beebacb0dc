#!/usr/bin/env bash
# Sweeps dpbench over models x device counts x synchronisation strategies (x repeats): one run and
# one self-named JSON result per combination in one output folder, failures recorded and skipped
# over, results already present not run again, and `dpbench report` regenerated at the end.
# `scripts/sweep.sh --help` says how; README.md ("Sweeps") has examples.
set -euo pipefail

prog=sweep.sh
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
  cat <<EOF
Usage: scripts/sweep.sh --models=M1,M2 --gpus=N1,N2 --strategies='S1;S2' --out=DIR [options] [-- DPBENCH_FLAGS...]

Runs dpbench once per model x device count x strategy x repeat, each writing its JSON result to
DIR/MODEL__STRATEGY__Ngpu.json (NAME__rK.json with --repeats=K>1), its output to DIR/logs/NAME.log.

Required:
  --models=LIST       comma-separated dpbench models, e.g. resnet50,nmt
  --gpus=LIST         comma-separated device counts, e.g. 1,2,4
  --strategies=LIST   strategy tokens separated by ';' or newlines (quote the list), e.g.
                      'independent;parameter_server:gpu;replicated:nccl'
  --out=DIR           output folder (created if missing)

Options:
  --dpbench=PATH      dpbench executable (default: $repo_root/build/dpbench)
  --select=visible    (default) choose the GPUs of an N-GPU run with CUDA_VISIBLE_DEVICES: the first
                      N entries of the caller's CUDA_VISIBLE_DEVICES when it is set, else 0,...,N-1
  --select=indices    choose them with --gpu_indices=0,...,N-1 instead (environment untouched)
  --repeats=K         run every combination K times (default 1); names get __r1 ... __rK
  --launcher=none     run dpbench directly, one process driving all N devices (default)
  --launcher=mpirun   run N processes, one per GPU: \$MPIRUN (default mpirun) -np N dpbench ...;
                      for the distributed strategies only (each rank drives the GPU of its
                      host-local rank; with --select=visible the job's CUDA_VISIBLE_DEVICES).
                      Flags for mpirun itself (hosts, -x VAR) go in \$MPIRUN_ARGS (split on spaces)
  --dry-run           print every command (with its environment) and run nothing; a command
                      whose result is present is printed as "# present, would skip: COMMAND"
  --no-report         do not run \`dpbench report\` at the end
  -h, --help          this text
  -- FLAGS...         everything after -- goes to every dpbench run (e.g. --num_batches=50,
                      --device=cpu for the reference backend: then only --num_gpus picks devices)

Strategy tokens: BASE[+FLAG]...
  independent                      --variable_update=independent
  replicated                       --variable_update=replicated (dpbench's default spec, nccl)
  replicated:SPEC                  --variable_update=replicated --all_reduce_spec=SPEC
                                   SPEC: nccl, xring, pscpu, psgpu, optionally #k (e.g. nccl#2)
  parameter_server                 --variable_update=parameter_server (dpbench's default device, gpu)
  parameter_server:DEV             --variable_update=parameter_server --local_parameter_device=DEV
                                   DEV: gpu, cpu
  distributed_all_reduce, horovod  --variable_update=distributed_all_reduce (--launcher=mpirun)
  distributed_replicated           --variable_update=distributed_replicated (--launcher=mpirun)
  BASE+--flag=value[+--flag2=...]  BASE plus raw dpbench flags for this strategy only, e.g.
                                   'replicated:nccl+--overlap_comm=false' (a value cannot hold + or ;)
  The file-name part of a token: ':' and '#' become '-', each '+--' becomes '+', other characters
  outside [A-Za-z0-9._=+-] become '-' (replicated:nccl+--overlap_comm=false ->
  replicated-nccl+overlap_comm=false). The flags that the sweep sets itself (--model, --num_gpus,
  --gpu_indices, --result_file, --variable_update, --all_reduce_spec, --local_parameter_device)
  are refused in tokens and after --; --device is refused in tokens (give it after --).

Re-running: a combination whose result file is a complete JSON document with a "summary" is
skipped, unless DIR/logs/NAME.args (the arguments that made it) differs from this sweep's: then it
is stale and runs again, as does a partial or unreadable file. A failed run keeps its log, appends
"TIME exit=CODE COMMAND" to DIR/failures.txt and the sweep goes on. Finally
\`dpbench report DIR --output DIR/REPORT.md --plots DIR/plots\` runs (its output in
DIR/logs/report.log) and the last line counts the runs that ran (and succeeded), were skipped
and failed. Each run prints one progress line: "[3/12] resnet50 replicated:nccl 4 GPUs ... 1234.5
images/s (41 s)" (items_per_sec and unit read from its result).

Exit status: 0 when every run succeeded or was skipped, 1 when a run failed, 2 for a bad command
line (nothing runs), 130 when interrupted. A report that cannot be generated is said in one line
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
models_arg="" gpus_arg="" strategies_arg="" out_arg="" dpbench="" select=visible repeats=1
launcher=none dry_run=0 report=1
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
    --*=*) name=${arg%%=*}; value=${arg#*=} ;;
    --models | --gpus | --strategies | --out | --dpbench | --select | --repeats | --launcher)
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
    --launcher) launcher=$value ;;
    *) die "unknown option '$arg' (see --help)" ;;
  esac
done

have "$models_arg" || die "--models is missing (e.g. --models=resnet50,nmt; see --help)"
have "$gpus_arg" || die "--gpus is missing (e.g. --gpus=1,2,4; see --help)"
have "$strategies_arg" || die "--strategies is missing (e.g. --strategies='independent;replicated:nccl'; see --help)"
have "$out_arg" || die "--out is missing (e.g. --out=results/; see --help)"
case $launcher in none | mpirun) ;; *) die "--launcher=$launcher: accepted: none, mpirun" ;; esac
[ "$launcher" = none ] || [ "$select" = visible ] ||
  die "--select=$select with --launcher=mpirun: each rank picks the GPU of its local rank; use --select=visible"
mpirun_cmd=${MPIRUN:-mpirun}
mpirun_args=()
if [ -n "${MPIRUN_ARGS:-}" ]; then read -r -a mpirun_args <<<"$MPIRUN_ARGS"; fi
case $select in visible | indices) ;; *) die "--select=$select: accepted: visible, indices" ;; esac
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats=$repeats: must be a positive integer"

out=$out_arg
while [[ $out == */ && $out != / ]]; do out=${out%/}; done
[ -n "$dpbench" ] || dpbench=$repo_root/build/dpbench

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
# one per line) are parallel arrays.
strategy_error() {
  die "strategy token '$1': $2 (accepted: independent, replicated[:nccl|xring|pscpu|psgpu[#k]], parameter_server[:gpu|cpu], distributed_all_reduce, horovod, distributed_replicated (--launcher=mpirun), each optionally followed by +--flag=value ...)"
}
tokens=() slugs=() token_flags=()
split $';\n' "$strategies_arg"
raw_tokens=("${fields[@]}")
for token in "${raw_tokens[@]}"; do
  token=${token#"${token%%[![:space:]]*}"}
  token=${token%"${token##*[![:space:]]}"}
  [ -n "$token" ] || continue
  base=${token%%+*}
  flags=()
  case $base in
    independent) flags=(--variable_update=independent) ;;
    replicated) flags=(--variable_update=replicated) ;;
    replicated:*)
      spec=${base#replicated:}
      [[ $spec =~ ^(nccl|xring|pscpu|psgpu)(#[1-9][0-9]*)?$ ]] || strategy_error "$token" "'$spec' is not an all-reduce spec"
      flags=(--variable_update=replicated --all_reduce_spec="$spec") ;;
    parameter_server) flags=(--variable_update=parameter_server) ;;
    parameter_server:*)
      where=${base#parameter_server:}
      [[ $where =~ ^(gpu|cpu)$ ]] || strategy_error "$token" "'$where' is not a parameter device"
      flags=(--variable_update=parameter_server --local_parameter_device="$where") ;;
    distributed_all_reduce | horovod | distributed_replicated)
      [ "$launcher" = mpirun ] || strategy_error "$token" "'$base' runs one process per GPU; add --launcher=mpirun"
      flags=(--variable_update="$base") ;;
    *) strategy_error "$token" "unknown strategy '$base'" ;;
  esac
  if [ "$launcher" = mpirun ] && [[ $base != distributed_* && $base != horovod ]]; then
    strategy_error "$token" "--launcher=mpirun starts one process per GPU, which only distributed_all_reduce, horovod and distributed_replicated use"
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

if ((!dry_run)); then
  given_dpbench=$dpbench
  if [[ $dpbench != */* ]]; then dpbench=$(command -v "$dpbench" || true); fi
  if [ -z "$dpbench" ] || [ ! -x "$dpbench" ] || [ -d "$dpbench" ]; then
    die "dpbench is not an executable at '$given_dpbench' (build it, or give --dpbench=PATH)"
  fi
fi

# ---- reading results ---------------------------------------------------------------------------
# SWEEP_JSON_TOOL (python3, jq or grep; default: the first one present) is for the tests.
json_tool=${SWEEP_JSON_TOOL:-}
if [ -z "$json_tool" ]; then
  if command -v python3 >/dev/null 2>&1; then json_tool=python3
  elif command -v jq >/dev/null 2>&1; then json_tool=jq
  else json_tool="grep"; fi
fi

# Prints "RATE UNIT" of a complete result (a JSON object with a "summary" object); fails otherwise.
read_result() {
  [ -s "$1" ] || return 1
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
print(rate if ok else "?", unit if isinstance(unit, str) and unit and " " not in unit else "items/s")
PY
      ;;
    jq)
      jq -r 'if type == "object" and (.summary | type) == "object"
             then "\(.summary.items_per_sec | if type == "number" then . else "?" end) \(.summary.unit // "items/s")"
             else error("no summary") end' "$1" 2>/dev/null
      ;;
    grep)
      # No JSON parser: complete means a "summary" key and a last non-blank character '}'.
      grep -q '"summary"' "$1" && [ "$(tr -d '[:space:]' <"$1" | tail -c 1)" = "}" ] || return 1
      local rate unit
      rate=$(grep -o '"items_per_sec": *[-0-9.eE+]*' "$1" | head -n 1 | sed 's/.*: *//')
      unit=$(grep -o '"unit": *"[^" ]*"' "$1" | head -n 1 | sed 's/.*: *"//; s/"$//')
      echo "${rate:-?} ${unit:-items/s}"
      ;;
    *) echo "$prog: SWEEP_JSON_TOOL=$json_tool: accepted: python3, jq, grep" >&2; return 1 ;;
  esac
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

# ---- the sweep ---------------------------------------------------------------------------------
total=$((${#models[@]} * ${#counts[@]} * ${#tokens[@]} * repeats))
if ((!dry_run)); then
  mkdir -p "$out/logs" || die "cannot create $out/logs"
fi

index=0 ran=0 skipped=0 failed=0 would_skip=0
for model in "${models[@]}"; do
  for n in "${counts[@]}"; do
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
    for ((s = 0; s < ${#tokens[@]}; s++)); do
      mapfile -t flags <<<"${token_flags[s]}"
      for ((r = 1; r <= repeats; r++)); do
        index=$((index + 1))
        name="${model}__${slugs[s]}__${n}gpu"
        label="$model ${tokens[s]} $n $unit_word"
        if ((repeats > 1)); then
          name+="__r$r"
          label+=" r$r"
        fi
        result=$out/$name.json
        if [ "$launcher" = mpirun ]; then
          # One GPU per rank: the rank count is the device count.
          args=(--model="$model" "${flags[@]}" "${extra[@]}")
          launch=("$mpirun_cmd" "${mpirun_args[@]}" -np "$n" "$dpbench")
        else
          args=(--model="$model" --num_gpus="$n" "${select_flags[@]}" "${flags[@]}" "${extra[@]}")
          launch=("$dpbench")
        fi
        args_line=$(render "${env_words[@]}" "${launch[@]:0:${#launch[@]}-1}" "${args[@]}")  # what made the result
        args+=(--result_file="$result")
        command_line=$(render "${env_words[@]}" "${launch[@]}" "${args[@]}")
        args_file=$out/logs/$name.args
        log=$out/logs/$name.log

        present=""
        stale=""
        if present=$(read_result "$result"); then
          if [ -f "$args_file" ] && [ "$(cat "$args_file")" != "$args_line" ]; then
            stale="made with other arguments, see $args_file"
            present=""
          fi
        else
          present=""
          if [ -e "$result" ]; then stale="incomplete result file"; fi
        fi

        if ((dry_run)); then
          if [ -n "$present" ]; then
            would_skip=$((would_skip + 1))
            echo "# present, would skip: $command_line"
          else
            echo "$command_line"
          fi
          continue
        fi

        printf '[%d/%d] %s ... ' "$index" "$total" "$label"
        if [ -n "$present" ]; then
          skipped=$((skipped + 1))
          echo "skipped, result present ($(format_rate "$present"))"
          continue
        fi
        [ -n "$stale" ] && printf 're-running (%s) ... ' "$stale"
        rm -f "$result" "$args_file"
        started=$SECONDS
        rc=0
        if ((${#env_words[@]})); then
          env "${env_words[@]}" "${launch[@]}" "${args[@]}" </dev/null >"$log" 2>&1 || rc=$?
        else
          "${launch[@]}" "${args[@]}" </dev/null >"$log" 2>&1 || rc=$?
        fi
        if ((rc == 130 || rc == 143)); then
          echo "interrupted (exit $rc)"
          echo "$prog: stopped after $ran ran, $skipped skipped, $failed failed of $total" >&2
          exit 130
        fi
        why=""
        if ((rc == 0)); then
          if present=$(read_result "$result"); then
            ran=$((ran + 1))
            printf '%s\n' "$args_line" >"$args_file"
            echo "$(format_rate "$present") ($((SECONDS - started)) s)"
            continue
          fi
          why="exit 0 but no complete result in $result"
        fi
        failed=$((failed + 1))
        last=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c 1-200 || true)
        echo "FAILED (exit $rc${why:+: $why}): ${last:-no output} (log: $log)"
        echo "$(date '+%Y-%m-%dT%H:%M:%S%z') exit=$rc $command_line" >>"$out/failures.txt"
      done
    done
  done
done

report_cmd=("$dpbench" report "$out" --output "$out/REPORT.md" --plots "$out/plots")
if ((dry_run)); then
  if ((report)); then render "${report_cmd[@]}"; echo; fi
  echo "$prog (dry run): $(count "$total" run), $would_skip with a result present (would be skipped); nothing was run"
  exit 0
fi

if ((report)); then
  report_rc=0
  "${report_cmd[@]}" </dev/null >"$out/logs/report.log" 2>&1 || report_rc=$?
  if ((report_rc == 0)); then
    echo "$prog: report written to $out/REPORT.md, plots to $out/plots"
  else
    why=$(grep -v '^[[:space:]]*$' "$out/logs/report.log" | tail -n 1 | cut -c 1-300 || true)
    echo "$prog: the report could not be generated: dpbench report exited $report_rc: ${why:-no output} (log: $out/logs/report.log)"
  fi
fi

summary="$prog: $(count "$total" run): $ran ran, $skipped skipped (result present), $failed failed"
((failed)) && summary+=" (see $out/failures.txt)"
echo "$summary"
((failed == 0)) || exit 1
