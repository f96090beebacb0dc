#!/usr/bin/env bash
# One GPU of a multi-GPU run short of memory: another process holds all but LEAVE GiB of GPU 1,
# then `dpbench --num_gpus=2` (replicated, NCCL) must end with one error line and a non-zero exit,
# never hang, wherever the allocation fails (set-up, or the first step while GPU 0 is already in
# NCCL). Prints, per amount left free, the exit code, the seconds taken and the error line.
# Usage: scripts/gpu/oom_check.sh OUT_DIR "LEAVE_GIB..." dpbench-flags...
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: oom_check.sh OUT_DIR "LEAVE_GIB..." dpbench-flags...}
leaves=${2:?usage: oom_check.sh OUT_DIR "LEAVE_GIB..." dpbench-flags...}
shift 2
mkdir -p "$out"
# shellcheck source=scripts/gpu/env.sh
source scripts/gpu/env.sh build/dpbench >/dev/null
export NCCL_NVLS_ENABLE=0
for leave in $leaves; do
  python3 -u - "$leave" > "$out/holder_$leave.log" 2>&1 <<'PY' &
import sys, time, torch
free, _ = torch.cuda.mem_get_info(1)
held = torch.empty(max(0, free - int(float(sys.argv[1]) * 2**30)), dtype=torch.uint8, device="cuda:1")
print("held", held.numel() >> 30, "GiB", flush=True)
time.sleep(600)
PY
  holder=$!
  for _ in $(seq 1 120); do grep -q held "$out/holder_$leave.log" && break; sleep 0.5; done
  start=$SECONDS
  timeout "${RUN_TIMEOUT:-120}" ./build/dpbench --device=gpu --num_gpus=2 --variable_update=replicated \
    "$@" --display_every=1000 --result_file="$out/run_$leave.json" > "$out/run_$leave.log" 2>&1
  code=$?
  kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
  line=$(grep -m1 "error" "$out/run_$leave.log")
  [ -e "$out/run_$leave.json" ] && line="(ran to the end) $line"
  echo "leave ${leave} GiB: exit $code after $((SECONDS - start)) s: ${line:-$(tail -n 1 "$out/run_$leave.log")}"
done
