#!/usr/bin/env bash
# Tests of scripts/build_progress.awk (what scripts/build.sh shows of a build): a few progress
# lines instead of cmake's hundreds, the compiler's errors passed through whole, and "up to date"
# when nothing was compiled.
set -euo pipefail
awk_script=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)/build_progress.awk
checks=0
fail() { echo "FAIL: $*" >&2; exit 1; }
check() { local what=$1; shift; "$@" || fail "$what"; checks=$((checks + 1)); }

build_log() {  # 40 compiled files over 0..100%, cmake's other chatter, and one compiler error
  local i
  for ((i = 0; i < 40; i++)); do
    echo "[ $((i * 100 / 40))%] Building CXX object CMakeFiles/dpbench_core.dir/engine/file_$i.cpp.o"
    [ "$i" = 20 ] && printf '%s\n' "/src/engine/file_20.cpp:3:5: error: 'x' was not declared in this scope" \
      "    3 |     x = 1;" "      |     ^"
    echo "[ $((i * 100 / 40))%] Built target dpbench_version"
  done
  echo "[100%] Linking CXX executable dpbench"
  echo "gmake[2]: Leaving directory '/src/build'"
}

out=$(build_log | awk -v tty=0 -f "$awk_script")
check "one progress line per tenth: $out" [ "$(grep -c '^build: .*% ' <<<"$out")" = 10 ]
check "progress names the file: $out" grep -q '^build:   0%  compiling engine/file_0.cpp$' <<<"$out"
check "the error passes through whole: $out" grep -qF "/src/engine/file_20.cpp:3:5: error: 'x' was not declared in this scope" <<<"$out"
check "with its context lines: $out" grep -qxF "    3 |     x = 1;" <<<"$out"
no_chatter() { ! grep -q "Built target\|Leaving directory\|Linking" <<<"$out"; }
check "cmake's chatter dropped: $out" no_chatter
check "last line counts the files: $out" [ "$(tail -n 1 <<<"$out")" = "build: done, 40 files compiled" ]

out=$(printf '%s\n' "[  0%] Built target dpbench_version" "[100%] Built target dpbench" | awk -v tty=0 -f "$awk_script")
check "nothing compiled: up to date, got: $out" [ "$out" = "build: up to date" ]

out=$(build_log | awk -v tty=1 -f "$awk_script")
check "on a terminal one line is rewritten in place" grep -q $'\r' <<<"$out"
check "and still ends with the count: $out" [ "$(tail -n 1 <<<"$out")" = "build: done, 40 files compiled" ]
echo "test_build_progress.sh: $checks checks passed"
