#!/usr/bin/env bash
# dpbench installed as a user gets it (cmake/Packaging.cmake): `cmake --install` into a prefix, and
# the Debian package that `cpack -G DEB` builds from the build folder, unpacked with dpkg -x into a
# temporary root. Not dpkg -i: that needs root, would change this machine's package database, and
# refuses the package where the CUDA libraries come from NVIDIA's tarball rather than its
# packages (as here). Then, from a folder outside the checkout with the root's bin/ first on PATH:
# dpbench --version, a short run on the reference backend, dpbench-sweep --dry-run running the
# dpbench beside it, compare --reference finding the installed reference results, and the bash
# completion; and the package's Depends naming a package for
# every library dpbench links (Note [the package's dependencies]). Everything goes at the end.
# Usage: test_package.sh BUILD_DIR CMAKE CPACK
set -uo pipefail
build=$(cd "${1:?usage: test_package.sh BUILD_DIR CMAKE CPACK}" && pwd)
cmake=${2:?usage: test_package.sh BUILD_DIR CMAKE CPACK}
cpack=${3:?usage: test_package.sh BUILD_DIR CMAKE CPACK}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/scripts/result_checks.sh
source "$(dirname "$0")/result_checks.sh"

# Files under a folder, one relative path a line, sorted.
files_under() { (cd "$1" && find . -type f | sed 's|^\./||' | LC_ALL=C sort); }

# ---- cmake --install ----------------------------------------------------------------------------
"$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
  fail "cmake --install: $(tail -n 3 "$work/install.log")"
for file in bin/dpbench bin/dpbench-sweep; do
  [ -x "$work/prefix/$file" ] || fail "cmake --install: no executable $file"
done
for file in share/bash-completion/completions/dpbench share/doc/dpbench/README.md share/doc/dpbench/DEVELOPING.md \
  share/dpbench/bench/pytorch_cnn.py share/dpbench/bench/pytorch_ddp.py share/dpbench/bench/twin_timing.py; do
  [ -f "$work/prefix/$file" ] || fail "cmake --install: no $file"
done
for twin in "$source_dir"/scripts/bench/*.py; do
  cmp -s "$twin" "$work/prefix/share/dpbench/bench/${twin##*/}" || fail "cmake --install: ${twin##*/} differs or is missing"
done
# The reference results, every file as it is in the checkout.
diff -r "$source_dir/reference_results" "$work/prefix/share/dpbench/reference_results" >"$work/references.diff" 2>&1 ||
  fail "cmake --install: the reference results differ from reference_results/: $(head -n 3 "$work/references.diff")"

# ---- the Debian package -------------------------------------------------------------------------
(cd "$work" && "$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$work/package") >"$work/cpack.log" 2>&1 ||
  fail "cpack -G DEB: $(tail -n 3 "$work/cpack.log")"
debs=("$work"/package/dpbench_*.deb)
if [ "${#debs[@]}" != 1 ] || [ ! -f "${debs[0]}" ]; then
  fail "cpack -G DEB made no dpbench_*.deb: $(tail -n 3 "$work/cpack.log")"
  finish ""
fi
deb=${debs[0]}
[ "$(dpkg-deb -f "$deb" Package)" = dpbench ] || fail "the package is not named dpbench: $(dpkg-deb -f "$deb" Package)"
dpkg -x "$deb" "$work/root" || fail "dpkg -x failed"
[ "$(files_under "$work/root/usr")" = "$(files_under "$work/prefix")" ] ||
  fail "the package's files differ from cmake --install's: $(diff <(files_under "$work/root/usr") <(files_under "$work/prefix") | head -n 5)"

# Every library the installed dpbench needs has its Depends entry, as cmake/Packaging.cmake lists them.
installed=$work/root/usr/bin/dpbench
depends=$(dpkg-deb -f "$deb" Depends)
entries=$(printf '%s\n' "$depends" | sed 's/, /\n/g')
needed=$(readelf -d "$installed" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
[ -n "$needed" ] || fail "readelf lists no library that dpbench needs"
for soname in $needed; do
  line=$(awk -v soname="$soname: " 'index($0, soname) == 1' "$build/package_libraries.txt" | head -n 1)
  if [ -z "$line" ]; then
    fail "dpbench needs $soname and cmake/Packaging.cmake names no package for it (Note [the package's dependencies])"
  elif ! grep -qxF "${line#*: }" <<<"$entries"; then
    fail "$soname: the Depends entry '${line#*: }' is not in the package's Depends: $depends"
  fi
done
# libc6's minimum is at least the newest GLIBC symbol version dpbench uses.
if command -v objdump >/dev/null 2>&1; then
  newest=$(objdump -T "$installed" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
  minimum=$(sed -n 's/.*libc6 (>= \([0-9.]*\)).*/\1/p' <<<"$depends" | head -n 1)
  [ "$(printf '%s\n%s\n' "$newest" "$minimum" | sort -V | tail -n 1)" = "$minimum" ] ||
    fail "dpbench uses GLIBC_$newest, and the package asks for libc6 (>= $minimum)"
fi

# ---- the installed commands, from elsewhere -----------------------------------------------------
# The package leaves finding the CUDA libraries to the loader (NVIDIA's packages register their
# folders with ld.so.conf). A machine whose loader does not know the toolkit's folder gets the
# folders the build linked from, as its packages would have registered them.
if ldd "$installed" 2>/dev/null | grep -q 'not found'; then
  runpath=$(readelf -d "$build/dpbench" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p')
  echo "test_package: the loader does not find all of dpbench's libraries; using the build's folders ($runpath)"
  export LD_LIBRARY_PATH=$runpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
mkdir -p "$work/elsewhere"
cd "$work/elsewhere" || exit 1
PATH=$work/root/usr/bin:$PATH
[ "$(command -v dpbench)" = "$installed" ] || fail "dpbench on PATH is $(command -v dpbench), not the package's"
[ "$(command -v dpbench-sweep)" = "$work/root/usr/bin/dpbench-sweep" ] || fail "dpbench-sweep is not on PATH"

expect_exit "dpbench --version" 0 dpbench --version
grep -qE '^dpbench [0-9]+\.[0-9]+\.[0-9]+ \(git [^)]+\)$' "$work/stdout" ||
  fail "dpbench --version: $(head -c 200 "$work/stdout")"

expect_exit "a run on the reference backend" 0 dpbench --device=cpu --model=trivial --num_batches=3 \
  --num_warmup_batches=1 --result_file=run.json
[ "$(field run.json 'd["environment"]["backend"]')" = reference ] ||
  fail "the reference run: backend $(field run.json 'd["environment"]["backend"]' 2>&1)"

expect_exit "dpbench-sweep --dry-run" 0 dpbench-sweep --models=trivial --gpus=1,2 \
  --strategies='independent;replicated:nccl' --out=sweep --dry-run -- --device=cpu
commands=$(grep -v '^dpbench-sweep (dry run): ' "$work/stdout")
[ "$(grep -c . <<<"$commands")" = 5 ] || fail "dpbench-sweep --dry-run: not 4 runs and a report: $(cat "$work/stdout")"
[ "$(grep -vc "^$installed " <<<"$commands")" = 0 ] ||
  fail "dpbench-sweep --dry-run: a command that is not the dpbench beside it: $(cat "$work/stdout")"
[ "$(tail -n 1 "$work/stdout")" = "dpbench-sweep (dry run): 4 runs, 0 with a result present (would be skipped); nothing was run" ] ||
  fail "dpbench-sweep --dry-run: last line: $(tail -n 1 "$work/stdout")"
[ ! -e sweep ] || fail "dpbench-sweep --dry-run made its output folder"

# The references are found beside the installed dpbench, not in the checkout: a copy of one is
# its own reference.
installed_references=$(cd "$work/root/usr/share/dpbench/reference_results" && pwd -P)
cp "$installed_references/2026-11-29_h200/gpt_124m_b16_bf16_1gpu.json" mine.json
expect_exit "dpbench compare --reference" 0 dpbench compare --reference mine.json --fail_above=5 --format=json
[ "$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["base"]["path"])' <"$work/stdout")" = \
  "$installed_references" ] || fail "dpbench compare --reference: not the installed references: $(head -c 300 "$work/stdout")"
[ "$(python3 -c 'import json,sys; d=json.load(sys.stdin); s=d["series"][0]; print(s["ratio"], s["verdict"])' \
  <"$work/stdout")" = "1.0 within noise" ] || fail "dpbench compare --reference: $(head -c 600 "$work/stdout")"

completion=$work/root/usr/share/bash-completion/completions/dpbench
cmp -s "$completion" <(dpbench completion bash) || fail "the installed completion is not what dpbench completion bash prints"
[ "$(bash -c 'source "$1" && complete -p dpbench' _ "$completion")" = "complete -F _dpbench dpbench" ] ||
  fail "sourcing the installed completion does not complete dpbench"

# ---- and gone again -----------------------------------------------------------------------------
cd / || exit 1
rm -rf "$work/root" "$work/prefix" "$work/package"
[ ! -e "$work/root" ] || fail "the unpacked package could not be removed"
finish "test_package: cmake --install, cpack -G DEB and the unpacked package checked ($(basename "$deb"))"
