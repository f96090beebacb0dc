#!/usr/bin/env bash
# Two builds of dpbench on the same workloads, interleaved (A, B, A, B, ...) so a machine's slow
# drift falls on both alike: for a change that must not move throughput (a refactor), the median
# items/s of each build per workload and B's change against A.
# Usage: scripts/gpu/compare_builds.sh BINARY_A BINARY_B OUT_DIR ROUNDS 'flags of workload 1' 'flags of workload 2' ...
# Environment: RUN_TIMEOUT (seconds per run, default 180).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
usage="usage: compare_builds.sh BINARY_A BINARY_B OUT_DIR ROUNDS WORKLOAD_FLAGS..."
a=${1:?$usage} b=${2:?$usage} out=${3:?$usage} rounds=${4:?$usage}
shift 4
(($#)) || { echo "$usage" >&2; exit 2; }
mkdir -p "$out"
# shellcheck source=scripts/gpu/env.sh
source scripts/gpu/env.sh "$a" >/dev/null
export NCCL_NVLS_ENABLE=0
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
python3 - "$out" "$rounds" "$@" <<'PY'
import json, statistics, sys
out, rounds, workloads = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"| workload | A items/s (median of {rounds}) | B items/s | B/A | A runs | B runs |")
print("|---|--:|--:|--:|---|---|")
for w, flags in enumerate(workloads, 1):
    rates = {}
    for side in "ab":
        rates[side] = []
        for r in range(1, rounds + 1):
            try:
                rates[side].append(json.load(open(f"{out}/w{w}_{side}_r{r}.json"))["summary"]["items_per_sec"])
            except (OSError, ValueError, KeyError):
                pass
    if not rates["a"] or not rates["b"]:
        print(f"| {flags} | - | - | - | {len(rates['a'])} | {len(rates['b'])} |")
        continue
    ma, mb = statistics.median(rates["a"]), statistics.median(rates["b"])
    spread = lambda v: ", ".join(f"{x:,.0f}" for x in v)
    print(f"| {flags} | {ma:,.0f} | {mb:,.0f} | {mb / ma:.4f} | {spread(rates['a'])} | {spread(rates['b'])} |")
PY
