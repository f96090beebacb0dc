#!/usr/bin/env bash
# The sweep behind docs/RESULTS.md: every model of the seed tables on 1, 2 and 4 GPUs (or the
# counts given) under independent, parameter_server (cpu, gpu) and replicated (nccl, xring), one
# scripts/sweep.sh call per model group (nmt's two encoders need different flags, so they get
# folders of their own), then one `dpbench report` over all of them with plots.
# Usage: scripts/gpu/results_sweep.sh OUT_DIR [GPU_COUNTS]     e.g. ... /tmp/results 1,2,4
# Environment: SWEEP_GROUPS (default "cnn nmt_cudnn_lstm nmt_dynamic rnnlm": run a subset, e.g. to split
#   the sweep over two calls; results already present are skipped), NUM_BATCHES (20, as the seed
#   tables' "time to process 20 batches"), NUM_WARMUP (5), STRATEGIES (';'-separated sweep tokens).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: results_sweep.sh OUT_DIR [GPU_COUNTS]}
counts=${2:-1,2,4}
# shellcheck source=scripts/gpu/env.sh
source scripts/gpu/env.sh build/dpbench >/dev/null
export NCCL_NVLS_ENABLE=0
strategies=${STRATEGIES:-"independent;parameter_server:cpu;parameter_server:gpu;replicated:nccl;replicated:xring"}
common=(--device=gpu --num_batches="${NUM_BATCHES:-20}" --num_warmup_batches="${NUM_WARMUP:-5}" --display_every=1000)

sweep_group() {  # group name, models, then dpbench flags
  local group=$1 models=$2; shift 2
  echo "== $group: $models on $counts GPUs"
  bash scripts/sweep.sh --models="$models" --gpus="$counts" --strategies="$strategies" --out="$out/$group" \
    --no-report -- "${common[@]}" "$@"
}

for group in ${SWEEP_GROUPS:-cnn nmt_cudnn_lstm nmt_dynamic rnnlm}; do
  case $group in
    cnn) sweep_group cnn resnet50,inception3,vgg16 --precision=fp32 ;;
    nmt_cudnn_lstm) sweep_group nmt_cudnn_lstm nmt --batch_size=384 --encoder_type=cudnn_lstm --direction=bi --precision=tf32 ;;
    nmt_dynamic) sweep_group nmt_dynamic nmt --batch_size=384 --encoder_type=dynamic --direction=bi --precision=tf32 ;;
    rnnlm) sweep_group rnnlm rnnlm --precision=tf32 ;;
    *) echo "results_sweep: unknown group '$group' (cnn, nmt_cudnn_lstm, nmt_dynamic, rnnlm)" >&2; exit 2 ;;
  esac
done
./build/dpbench report "$out" --output "$out/REPORT.md" --plots "$out/plots" \
  || echo "results_sweep: dpbench report failed (see above)"
