#!/usr/bin/env bash
# Sets up, builds and runs the main job: `dpbench` with its defaults (the trivial model) plus any
# flags given here. On a machine without a GPU it runs on the reference backend and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh  # its progress on stderr, so that stdout is dpbench's alone
exec "./${DPBENCH_BUILD_DIR:-build}/dpbench" "$@"
