#!/usr/bin/env bash
# Configures and builds dpbench into ./build (Release). DPBENCH_CUDA_ARCHITECTURES picks the GPU
# targets (default 90: H100/H200); DPBENCH_BUILD_DIR another folder.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DPBENCH_BUILD_DIR:-build}
arch_flag=()
[ -n "${DPBENCH_CUDA_ARCHITECTURES:-}" ] && arch_flag=(-DCMAKE_CUDA_ARCHITECTURES="$DPBENCH_CUDA_ARCHITECTURES")
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${arch_flag[@]}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
