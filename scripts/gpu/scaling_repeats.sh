#!/usr/bin/env bash
# Repeated, interleaved weak-scaling runs for claims that sit within run-to-run noise: per model,
# the 1-GPU baseline on every GPU alone (GPUs of one host differ by a percent or two), then R
# rounds of {1 GPU, N GPUs of each strategy}, so that drift over the session hits every variant
# alike; a table of medians over the rounds with min-max ranges, and optionally PyTorch DDP twins.
# Usage: scripts/gpu/scaling_repeats.sh OUT_DIR ["model:batch ..."] [N] [R]
#   e.g. scripts/gpu/scaling_repeats.sh /tmp/repeats "nmt:384 resnet50:64" 4 3
# Environment: STRATEGIES ("independent replicated:nccl parameter_server:gpu"; "replicated:nccl+sharded"
#   adds --sharded_update=true), NUM_BATCHES (50),
#   NUM_WARMUP (10), TWINS (1: one PyTorch DDP run on 1 and on N GPUs per model; 0: none),
#   EXTRA_FLAGS (added to every dpbench run, e.g. --cudnn_benchmark=false).
# Efficiency = 100 x median(throughput_N) / (N x median(throughput_1 on GPU 0)); the table also
# gives it against the slowest GPU alone, the bound a synchronous step can reach.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: scaling_repeats.sh OUT_DIR [\"model:batch ...\"] [N] [R]}
runs=${2:-"nmt:384 resnet50:64"}
n=${3:-4}
rounds=${4:-3}
strategies=${STRATEGIES:-"independent replicated:nccl parameter_server:gpu"}
mkdir -p "$out"
# shellcheck source=scripts/gpu/env.sh
source scripts/gpu/env.sh build/dpbench >/dev/null
export NCCL_NVLS_ENABLE=0

model_flags() {  # model -> its flags (precision as bench_strategies.sh: tf32 for the LSTMs)
  case $1 in
    nmt) echo "--encoder_type=cudnn_lstm --direction=bi --precision=tf32" ;;
    rnnlm) echo "--precision=tf32" ;;
    *) echo "--precision=fp32" ;;
  esac
}
strategy_flags() {  # variant -> dpbench flags
  local update=${1%%:*} option=""
  [[ $1 == *:* ]] && option=${1#*:}
  case $update in
    replicated)
      local spec=${option%%+*} sharded=""
      [[ $option == *+sharded ]] && sharded=" --sharded_update=true"
      echo "--variable_update=replicated --all_reduce_spec=${spec:-nccl}$sharded" ;;
    parameter_server) echo "--variable_update=parameter_server --local_parameter_device=${option:-gpu}" ;;
    *) echo "--variable_update=$update" ;;
  esac
}
read -r -a extra_flags <<< "${EXTRA_FLAGS:-}"
run() {  # tag, then dpbench flags
  local tag=$1; shift
  ./build/dpbench --device=gpu "${extra_flags[@]}" --num_batches="${NUM_BATCHES:-50}" --num_warmup_batches="${NUM_WARMUP:-10}" \
    --display_every=1000 --result_file="$out/$tag.json" "$@" > "$out/$tag.log" 2>&1 \
    || echo "$tag failed: $(tail -n 1 "$out/$tag.log")"
}

for entry in $runs; do
  model=${entry%%:*}; batch=${entry##*:}
  # shellcheck disable=SC2046  # flag lists
  base=(--model="$model" --batch_size="$batch" $(model_flags "$model"))
  for ((gpu = 0; gpu < n; gpu++)); do
    echo "== $model alone on GPU $gpu"
    run "${model}_alone-gpu${gpu}" "${base[@]}" --num_gpus=1 --gpu_indices="$gpu"
  done
  for ((round = 1; round <= rounds; round++)); do
    echo "== $model round $round of $rounds"
    run "${model}_independent_g1_r$round" "${base[@]}" --num_gpus=1
    for variant in $strategies; do
      # shellcheck disable=SC2046
      run "${model}_${variant//:/-}_g${n}_r$round" "${base[@]}" --num_gpus="$n" $(strategy_flags "$variant")
    done
  done
  if [ "${TWINS:-1}" != 0 ]; then
    for g in 1 "$n"; do
      echo "== PyTorch DDP $model, $g GPU(s)"
      # shellcheck disable=SC2046
      PYTHONWARNINGS=ignore python3 -m torch.distributed.run --standalone --nproc_per_node="$g" \
        scripts/bench/pytorch_ddp.py --model="$model" --batch_size="$batch" $(model_flags "$model") \
        --num_batches="${NUM_BATCHES:-50}" --num_warmup_batches="${NUM_WARMUP:-10}" \
        > "$out/ddp_${model}_g$g.json" 2> "$out/ddp_${model}_g$g.log" || echo "ddp $model g$g failed: $(tail -n 1 "$out/ddp_${model}_g$g.log")"
    done
  fi
done

python3 - "$out" "$runs" "$n" "$strategies" <<'PY'
import glob, json, os, statistics, sys
out, runs, n, strategies = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), sys.argv[4].split()


def speed(path):
    """items/s of a dpbench result, or of the last JSON line torchrun printed; None if absent."""
    try:
        text = open(path).read()
    except OSError:
        return None
    for chunk in [text] + list(reversed(text.strip().splitlines())):
        try:
            doc = json.loads(chunk)
        except ValueError:
            continue
        if isinstance(doc, dict):
            s = doc.get("summary", doc)
            return s.get("items_per_sec")
    return None


def telemetry(pattern):
    """Medians over runs of the mean SM clock (MHz), the power-capped share and joules per item."""
    clocks, capped, joules = [], [], []
    for path in sorted(glob.glob(os.path.join(out, pattern))):
        try:
            t = json.load(open(path))["summary"].get("gpu_telemetry", {})
        except (OSError, ValueError, KeyError):
            continue
        if "sm_clock_mhz_mean" in t:
            clocks.append(t["sm_clock_mhz_mean"])
            capped.append(t.get("power_capped_share", 0))
        if t.get("items_per_joule"):
            joules.append(1 / t["items_per_joule"])
    med = lambda v: statistics.median(v) if v else None
    return med(clocks), med(capped), med(joules)


def fmt_telemetry(values):
    clock, capped, joules = values
    if clock is None:
        return "- | - | -"
    return f"{clock:,.0f} | {100 * capped:.0f}% | " + ("-" if joules is None else f"{1e3 * joules:.3f}")


def eff(value, base):
    return 100 * value / (n * base)


def series(pattern):
    return [v for v in (speed(p) for p in sorted(glob.glob(os.path.join(out, pattern)))) if v]


for entry in runs:
    model = entry.split(":")[0]
    alone = [speed(os.path.join(out, f"{model}_alone-gpu{g}.json")) for g in range(n)]
    ones = series(f"{model}_independent_g1_r*.json")
    if not ones:
        print(f"{model}: no 1-GPU result")
        continue
    one = statistics.median(ones)
    slowest = min(v for v in alone if v) if any(alone) else None
    print(f"\n### {model}: 1 GPU (GPU 0) median {one:,.0f} items/s over {len(ones)} runs "
          f"({min(ones):,.0f}-{max(ones):,.0f}); each GPU alone: "
          + ", ".join("-" if v is None else f"{v:,.0f}" for v in alone))
    print(f"1 GPU telemetry (median): SM MHz | power-capped | mJ per item = {fmt_telemetry(telemetry(f'{model}_independent_g1_r*.json'))}")
    print(f"\n| strategy | {n} GPUs items/s (median) | runs (min-max) | efficiency vs GPU 0 | range | efficiency vs slowest GPU alone | SM MHz | power-capped | mJ per item |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for variant in strategies:
        values = series(f"{model}_{variant.replace(':', '-')}_g{n}_r*.json")
        if not values:
            print(f"| {variant} | failed | | | | | | | |")
            continue
        med = statistics.median(values)
        vs_slowest = f"{eff(med, slowest):.1f}%" if slowest else "-"
        print(f"| {variant} | {med:,.0f} | {len(values)} ({min(values):,.0f}-{max(values):,.0f}) | "
              f"{eff(med, one):.1f}% | {eff(min(values), one):.1f}-{eff(max(values), one):.1f}% | {vs_slowest} | "
              f"{fmt_telemetry(telemetry(f'{model}_{variant.replace(chr(58), chr(45))}_g{n}_r*.json'))} |")
    d1, dn = speed(os.path.join(out, f"ddp_{model}_g1.json")), speed(os.path.join(out, f"ddp_{model}_g{n}.json"))
    if d1 and dn:
        print(f"| PyTorch DDP (one run each) | {dn:,.0f} | 1 GPU: {d1:,.0f} | {eff(dn, d1):.1f}% | | | | | |")
PY
