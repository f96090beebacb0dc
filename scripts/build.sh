#!/usr/bin/env bash
# Configures and builds dpbench into ./build (Release). DPBENCH_CUDA_ARCHITECTURES picks the GPU
# targets (default 90: H100/H200); DPBENCH_BUILD_DIR another folder; DPBENCH_WARNINGS_AS_ERRORS=ON
# fails the build on a compiler warning in dpbench's own code (CI sets it). Progress goes to stderr in a
# few lines (scripts/build_progress.awk), the compiler's errors and warnings as they come;
# DPBENCH_BUILD_VERBOSE=1 shows cmake's own output instead.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DPBENCH_BUILD_DIR:-build}
cmake_flags=()
[ -n "${DPBENCH_CUDA_ARCHITECTURES:-}" ] && cmake_flags=(-DCMAKE_CUDA_ARCHITECTURES="$DPBENCH_CUDA_ARCHITECTURES")
[ -n "${DPBENCH_WARNINGS_AS_ERRORS:-}" ] && cmake_flags+=(-DDPBENCH_WARNINGS_AS_ERRORS="$DPBENCH_WARNINGS_AS_ERRORS")
if [ ! -x "$build_dir/dpbench" ]; then
  echo "build: first build into $build_dir/ (about 15 minutes on 2 cores, most of it the CUDA" \
    "kernels; later builds compile only what changed)" >&2
fi
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${cmake_flags[@]}" >/dev/null
if [ -n "${DPBENCH_BUILD_VERBOSE:-}" ]; then
  exec cmake --build "$build_dir" -j "$(nproc)"
fi
tty=0
[ -t 2 ] && tty=1
cmake --build "$build_dir" -j "$(nproc)" 2>&1 | awk -v tty="$tty" -f scripts/build_progress.awk >&2
