#!/usr/bin/env bash
# The same dpbench command RUNS times, each a fresh process: prints every run's median step time
# and throughput, and the spread between runs. What separates run-to-run variation (start-up
# choices such as cuDNN's timed algorithm search) from noise within a run.
# Usage: scripts/gpu/repeat_runs.sh OUT_DIR RUNS dpbench-flags...
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: repeat_runs.sh OUT_DIR RUNS dpbench-flags...}
runs=${2:?usage: repeat_runs.sh OUT_DIR RUNS dpbench-flags...}
shift 2
mkdir -p "$out"
# shellcheck source=scripts/gpu/env.sh
source scripts/gpu/env.sh build/dpbench >/dev/null
export NCCL_NVLS_ENABLE=0
for ((run = 1; run <= runs; run++)); do
  timeout "${RUN_TIMEOUT:-120}" ./build/dpbench "$@" --display_every=1000 \
    --result_file="$out/run$run.json" > "$out/run$run.log" 2>&1 \
    || echo "run $run failed: $(tail -n 1 "$out/run$run.log")"
done
python3 - "$out" "$runs" "$*" <<'PY'
import json, os, statistics, sys
out, runs, flags = sys.argv[1], int(sys.argv[2]), sys.argv[3]
medians, rates = [], []
for run in range(1, runs + 1):
    try:
        s = json.load(open(os.path.join(out, f"run{run}.json")))["summary"]
    except (OSError, ValueError, KeyError):
        continue
    medians.append(s["step_time_ms"]["median"])
    rates.append(s["items_per_sec"])
    print(f"run {run}: step {s['step_time_ms']['median']:.2f} ms median "
          f"(stddev {s['step_time_ms']['stddev']:.3f}), {s['items_per_sec']:,.0f} items/s")
if medians:
    print(f"{flags}: {len(medians)} runs, median step {min(medians):.2f}-{max(medians):.2f} ms "
          f"(spread {100 * (max(medians) / min(medians) - 1):.1f}%), items/s median {statistics.median(rates):,.0f}")
PY
