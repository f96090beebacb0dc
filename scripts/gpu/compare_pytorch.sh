#!/usr/bin/env bash
# dpbench against its PyTorch twins (scripts/bench/) on the same GPUs, one after the other.
# `scripts/gpu/compare_pytorch.sh --help` says how.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

usage() {
  cat <<'EOF'
Usage: scripts/gpu/compare_pytorch.sh WORKLOAD OUT_DIR [ENTRY...]

Runs dpbench and the twins one after the other and prints one table: per run dpbench's throughput,
step time, kernels per step and CUDA graph use, each twin's throughput and dpbench / twin (and,
where a run has several GPU counts, the throughput against N x that of the smallest count).
ROUNDS=N (default 1) runs dpbench and its twins N times in turn (not the ddp workload): the table
then gives each side's median, every round's figure and the range of the rounds' ratios, since a
twin's throughput can move by several percent from one run to the next.
Files: OUT_DIR/KEY_gN__dpbench.json and KEY_gN__TWIN.json (the twin's JSON line), with logs;
rounds after the first add __rR to the name (KEY_gN__TWIN__r2.json).

WORKLOAD:
  cnn      ENTRY = MODEL[:BATCH][+--flag=value...] (default resnet50:64), per precision of
           PRECISIONS (default: the entry's --precision, else fp32) and layout of FORMATS (NCHW):
           dpbench on one GPU, then scripts/bench/pytorch_cnn.py per twin of TWINS ("eager
           compiled compiled_graphs"; compiled runs --compile, compiled_graphs torch.compile's
           reduce-overhead mode, which replays CUDA graphs as dpbench does: PyTorch's best where
           a step launches many small kernels). NUM_BATCHES 100, NUM_WARMUP 20. MODEL:BATCH+--forward_only
           compares inference (the twins in eval mode under torch.inference_mode()).
  rnn      ENTRY as cnn (default 'nmt:384 nmt:384+--encoder_type=dynamic rnnlm:512'; nmt runs
           cudnn_lstm, bi), per precision of PRECISIONS (default: the entry's --precision, else
           tf32; bf16 and fp16: the twin runs PyTorch AMP); twin scripts/bench/pytorch_rnn.py
           (TWINS=eager). NUM_BATCHES 40, NUM_WARMUP 10.
  transformer  ENTRY as cnn (default nmt:128+--encoder_type=transformer), per precision of
           PRECISIONS (default: the entry's --precision, else fp32); twin
           scripts/bench/pytorch_transformer.py (nn.Transformer, its attention through
           F.scaled_dot_product_attention; TWINS "eager compiled"; bf16 and fp16: PyTorch AMP).
           NUM_BATCHES 40, NUM_WARMUP 10.
  gpt      ENTRY as cnn (default 'gpt:16 gpt:8+--gpt_size=350m gpt:4+--gpt_size=774m'), per
           precision of PRECISIONS (default: the entry's --precision, else bf16); twin
           scripts/bench/pytorch_gpt.py (GPT-2 as dpbench builds it, attention through
           F.scaled_dot_product_attention, fused AdamW; TWINS "eager compiled"; bf16 and fp16:
           PyTorch AMP). The table adds dpbench's MFU and each twin's. NUM_BATCHES 30, NUM_WARMUP 10.
  trivial  ENTRY = GPU counts (default 1 2 4): trivial, independent, BATCH (64) per GPU, long runs
           so fixed costs do not blur the ratio; twin scripts/bench/pytorch_trivial.py (TWINS=torch).
           NUM_BATCHES 20000, NUM_WARMUP 200.
  ddp      ENTRY as cnn (default resnet50:64), per precision and layout as cnn (nmt, rnnlm: as rnn;
           gpt: bf16 by default, e.g. gpt:16 or gpt:1+--num_layers=32+--hidden_size=4096+--num_heads=32):
           scripts/sweep.sh once over GPUS ("1 2 4") x STRATEGIES (sweep tokens, default
           'independent;replicated:nccl;parameter_server:gpu'; gpt: 'replicated:nccl;
           replicated:nccl+--sharded_update=true;fully_sharded;
           fully_sharded+--reshard_after_forward=false;parameter_server:gpu'), then on each count
           the twins of TWINS under torchrun (default ddp; gpt: "ddp fsdp fsdp_keep"): ddp
           scripts/bench/pytorch_ddp.py (DistributedDataParallel), fsdp scripts/bench/pytorch_fsdp.py
           (FSDP2, --reshard_after_forward true, against fully_sharded) and fsdp_keep the same with
           --reshard_after_forward false (against fully_sharded+--reshard_after_forward=false); a
           second table sets each twin beside the strategy it mirrors (ddp: replicated:nccl). Last
           `dpbench comm_bench`'s all-reduce table on each count of 2 or more (COMM_BENCH=0:
           none). NUM_BATCHES 50, NUM_WARMUP 10.
TWINS="" runs dpbench alone. Each twin gets the flags of its run that it accepts.
Environment: DPBENCH_FLAGS (extra flags for every dpbench run, e.g. --cuda_graph=false),
DPBENCH_BUILD_DIR (build), DPBENCH_DEVICE (gpu; cpu: the reference backend, with TWINS="", for a
dry check).
e.g. compare_pytorch.sh cnn /tmp/cnn resnet50:64 resnet50:128 inception3:64 vgg16:64   (FORMATS="NCHW NHWC")
     compare_pytorch.sh ddp /tmp/ddp resnet50:64 nmt:384
     compare_pytorch.sh ddp /tmp/ddp_gpt gpt:16   (dpbench's strategies against PyTorch DDP and FSDP2)
     PRECISIONS=bf16 compare_pytorch.sh rnn /tmp/rnn_bf16   (or one entry: nmt:384+--precision=bf16)
     compare_pytorch.sh gpt /tmp/gpt gpt:16 gpt:8+--seq_len=2048
EOF
}

case ${1:-} in -h | --help) usage; exit 0 ;; esac
(($# >= 2)) || { usage >&2; exit 2; }
workload=$1 out=$2
shift 2
entries=("$@")
build=${DPBENCH_BUILD_DIR:-build}
dpbench=$build/dpbench
device=${DPBENCH_DEVICE:-gpu}
read -r -a dpbench_flags <<<"${DPBENCH_FLAGS:-}"
case $workload in
  cnn) default_entries=(resnet50:64) twins=${TWINS-eager compiled compiled_graphs} batches=100 warmup=20
    twin_scripts=(scripts/bench/pytorch_cnn.py) ;;
  rnn) default_entries=(nmt:384 nmt:384+--encoder_type=dynamic rnnlm:512) twins=${TWINS-eager} batches=40 warmup=10
    twin_scripts=(scripts/bench/pytorch_rnn.py) ;;
  transformer) default_entries=(nmt:128+--encoder_type=transformer) twins=${TWINS-eager compiled} batches=40
    warmup=10 twin_scripts=(scripts/bench/pytorch_transformer.py) ;;
  gpt) default_entries=(gpt:16 gpt:8+--gpt_size=350m gpt:4+--gpt_size=774m) twins=${TWINS-eager compiled} batches=30
    warmup=10 twin_scripts=(scripts/bench/pytorch_gpt.py) ;;
  trivial) default_entries=(1 2 4) twins=${TWINS-torch} batches=20000 warmup=200
    twin_scripts=(scripts/bench/pytorch_trivial.py) ;;
  ddp) default_entries=(resnet50:64) twins=${TWINS-ddp} batches=50 warmup=10
    # The DDP twin takes the flags of the single-GPU twins it imports its models from; the FSDP2
    # twin (gpt only) its own, looked up on it alone in twin().
    twin_scripts=(scripts/bench/pytorch_ddp.py scripts/bench/pytorch_rnn.py scripts/bench/pytorch_gpt.py
      scripts/bench/pytorch_fsdp.py) ;;
  *) echo "compare_pytorch.sh: unknown workload '$workload' (cnn, rnn, transformer, gpt, trivial, ddp; see --help)" >&2; exit 2 ;;
esac
((${#entries[@]})) || entries=("${default_entries[@]}")
steps=(--num_batches="${NUM_BATCHES:-$batches}" --num_warmup_batches="${NUM_WARMUP:-$warmup}")
rounds=${ROUNDS:-1}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "compare_pytorch.sh: ROUNDS must be a positive whole number, not '$rounds'" >&2; exit 2; }
if [ "$workload" = ddp ] && ((rounds > 1)); then
  echo "compare_pytorch.sh: ROUNDS is for cnn, rnn, transformer, gpt and trivial (ddp runs the sweep once)" >&2; exit 2
fi
mkdir -p "$out"
# shellcheck source=scripts/gpu/common.sh
source scripts/gpu/common.sh "$dpbench" >/dev/null
status=0

run() {  # file name (without .json), then the command; its output goes to the file (a twin's JSON line)
  local name=$1
  shift
  "$@" >"$out/$name.json" 2>"$out/$name.log" || { echo "$name failed: $(tail -n 1 "$out/$name.log")"; status=1; }
}
run_dpbench() {  # file name, then dpbench flags
  local name=$1
  shift
  echo "== dpbench $name"
  local args
  mapfile -t args < <(last_of_each --device="$device" "$@" "${steps[@]}" --display_every=1000 "${dpbench_flags[@]}")
  "$dpbench" "${args[@]}" --result_file="$out/$name.json" >"$out/$name.log" 2>&1 || { echo "$name failed: $(tail -n 1 "$out/$name.log")"; status=1; }
}
twin() {  # file name, twin, GPU count, then the run's flags
  local name=$1 which=$2 n=$3 accepted=() scripts=("${twin_scripts[@]}")
  shift 3
  # A flag only pytorch_fsdp.py takes (--shard_group_size, ...) would stop pytorch_ddp.py, and the
  # other way round: each torchrun twin gets the flags of the scripts it reads them from.
  case $which in
    ddp) mapfile -t scripts < <(printf '%s\n' "${twin_scripts[@]}" | grep -v pytorch_fsdp.py) ;;
    fsdp | fsdp_keep) scripts=(scripts/bench/pytorch_fsdp.py) ;;
  esac
  mapfile -t accepted < <(twin_flags "${scripts[@]}" -- "$@")
  echo "== PyTorch $which $name"
  case $which in
    eager) run "$name" python3 -W ignore "${twin_scripts[0]}" "${accepted[@]}" "${steps[@]}" ;;
    compiled) run "$name" python3 -W ignore "${twin_scripts[0]}" "${accepted[@]}" "${steps[@]}" --compile ;;
    compiled_graphs)
      if [ "$workload" = cnn ]; then
        run "$name" python3 -W ignore "${twin_scripts[0]}" "${accepted[@]}" "${steps[@]}" --compile_mode=reduce-overhead
      else
        echo "compare_pytorch.sh: the compiled_graphs twin is for cnn only" >&2; status=1
      fi ;;
    torch) run "$name" python3 -W ignore "${twin_scripts[0]}" --num_gpus="$n" "${accepted[@]}" "${steps[@]}" ;;
    ddp) run "$name" env PYTHONWARNINGS=ignore python3 -m torch.distributed.run --standalone --nproc_per_node="$n" \
      "${twin_scripts[0]}" "${accepted[@]}" "${steps[@]}" ;;
    fsdp | fsdp_keep)
      if [ "$workload" != ddp ] || ! printf '%s\n' "$@" | grep -qx -- --model=gpt; then
        echo "compare_pytorch.sh: the $which twin is for gpt in the ddp workload only" >&2; status=1; return
      fi
      local reshard=true
      [ "$which" = fsdp_keep ] && reshard=false
      run "$name" env PYTHONWARNINGS=ignore python3 -m torch.distributed.run --standalone --nproc_per_node="$n" \
        scripts/bench/pytorch_fsdp.py "${accepted[@]}" "${steps[@]}" --reshard_after_forward="$reshard" ;;
    *) echo "compare_pytorch.sh: no twin '$which' for $workload" >&2; status=1 ;;
  esac
}
run_rounds() {  # KEY (without __WHO), GPU count, dpbench's flags, --, the twins' flags: ROUNDS rounds in turn
  local key=$1 n=$2 mine=() theirs=() round suffix which
  shift 2
  while (($#)) && [ "$1" != -- ]; do mine+=("$1"); shift; done
  (($#)) && shift
  theirs=("$@")
  for ((round = 1; round <= rounds; round++)); do
    suffix=""
    ((round > 1)) && suffix=__r$round
    run_dpbench "${key}__dpbench$suffix" "${mine[@]}"
    for which in $twins; do twin "${key}__$which$suffix" "$which" "$n" "${theirs[@]}"; done
  done
}

if [ "$workload" = trivial ]; then
  batch=${BATCH:-64}
  for n in "${entries[@]}"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "compare_pytorch.sh: trivial takes GPU counts, not '$n'" >&2; exit 2; }
    run_rounds "trivial_b${batch}_g${n}" "$n" --model=trivial --variable_update=independent --num_gpus="$n" \
      --batch_size="$batch" -- --batch_size="$batch"
  done
else
  for entry in "${entries[@]}"; do parse_entry "$entry" || exit 2; done
  read -r -a counts <<<"${GPUS:-1 2 4}"
  for entry in "${entries[@]}"; do
    parse_entry "$entry"
    # PRECISIONS, else the entry's own --precision (model_flags' default unless the entry gives one).
    precisions=${PRECISIONS:-$(printf '%s\n' "${entry_flags[@]}" | grep -o '^--precision=[a-z0-9]*' | cut -d= -f2)}
    precisions=${precisions:-fp32}
    formats=${FORMATS:-NCHW}
    case $entry_model in nmt | rnnlm | gpt) formats=- ;; esac
    for precision in $precisions; do
      for format in $formats; do
        mapfile -t flags < <(last_of_each --model="$entry_model" "${entry_flags[@]}" --precision="$precision")
        key=${entry_tag}_$precision
        [ "$format" = - ] || { flags+=(--data_format="$format"); key+=_$format; }
        if [ "$workload" != ddp ]; then
          run_rounds "${key}_g1" 1 "${flags[@]}" -- "${flags[@]}"
          continue
        fi
        strategies=${STRATEGIES:-independent;replicated:nccl;parameter_server:gpu} run_twins=$twins
        if [ "$entry_model" = gpt ]; then
          # gpt's strategies are those its twins mirror, DDP's (also with the update sharded) and
          # FSDP2's resharding after the forward or keeping the parameters, and the parameter server.
          strategies="replicated:nccl;replicated:nccl+--sharded_update=true;fully_sharded"
          strategies=${STRATEGIES:-$strategies;fully_sharded+--reshard_after_forward=false;parameter_server:gpu}
          run_twins=${TWINS-ddp fsdp fsdp_keep}
        fi
        echo "== dpbench $key: sweep over ${counts[*]} GPUs"
        mapfile -t sweep_flags < <(last_of_each --device="$device" "${flags[@]:1}" "${steps[@]}" --display_every=1000 \
          "${dpbench_flags[@]}")
        bash scripts/sweep.sh --dpbench="$dpbench" --models="$entry_model" --gpus="$(IFS=,; echo "${counts[*]}")" \
          --strategies="$strategies" --out="$out/$key" --no-report \
          -- "${sweep_flags[@]}" || status=1
        for n in "${counts[@]}"; do
          for which in $run_twins; do twin "${key}_g${n}__$which" "$which" "$n" "${flags[@]}"; done
        done
      done
    done
  done
  if [ "$workload" = ddp ] && [ "${COMM_BENCH:-1}" != 0 ]; then
    for n in "${counts[@]}"; do
      ((n >= 2)) || continue
      echo "== comm_bench, $n GPUs"
      "$dpbench" comm_bench --device="$device" --num_gpus="$n" --min_bytes=1M --max_bytes=1G --json "$out/comm_bench_g$n.json" \
        >"$out/comm_bench_g$n.log" 2>&1 || { echo "comm_bench on $n GPUs failed: $(tail -n 1 "$out/comm_bench_g$n.log")"; status=1; }
    done
  fi
fi

gpu_table twins "$out"
for log in "$out"/comm_bench_g*.log; do
  [ -e "$log" ] && { echo; echo "${log##*/}:"; cat "$log"; }
done
exit $status
