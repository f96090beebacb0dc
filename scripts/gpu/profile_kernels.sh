#!/usr/bin/env bash
# Where a step's GPU time goes: one measured step of dpbench and of its PyTorch twin under Nsight
# Compute (kernel durations only; every launch timed on its own, clocks left alone), summed by
# kernel family. Usage on the GPU machine:
#   scripts/gpu/profile_kernels.sh OUT_DIR MODEL BATCH PRECISION FORMAT [FLAG...]
# e.g. scripts/gpu/profile_kernels.sh /tmp/prof resnet50 64 tf32 NHWC
#      scripts/gpu/profile_kernels.sh /tmp/prof nmt 384 bf16 - --encoder_type=cudnn_lstm --direction=bi
#      scripts/gpu/profile_kernels.sh /tmp/prof nmt 128 tf32 - --encoder_type=transformer
#      scripts/gpu/profile_kernels.sh /tmp/prof gpt 16 bf16 - --gpt_size=124m
# nmt and rnnlm (FORMAT ignored) run against scripts/bench/pytorch_rnn.py, the Transformer against
# scripts/bench/pytorch_transformer.py, gpt against scripts/bench/pytorch_gpt.py (eager;
# TWIN_FLAGS=--compile for the compiled twins); FLAGs go to both.
# Environment: DPBENCH_BUILD_DIR (build), TWIN_FLAGS (extra flags for the twin alone).
set -uo pipefail
case ${1:-} in -h | --help) sed -n '2,/^set /s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: profile_kernels.sh OUT_DIR MODEL BATCH PRECISION FORMAT}
model=${2:-resnet50}
batch=${3:-64}
precision=${4:-tf32}
format=${5:-NCHW}
shift $(($# < 5 ? $# : 5))
extra=("$@")
mkdir -p "$out"
dpbench=${DPBENCH_BUILD_DIR:-build}/dpbench
# shellcheck source=scripts/gpu/common.sh
source scripts/gpu/common.sh "$dpbench" >/dev/null
ncu=$(command -v ncu)
for candidate in /opt/nvidia/nsight-compute/*/ncu; do
  [ -n "$ncu" ] || [ ! -x "$candidate" ] || ncu=$candidate
done
[ -n "$ncu" ] || { echo "profile_kernels.sh: ncu (Nsight Compute) not found" >&2; exit 1; }
case " ${extra[*]} " in *" --encoder_type=transformer "*) transformer=1 ;; *) transformer=0 ;; esac
case $model in
  nmt) twin=scripts/bench/pytorch_rnn.py layout=() format=seq
       [ "$transformer" = 1 ] && twin=scripts/bench/pytorch_transformer.py format=transformer ;;
  rnnlm) twin=scripts/bench/pytorch_rnn.py layout=() format=seq ;;
  gpt) twin=scripts/bench/pytorch_gpt.py layout=() format=seq ;;
  *) twin=scripts/bench/pytorch_cnn.py layout=(--data_format="$format") ;;
esac
tag="${model}_b${batch}_${precision}_${format}"
ncu_args=(--clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv)
# Without CUDA graphs, so that each kernel is its own launch.
"$ncu" "${ncu_args[@]}" "$dpbench" --device=gpu --model="$model" --batch_size="$batch" \
  --precision="$precision" "${layout[@]}" "${extra[@]}" --num_batches=2 --num_warmup_batches=3 \
  --cuda_graph=false --profile_step=2 --result_file= > "$out/ncu_dpbench_$tag.csv" 2> "$out/ncu_dpbench_$tag.err"
# shellcheck disable=SC2086  # TWIN_FLAGS: words for the twin alone
"$ncu" "${ncu_args[@]}" python3 -W ignore "$twin" --model="$model" --batch_size="$batch" \
  --precision="$precision" "${layout[@]}" "${extra[@]}" ${TWIN_FLAGS:-} --num_batches=2 --num_warmup_batches=3 \
  --profile_step=1 > "$out/ncu_pytorch_$tag.csv" 2> "$out/ncu_pytorch_$tag.err"
gpu_table kernels "$out" "$tag"
