#!/usr/bin/env bash
# Repeated, interleaved A/B of synchronisation strategies or flag sets on one build.
# `scripts/gpu/compare_variants.sh --help` says how.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

usage() {
  cat <<'EOF'
Usage: scripts/gpu/compare_variants.sh OUT_DIR [options] [-- DPBENCH_FLAGS...]

Per model entry, one `scripts/sweep.sh --rounds=K` over GPU counts x strategy tokens: every
combination once, then all again, K times, so a machine's slow drift falls on each alike. Then one
table per entry (median over the rounds, min-max, efficiency against the 1-GPU independent run,
step time, the --columns asked for); sweep.sh writes `dpbench report`'s REPORT.md and plots into
every folder it ran (OUT_DIR/ENTRY/SETTING).

Options:
  --models='ENTRY ...'  MODEL[:BATCH][+--flag=value...] (default resnet50:64); each model runs with
                        its defaults here (nmt: cudnn_lstm, bi, tf32; rnnlm: tf32; CNNs: fp32),
                        then the entry's flags, e.g. nmt:384+--encoder_type=dynamic
  --strategies=TOKENS   scripts/sweep.sh strategy tokens, ';'-separated (default
                        'independent;replicated:nccl'); a flag set is a token with +--flags, e.g.
                        'replicated:nccl+--compact_gradient_transfer=bf16'. 'all' stands for
                        independent, replicated nccl (with and without overlap), xring, psgpu,
                        pscpu, parameter_server cpu and gpu. distributed_all_reduce, horovod and
                        distributed_replicated run under mpirun (one process per GPU) in a sweep
                        of their own after the others: not interleaved with them.
  --gpus=LIST           comma-separated GPU counts (default 1,4)
  --rounds=K            (default 3, as docs/RESULTS.md's sweep; 1 for a single pass)
  --env=NAME:VAR=V[,VAR=V...]   also run every combination with these environment variables, in
                        a sweep of its own (OUT_DIR/ENTRY/NAME) after the default one (repeatable)
  --each-gpu-alone      first the 1-GPU independent run on each GPU of the largest count alone
                        (the table adds efficiency against the slowest of them)
  --columns=LIST        extra table columns, comma-separated: comm (exposed comm, transfer time,
                        busbw, kernels/step), telemetry (SM clock, power-capped share, energy per
                        item), data (feed, data wait, steps/s)
  --data=DIR            first write CIFAR-format data (DIR/cifar) and a parallel corpus (DIR/nmt)
                        for entries with +--data_dir=DIR/cifar or DIR/nmt
  --dry-run             print the sweeps' commands, run nothing
DPBENCH_FLAGS go to every run after --device=gpu --num_batches=50 --num_warmup_batches=10
--display_every=1000 (a flag given there replaces the default). Environment: DPBENCH_BUILD_DIR (build),
DPBENCH_DEVICE (gpu; cpu: the reference backend, for a dry check).

Examples:
  # every strategy side by side on 4 GPUs, one pass
  compare_variants.sh OUT --models='resnet50:64 nmt:384' --strategies=all --rounds=1 --columns=comm
  # near-noise scaling claims: each GPU alone, then three rounds, with clocks and energy
  compare_variants.sh OUT --models='nmt:384 resnet50:64' --each-gpu-alone --columns=telemetry
  # exchange variants: flags as tokens, NCCL settings as --env
  compare_variants.sh OUT --models=nmt:384 --rounds=2 --strategies='independent;replicated:nccl;replicated:nccl+--compact_gradient_transfer=bf16' --env=cta1:NCCL_CTA_POLICY=1 --columns=comm
  # one command, repeated: the run-to-run spread
  compare_variants.sh OUT --models=resnet50:64 --strategies=independent --gpus=1 --rounds=5
  # data feeding: on-device data, host feeding with prefetch, synchronous host feeding
  compare_variants.sh OUT --data=/tmp/data --models='cifar10_cnn:128+--data_dir=/tmp/data/cifar nmt:384+--data_dir=/tmp/data/nmt' --rounds=1 --columns=data \
    --strategies='replicated+--data_feed=on_device;replicated+--data_feed=host;replicated+--data_feed=host+--prefetch_data_to_device=false'
  # one process for N GPUs against one process per GPU
  compare_variants.sh OUT --models='resnet50:64 nmt:384' --gpus=4 --strategies='replicated:nccl;distributed_all_reduce;distributed_replicated'
  # docs/RESULTS.md's sweep
  compare_variants.sh OUT --models='resnet50:64 inception3:64 vgg16:64 nmt:384 nmt:384+--encoder_type=dynamic rnnlm' --gpus=1,2,4 --rounds=3 \
    --strategies='independent;parameter_server:cpu;parameter_server:gpu;replicated:nccl;replicated:xring' -- --num_batches=20 --num_warmup_batches=5
EOF
}

all='independent;replicated:nccl;replicated:nccl+--overlap_comm=false;replicated:xring;replicated:psgpu;replicated:pscpu;parameter_server:cpu;parameter_server:gpu'
out="" entries=resnet50:64 strategies='independent;replicated:nccl' gpus=1,4 rounds=3 alone=0 columns=""
data="" dry_run=() envs=() flags=()
die() { echo "compare_variants.sh: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --) shift; flags=("$@"); break ;;
    --models=*) entries=${1#*=} ;;
    --strategies=*) strategies=${1#*=} ;;
    --gpus=*) gpus=${1#*=} ;;
    --rounds=*) rounds=${1#*=} ;;
    --env=*) envs+=("${1#*=}") ;;
    --each-gpu-alone) alone=1 ;;
    --columns=*) columns=${1#*=} ;;
    --data=*) data=${1#*=} ;;
    --dry-run) dry_run=(--dry-run) ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [ -z "$out" ] || die "unexpected argument '$1' (dpbench flags go after --)"; out=$1 ;;
  esac
  shift
done
[ -n "$out" ] || { usage >&2; exit 2; }
[ "$strategies" = all ] && strategies=$all
[[ $columns =~ ^((comm|telemetry|data)(,|$))*$ ]] || die "--columns=$columns: accepted: comm, telemetry, data"
for setting in "${envs[@]}"; do
  [[ $setting =~ ^[A-Za-z0-9_.-]+:[A-Za-z_][A-Za-z0-9_]*=[^,]*(,[A-Za-z_][A-Za-z0-9_]*=[^,]*)*$ ]] ||
    die "--env=$setting is not NAME:VAR=V[,VAR=V...]"
done

build=${DPBENCH_BUILD_DIR:-build}
dpbench=$build/dpbench
device=${DPBENCH_DEVICE:-gpu}
mkdir -p "$out"
# shellcheck source=scripts/gpu/common.sh
source scripts/gpu/common.sh "$dpbench" >/dev/null

# The tokens that run one process per GPU go to a sweep under mpirun (sweep.sh's --launcher).
local_tokens="" mpi_tokens=""
IFS=$';\n' read -r -d '' -a tokens <<<"$strategies"
for token in "${tokens[@]}"; do
  token=${token//[[:space:]]/}
  [ -n "$token" ] || continue
  # dpbench says how a strategy runs (its description's process layout, first on the line).
  layout=$("$dpbench" strategies --sweep_token="${token%%+*}" 2>&1) || die "${layout#dpbench: error: }"
  case ${layout%%$'\t'*} in
    one_process_per_gpu) mpi_tokens+="${mpi_tokens:+;}$token" ;;
    *) local_tokens+="${local_tokens:+;}$token" ;;
  esac
done
[ -n "$local_tokens$mpi_tokens" ] || die "--strategies names no strategy"

[ -z "$data" ] || [ ${#dry_run[@]} -gt 0 ] || { echo "== writing test data into $data"; write_test_data "$data" || exit 1; }

common=(--device="$device" --num_batches=50 --num_warmup_batches=10 --display_every=1000)
status=0
sweep() {  # folder, environment assignments (comma-separated, may be empty), then sweep.sh options
  local run_flags
  mapfile -t run_flags < <(last_of_each "${common[@]}" "${entry_flags[@]}" "${flags[@]}")
  local folder=$1 assignments=$2 pass=() mpirun_args="--bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH"
  shift 2
  [ -z "$assignments" ] || IFS=, read -r -a pass <<<"$assignments"
  local word
  for word in "${pass[@]}"; do mpirun_args+=" -x ${word%%=*}"; done
  env "${pass[@]}" MPIRUN_ARGS="$mpirun_args" bash scripts/sweep.sh --dpbench="$dpbench" --out="$folder" \
    "${dry_run[@]}" "$@" -- "${run_flags[@]}" || status=1
}

read -r -a entry_list <<<"$entries"
for entry in "${entry_list[@]}"; do parse_entry "$entry" || exit 2; done
largest=$(tr , '\n' <<<"$gpus" | sort -n | tail -n 1)
for entry in "${entry_list[@]}"; do
  parse_entry "$entry"
  if ((alone)); then
    for ((gpu = 0; gpu < largest; gpu++)); do
      echo "== $entry alone on GPU $gpu"
      CUDA_VISIBLE_DEVICES=$gpu sweep "$out/$entry_tag/alone-gpu$gpu" "" --models="$entry_model" --gpus=1 \
        --strategies=independent --no-report
    done
  fi
  for setting in default "${envs[@]}"; do
    name=${setting%%:*} assignments=""
    [ "$setting" = default ] || assignments=${setting#*:}
    echo "== $entry, ${assignments:-default environment}: $gpus GPUs, $rounds rounds"
    [ -z "$local_tokens" ] || sweep "$out/$entry_tag/$name" "$assignments" --models="$entry_model" \
      --gpus="$gpus" --strategies="$local_tokens" --rounds="$rounds"
    [ -z "$mpi_tokens" ] || sweep "$out/$entry_tag/$name" "$assignments" --models="$entry_model" \
      --gpus="$gpus" --strategies="$mpi_tokens" --rounds="$rounds" --launcher=mpirun
  done
done
[ ${#dry_run[@]} -gt 0 ] || gpu_table variants "$out" "$columns"
exit $status
