# shellcheck shell=bash
# Sourced by the shell tests that run dpbench and read its results: a failure counter, reading a
# result's fields, comparing parameter norms, a command's exit code, and the end of a test.
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
field() {  # result file, python expression over d
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
norm() {  # result file -> param_norm (full precision)
  field "$1" 'repr(d["summary"]["param_norm"])'
}
close_to() {  # a, b: equal to 1e-9, relative (sums taken in another order)
  python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(0 if abs(a - b) <= 1e-9 * abs(b) else 1)' "$1" "$2"
}
expect_exit() {  # name, expected exit code, command...: its output in $work/stdout and $work/stderr
  local name=$1 expected=$2 code
  shift 2
  "$@" >"${work:?}/stdout" 2>"$work/stderr"
  code=$?
  [ "$code" = "$expected" ] || fail "$name: exit code $code, expected $expected: $(head -c 300 "$work/stderr")"
}
finish() {  # the line that ends a test: the failures, or $1
  if [ "$failures" -gt 0 ]; then
    echo "$failures failure(s)"
    exit 1
  fi
  echo "$1"
}
