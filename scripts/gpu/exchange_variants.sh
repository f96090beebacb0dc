#!/usr/bin/env bash
# A/B of gradient-exchange variants on N GPUs in one call: each variant is a name, environment
# settings and dpbench flags; every round runs the 1-GPU and N-GPU independent baselines and each
# variant once, so drift over the call hits all alike. Prints medians with exposed communication,
# transfer time and busbw.
# Usage: scripts/gpu/exchange_variants.sh OUT_DIR MODEL:BATCH N ROUNDS VARIANT...
#   VARIANT = "name|ENV=V ENV2=V|--flag --flag"  (either part may be empty), e.g.
#   scripts/gpu/exchange_variants.sh /tmp/x nmt:384 4 2 "default||" "cta1|NCCL_CTA_POLICY=1|" \
#     "bf16||--compact_gradient_transfer=bf16"
# Every variant runs --variable_update=replicated unless its flags say otherwise. EXTRA_FLAGS go to
# every run, baselines included (e.g. --cudnn_benchmark=false for repeatable CNN step times).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: exchange_variants.sh OUT_DIR MODEL:BATCH N ROUNDS VARIANT...}
entry=${2:?model:batch}
n=${3:?N}
rounds=${4:?ROUNDS}
shift 4
mkdir -p "$out"
# shellcheck source=scripts/gpu/env.sh
source scripts/gpu/env.sh build/dpbench >/dev/null
export NCCL_NVLS_ENABLE=0
model=${entry%%:*}; batch=${entry##*:}
base=(--model="$model" --batch_size="$batch" --num_batches="${NUM_BATCHES:-40}" --num_warmup_batches="${NUM_WARMUP:-10}" --display_every=1000)
read -r -a extra <<< "${EXTRA_FLAGS:-}"
base+=("${extra[@]}")
case $model in
  nmt) base+=(--encoder_type=cudnn_lstm --direction=bi --precision=tf32) ;;
  rnnlm) base+=(--precision=tf32) ;;
esac
run() {  # tag, env assignments (one word, space-separated), then flags
  local tag=$1 assignments=$2; shift 2
  # shellcheck disable=SC2086  # the assignments are words
  env $assignments NCCL_NVLS_ENABLE=0 ./build/dpbench --device=gpu "${base[@]}" "$@" \
    --result_file="$out/$tag.json" > "$out/$tag.log" 2>&1 || echo "$tag failed: $(tail -n 1 "$out/$tag.log")"
}
names=()
for ((round = 1; round <= rounds; round++)); do
  echo "== round $round of $rounds"
  run "independent_g1_r$round" "" --num_gpus=1
  run "independent_g${n}_r$round" "" --num_gpus="$n"
  for variant in "$@"; do
    IFS='|' read -r name assignments flags <<< "$variant"
    [ "$round" = 1 ] && names+=("$name")
    # shellcheck disable=SC2086  # flags are words
    run "${name}_g${n}_r$round" "$assignments" --num_gpus="$n" --variable_update=replicated $flags
  done
done

python3 - "$out" "$n" "${names[@]}" <<'PY'
import glob, json, os, statistics, sys
out, n, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]


def summaries(prefix):
    docs = []
    for path in sorted(glob.glob(os.path.join(out, prefix + "_r*.json"))):
        try:
            docs.append(json.load(open(path))["summary"])
        except (OSError, ValueError, KeyError):
            pass
    return docs


def median_of(docs, pick):
    values = [v for v in (pick(d) for d in docs) if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


ones = summaries("independent_g1")
one = median_of(ones, lambda s: s["items_per_sec"])
print(f"1 GPU median {one:,.0f} items/s over {len(ones)} runs" if one else "no 1-GPU result")
print(f"| variant ({n} GPUs) | items/s (median) | efficiency | step ms | exposed ms | exposed max ms | transfer ms (min dev) | busbw GB/s |")
print("|---|--:|--:|--:|--:|--:|--:|--:|")
for name in ["independent"] + names:
    docs = summaries(f"{name}_g{n}")
    if not docs:
        print(f"| {name} | failed | | | | | | |")
        continue
    speed = median_of(docs, lambda s: s["items_per_sec"])
    cell = lambda key, f="{:.2f}": (lambda v: "-" if v is None else f.format(v))(median_of(docs, lambda s: (s.get("comm") or {}).get(key)))
    eff = f"{100 * speed / (n * one):.1f}%" if one else "-"
    step = median_of(docs, lambda s: s["step_time_ms"]["median"])
    print(f"| {name} | {speed:,.0f} | {eff} | {step:.2f} | {cell('exposed_comm_ms_per_step')} | "
          f"{cell('exposed_comm_ms_per_step_max')} | {cell('transfer_ms_per_step_min')} | {cell('busbw_gbps', '{:.0f}')} |")
PY
