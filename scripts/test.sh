#!/usr/bin/env bash
# Sets up, builds and runs every test. Host tests run everywhere; the [gpu] tests report
# "skipped" where no CUDA GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir "${DPBENCH_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
