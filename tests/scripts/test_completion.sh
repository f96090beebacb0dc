#!/usr/bin/env bash
# What `dpbench completion bash` completes, asked the way bash asks it (COMP_WORDS split at '=',
# as bash's default COMP_WORDBREAKS splits them): subcommands, flags with their '=', enumerated
# values after '=' and as the next word, paths, a list flag's values, nothing after a boolean; its
# errors; and, where zsh is installed, the same script through zsh's bashcompinit. What the
# script lists is checked against the flag tables by the host tests ("[completion]").
# Usage: test_completion.sh DPBENCH
set -uo pipefail
dpbench=${1:?usage: test_completion.sh DPBENCH}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/scripts/result_checks.sh
source "$(dirname "$0")/result_checks.sh"

"$dpbench" completion bash >"$work/dpbench.bash" || fail "dpbench completion bash failed"
"$dpbench" completion zsh >"$work/dpbench.zsh" || fail "dpbench completion zsh failed"
bash -n "$work/dpbench.bash" || fail "the bash script does not parse"
mkdir -p "$work/files/results" && : >"$work/files/results.json"

# complete WORD...: the replies (sorted, one line) and the compopt options asked for, as bash
# would ask for the last WORD; compopt stands in for the builtin, which works only inside a
# completion that bash itself started.
complete_words() {
  bash -c '
    source "$1"
    compopt() { options+=" $2"; }
    shift
    options=""
    COMP_WORDS=("$@")
    COMP_CWORD=$(($# - 1))
    COMPREPLY=()
    _dpbench
    printf "%s\n" "${COMPREPLY[@]}" | LC_ALL=C sort | paste -sd " " -
    printf "options:%s\n" "$options"' _ "$work/dpbench.bash" "$@"
}
expect_completion() {  # expected replies (sorted, space-separated), then the words
  local expected=$1 got
  shift
  got=$(cd "$work/files" && complete_words "$@" | head -n 1)
  [ "$got" = "$expected" ] || fail "complete '$*': got '$got', expected '$expected'"
}
expect_options() {  # expected compopt options, then the words
  local expected=$1 got
  shift
  got=$(cd "$work/files" && complete_words "$@" | tail -n 1)
  [ "$got" = "options:$expected" ] || fail "complete '$*': compopt '$got', expected '$expected'"
}

expect_completion "comm_bench compare completion predict report run strategies" dpbench ""
expect_completion "report" dpbench rep
expect_completion "--model=" dpbench --mod
expect_options " nospace" dpbench --mod
expect_completion "--precision=" dpbench run --prec
expect_completion "resnet101 resnet152 resnet50" dpbench --model = res
expect_completion "bf16 fp16 fp32 tf32" dpbench --precision = ""
expect_completion "parameter_server" dpbench run --variable_update = par
expect_completion "--precision=bf16" dpbench --precision=bf
expect_completion "cpu gpu" dpbench --local_parameter_device ""
expect_completion "" dpbench --use_fp16 ""
expect_completion "false true" dpbench --use_fp16 = ""
expect_completion "--format= --help --output= --plots=" dpbench report --
expect_completion "csv json markdown" dpbench report --format ""
expect_completion "results results.json" dpbench report res
expect_options " filenames" dpbench report res
expect_completion "results" dpbench report --plots = res
expect_completion "results results.json" dpbench predict base.json --curves a.json res
expect_completion "all_gather all_reduce" dpbench comm_bench --op = all
expect_completion "bash zsh" dpbench completion ""
expect_completion "" dpbench -- --mod
expect_completion "" dpbench --num_gpus ""

# Its command line: one shell, a known one.
expect_exit "dpbench completion without a shell" 2 "$dpbench" completion
grep -qx 'dpbench: error: completion: give one shell: dpbench completion bash|zsh' "$work/stderr" ||
  fail "dpbench completion without a shell: $(cat "$work/stderr")"
expect_exit "dpbench completion fish" 2 "$dpbench" completion fish
grep -qx "dpbench: error: completion: unknown shell 'fish'; accepted: bash, zsh" "$work/stderr" ||
  fail "dpbench completion fish: $(cat "$work/stderr")"

# zsh runs the same functions through bashcompinit, whose compgen leaves the filtering to zsh:
# the replies hold every candidate, and flags come without '=' (their value in the next word).
if command -v zsh >/dev/null 2>&1; then
  zsh_replies() {
    zsh -f -c '
      autoload -U compinit && compinit -u -d "$1/zcompdump"
      source "$2"
      emulate -L sh
      shift 2
      COMP_WORDS=("$@")
      COMP_CWORD=$(($# - 1))
      COMPREPLY=()
      _dpbench
      print -r -- "${COMPREPLY[*]}"' _ "$work" "$work/dpbench.zsh" "$@" 2>&1
  }
  got=$(zsh_replies dpbench --model "")
  [ "$got" = "$(sed -n "s/^    run:model) printf '%s' '\(.*\)' ;;$/\1/p" "$work/dpbench.bash")" ] ||
    fail "zsh: dpbench --model: $got"
  got=$(zsh_replies dpbench report --f)
  [ "$got" = "--output --format --plots --help" ] || fail "zsh: dpbench report --f: $got"
else
  echo "test_completion: zsh is not installed; its part is skipped"
fi

finish "test_completion: the bash completion answers as expected"
