#!/usr/bin/env bash
# Two builds of dpbench on the same workloads, interleaved (A, B, A, B, ...) so a machine's slow
# drift falls on both alike: for a change that must not move throughput (a refactor), the median
# items/s of each build per workload and B's change against A.
# Usage: scripts/gpu/compare_builds.sh BINARY_A BINARY_B OUT_DIR ROUNDS 'flags of workload 1' 'flags of workload 2' ...
# Environment: RUN_TIMEOUT (seconds per run, default 180).
set -uo pipefail
case ${1:-} in -h | --help) sed -n '2,/^set /s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.." || exit 1
usage="usage: compare_builds.sh BINARY_A BINARY_B OUT_DIR ROUNDS WORKLOAD_FLAGS..."
a=${1:?$usage} b=${2:?$usage} out=${3:?$usage} rounds=${4:?$usage}
shift 4
(($#)) || { echo "$usage" >&2; exit 2; }
mkdir -p "$out"
# shellcheck source=scripts/gpu/common.sh
source scripts/gpu/common.sh "$a" >/dev/null
w=0
for workload in "$@"; do
  w=$((w + 1))
  for ((round = 1; round <= rounds; round++)); do
    for side in a b; do
      binary=$a
      [ "$side" = b ] && binary=$b
      # shellcheck disable=SC2086  # a workload is a list of flags
      timeout "${RUN_TIMEOUT:-180}" "$binary" $workload --display_every=1000 \
        --result_file="$out/w${w}_${side}_r$round.json" >"$out/w${w}_${side}_r$round.log" 2>&1 ||
        echo "workload $w, build $side, round $round failed: $(tail -n 1 "$out/w${w}_${side}_r$round.log")"
    done
  done
done
gpu_table builds "$out" "$rounds" "$@"
