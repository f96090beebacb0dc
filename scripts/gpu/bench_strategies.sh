#!/usr/bin/env bash
# Weak scaling of dpbench's synchronisation strategies on one host, against PyTorch DDP.
# Usage: scripts/gpu/bench_strategies.sh OUT_DIR ["model:batch ..."] ["gpu counts"] [precision]
#   e.g. scripts/gpu/bench_strategies.sh /tmp/strategies "resnet50:64 nmt:384" "1 2 4" tf32
# batch is per GPU; nmt runs --encoder_type=cudnn_lstm --direction=bi. precision: default fp32 for
# the CNNs and tf32 for nmt and rnnlm (as bench_cnn.sh and bench_rnn.sh).
# Environment: STRATEGIES ("independent replicated:nccl parameter_server:gpu": variable_update, and
#   after a colon replicated's --all_reduce_spec or parameter_server's --local_parameter_device),
#   NUM_BATCHES (50), NUM_WARMUP (10), DPBENCH_FLAGS (extra dpbench flags), TWINS (1; 0: no
#   PyTorch DDP twin), COMM_BENCH (1; 0: no `dpbench comm_bench` all-reduce table; run for 2+ GPUs).
# Files in OUT_DIR: dpbench_MODEL_VARIANT_gN.json/.log (VARIANT with ':' written '-'),
#   ddp_MODEL_gN.json/.log, comm_bench_gN.json/.log. Efficiency = 100 x throughput_N / (N x
#   throughput_1), within one variant (against the smallest GPU count when 1 is not in the list).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: bench_strategies.sh OUT_DIR [\"model:batch ...\"] [\"gpu counts\"] [precision]}
runs=${2:-"resnet50:64"}
counts=${3:-"1 2 4"}
precision_arg=${4:-}

seen=" "
for run in $runs; do
  model=${run%%:*}
  if ! [[ $run =~ ^[a-z0-9_]+:[1-9][0-9]*$ ]]; then
    echo "bench_strategies: '$run' is not model:batch (e.g. resnet50:64)" >&2; exit 2
  fi
  case $seen in *" $model "*) echo "bench_strategies: $model appears twice in \"$runs\" (file names hold the model only; use two OUT_DIRs)" >&2; exit 2 ;; esac
  seen="$seen$model "
done
for n in $counts; do
  case $n in '' | *[!0-9]* | 0) echo "bench_strategies: GPU count '$n' is not a positive integer" >&2; exit 2 ;; esac
done

mkdir -p "$out"
# shellcheck source=scripts/gpu/env.sh
source scripts/gpu/env.sh build/dpbench >/dev/null
export NCCL_NVLS_ENABLE=0
strategies=${STRATEGIES:-"independent replicated:nccl parameter_server:gpu"}
batches=${NUM_BATCHES:-50}
warmup=${NUM_WARMUP:-10}
twins=${TWINS:-1}
comm_bench=${COMM_BENCH:-1}
gpus_present=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)

# A variant as a file-name part: anything but letters, digits, '.', '_' and '-' becomes '-'.
file_tag() { local tag=${1//[^A-Za-z0-9._-]/-}; echo "$tag"; }
# Fails (with a message) when N is more GPUs than nvidia-smi lists; passes when it lists none.
enough_gpus() {
  if [ -n "$gpus_present" ] && [ "$gpus_present" -gt 0 ] && [ "$1" -gt "$gpus_present" ]; then
    echo "skipping $2 on $1 GPUs: this machine has $gpus_present"
    return 1
  fi
}

if [ "$comm_bench" != 0 ]; then
  for n in $counts; do
    [ "$n" -ge 2 ] || continue
    enough_gpus "$n" comm_bench || continue
    echo "== comm_bench, $n GPU(s)"
    rm -f "$out/comm_bench_g$n.json"
    ./build/dpbench comm_bench --num_gpus="$n" --min_bytes=1M --max_bytes=1G --json "$out/comm_bench_g$n.json" \
      > "$out/comm_bench_g$n.log" 2>&1 || echo "comm_bench g$n failed: $(tail -n 1 "$out/comm_bench_g$n.log")"
  done
fi

for run in $runs; do
  model=${run%%:*}
  batch=${run##*:}
  case $model in
    nmt | rnnlm) precision=${precision_arg:-tf32} ;;
    *) precision=${precision_arg:-fp32} ;;
  esac
  model_flags=()
  [ "$model" = nmt ] && model_flags=(--encoder_type=cudnn_lstm --direction=bi)
  for n in $counts; do
    enough_gpus "$n" "$model" || continue
    for variant in $strategies; do
      update=${variant%%:*}
      spec=""
      [[ $variant == *:* ]] && spec=${variant#*:}
      strategy_flags=(--variable_update="$update")
      if [ -n "$spec" ]; then
        case $update in
          replicated) strategy_flags+=(--all_reduce_spec="$spec") ;;
          parameter_server) strategy_flags+=(--local_parameter_device="$spec") ;;
          *) echo "bench_strategies: skipping $variant: only replicated and parameter_server take ':...'"; continue ;;
        esac
      fi
      tag="${model}_$(file_tag "$variant")_g$n"
      echo "== dpbench $model, batch $batch per GPU, $precision, $variant, $n GPU(s)"
      rm -f "$out/dpbench_$tag.json"
      # shellcheck disable=SC2086  # DPBENCH_FLAGS is a list of flags
      ./build/dpbench --device=gpu --num_gpus="$n" --model="$model" --batch_size="$batch" --precision="$precision" \
        "${model_flags[@]}" "${strategy_flags[@]}" --num_batches="$batches" --num_warmup_batches="$warmup" \
        --display_every=10 ${DPBENCH_FLAGS:-} --result_file="$out/dpbench_$tag.json" > "$out/dpbench_$tag.log" 2>&1 \
        || echo "dpbench $tag failed: $(tail -n 1 "$out/dpbench_$tag.log")"
    done
    if [ "$twins" != 0 ]; then
      tag="${model}_g$n"
      echo "== PyTorch DDP $model, batch $batch per GPU, $precision, $n GPU(s)"
      PYTHONWARNINGS=ignore python3 -m torch.distributed.run --standalone --nproc_per_node="$n" \
        scripts/bench/pytorch_ddp.py --model="$model" --batch_size="$batch" --precision="$precision" \
        "${model_flags[@]}" --num_batches="$batches" --num_warmup_batches="$warmup" \
        > "$out/ddp_$tag.json" 2> "$out/ddp_$tag.log" || echo "ddp $tag failed: $(tail -n 1 "$out/ddp_$tag.log")"
    fi
  done
done

python3 - "$out" "$runs" "$counts" "$strategies" <<'PY'
import json, re, sys
out, runs, counts, strategies = sys.argv[1], sys.argv[2].split(), [int(n) for n in sys.argv[3].split()], sys.argv[4].split()


def load(path):
    """A JSON document, or the last line of the file that is a JSON object (torchrun's output); None."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def dpbench(model, variant, n):
    doc = load(f"{out}/dpbench_{model}_{re.sub(r'[^A-Za-z0-9._-]', '-', variant)}_g{n}.json")
    summary = doc.get("summary") if isinstance(doc, dict) else None
    return summary if isinstance(summary, dict) else {}


def ddp(model, n):
    doc = load(f"{out}/ddp_{model}_g{n}.json")
    return doc if isinstance(doc, dict) else {}


def cells(rates):
    """Per GPU count: 'items/s (efficiency %)' against the smallest count measured in the list."""
    base_n = min(counts)
    base = rates.get(base_n)
    row = []
    for n in counts:
        rate = rates.get(n)
        if rate is None:
            row.append("-")
        elif base:
            row.append(f"{rate:,.0f} ({100 * (rate / n) / (base / base_n):.1f}%)")
        else:
            row.append(f"{rate:,.0f}")
    return row


def fmt(value, spec):
    value = number(value)
    return format(value, spec) if value is not None else "-"


header = " | ".join(f"{n} GPU{'s' if n > 1 else ''}" for n in counts)
for run in runs:
    model, _, batch = run.partition(":")
    unit = next((dpbench(model, v, n).get("unit") for v in strategies for n in counts
                 if dpbench(model, v, n).get("unit")), None) or next(
        (ddp(model, n).get("unit") for n in counts if ddp(model, n).get("unit")), "items/s")
    against = "" if min(counts) == 1 else f" against {min(counts)} GPUs"
    print(f"\n### {model}, batch {batch} per GPU: {unit} (scaling efficiency{against})\n")
    print(f"| strategy | {header} |")
    print("|---|" + "--:|" * len(counts))
    for variant in strategies:
        rates = {n: number(dpbench(model, variant, n).get("items_per_sec")) for n in counts}
        print(f"| {variant} | " + " | ".join(cells({n: r for n, r in rates.items() if r})) + " |")
    rates = {n: number(ddp(model, n).get("items_per_sec")) for n in counts}
    print("| PyTorch DDP | " + " | ".join(cells({n: r for n, r in rates.items() if r})) + " |")

print("\n### dpbench communication per run (summary.comm)\n")
print("| model | strategy | GPUs | exchange | bytes sent / device / step | messages / step | algbw GB/s | busbw GB/s "
      "| exposed comm ms / step | kernels / step | param_norm |")
print("|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|")
for run in runs:
    model = run.partition(":")[0]
    for variant in strategies:
        for n in counts:
            s = dpbench(model, variant, n)
            if not s:
                continue
            comm = s.get("comm") if isinstance(s.get("comm"), dict) else {}
            print(f"| {model} | {variant} | {n} | {comm.get('exchange', '-')} "
                  f"| {fmt(comm.get('bytes_sent_per_device_per_step'), ',.0f')} "
                  f"| {fmt(comm.get('collectives_per_step'), ',.0f')} | {fmt(comm.get('algbw_gbps'), '.1f')} "
                  f"| {fmt(comm.get('busbw_gbps'), '.1f')} | {fmt(comm.get('exposed_comm_ms_per_step'), '.3f')} "
                  f"| {fmt(s.get('kernel_launches_per_step'), ',.0f')} "
                  f"| {fmt(s.get('param_norm'), '.6f')} |")


def comm_rows(n):
    """comm_bench's rows: a list of objects, or the first list of objects inside an object."""
    doc = load(f"{out}/comm_bench_g{n}.json")
    if isinstance(doc, dict):
        doc = next((v for k, v in doc.items() if isinstance(v, list)), None)
    if not isinstance(doc, list):
        return {}
    return {int(r["bytes"]): r for r in doc if isinstance(r, dict) and number(r.get("bytes")) is not None}


tables = {n: comm_rows(n) for n in counts if n >= 2}
tables = {n: rows for n, rows in tables.items() if rows}
if tables:
    print("\n### all-reduce bandwidth (dpbench comm_bench): algbw / busbw GB/s\n")
    print("| bytes | " + " | ".join(f"{n} GPUs" for n in tables) + " |")
    print("|--:|" + "--:|" * len(tables))
    for size in sorted(set().union(*tables.values())):
        row = []
        for rows in tables.values():
            r = rows.get(size)
            row.append(f"{fmt(r.get('algbw_gbps'), '.1f')} / {fmt(r.get('busbw_gbps'), '.1f')}" if r else "-")
        label = next((f"{size / 2 ** p:g} {u}" for p, u in ((30, "GiB"), (20, "MiB"), (10, "KiB")) if size >= 2 ** p), f"{size} B")
        print(f"| {label} | " + " | ".join(row) + " |")
PY
