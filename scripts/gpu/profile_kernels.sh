#!/usr/bin/env bash
# Where a step's GPU time goes: one measured step of dpbench and of its PyTorch twin under Nsight
# Compute (kernel durations only; every launch timed on its own, clocks left alone), summed by
# kernel family. Usage on the GPU machine:
#   scripts/gpu/profile_kernels.sh OUT_DIR MODEL BATCH PRECISION FORMAT
# e.g. scripts/gpu/profile_kernels.sh /tmp/prof resnet50 64 tf32 NHWC
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: profile_kernels.sh OUT_DIR MODEL BATCH PRECISION FORMAT}
model=${2:-resnet50}
batch=${3:-64}
precision=${4:-tf32}
format=${5:-NCHW}
mkdir -p "$out"
source scripts/gpu/env.sh build/dpbench >/dev/null
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "profile_kernels.sh: ncu (Nsight Compute) not found" >&2; exit 1; }
tag="${model}_b${batch}_${precision}_${format}"
ncu_args=(--clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv)
# Without CUDA graphs, so that each kernel is its own launch.
"$ncu" "${ncu_args[@]}" ./build/dpbench --device=gpu --model="$model" --batch_size="$batch" \
  --precision="$precision" --data_format="$format" --num_batches=2 --num_warmup_batches=3 \
  --cuda_graph=false --profile_step=2 --result_file= > "$out/ncu_dpbench_$tag.csv" 2> "$out/ncu_dpbench_$tag.err"
"$ncu" "${ncu_args[@]}" python3 -W ignore scripts/bench/pytorch_cnn.py --model="$model" --batch_size="$batch" \
  --precision="$precision" --data_format="$format" --num_batches=2 --num_warmup_batches=3 \
  --profile_step=1 > "$out/ncu_pytorch_$tag.csv" 2> "$out/ncu_pytorch_$tag.err"
python3 - "$out" "$tag" <<'PY'
import collections, csv, re, sys
out, tag = sys.argv[1], sys.argv[2]
scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "s": 1e3, "second": 1e3}
for who in ("dpbench", "pytorch"):
    try:
        lines = list(csv.reader(open(f"{out}/ncu_{who}_{tag}.csv")))
    except OSError:
        continue
    # The programs' own output (the twin's JSON line, progress) precedes ncu's table.
    start = next((i for i, r in enumerate(lines) if "Kernel Name" in r), None)
    if start is None:
        print(f"{who}: no kernels recorded"); continue
    rows = [r for r in lines[start:] if len(r) == len(lines[start])]
    head = rows[0]
    name_at, value_at, unit_at = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
    families = collections.defaultdict(lambda: [0.0, 0])
    total = 0.0
    for r in rows[1:]:
        ms = float(r[value_at].replace(",", "")) * scale[r[unit_at]]
        family = re.sub(r"<.*", "", re.sub(r"^void ", "", r[name_at]))[:80]
        families[family][0] += ms
        families[family][1] += 1
        total += ms
    print(f"\n{who} {tag}: {len(rows) - 1} kernels, {total:.2f} ms of kernel time")
    print("| ms | calls | kernel family |\n|--:|--:|---|")
    for family, (ms, calls) in sorted(families.items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"| {ms:.3f} | {calls} | `{family}` |")
PY
