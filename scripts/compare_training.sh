#!/usr/bin/env bash
# Do two builds of dpbench train alike? Runs every strategy variant on the reference backend with
# --deterministic, on 1, 2 and 4 devices, with both binaries, and compares the final param_norm
# bit for bit (the JSON's shortest round-trip text). For a change that must not alter what is
# computed (a refactor): prints one line per run and exits 1 if any pair differs or fails.
# Usage: scripts/compare_training.sh BINARY_BEFORE BINARY_AFTER [OUT_DIR]
set -uo pipefail
usage="usage: compare_training.sh BINARY_BEFORE BINARY_AFTER [OUT_DIR]"
before=${1:?$usage} after=${2:?$usage}
out=${3:-$(mktemp -d)}
mkdir -p "$out"

models=(
  "--model=trivial --num_batches=6 --num_warmup_batches=2"
  "--model=rnnlm --vocab_size=97 --embedding_dim=8 --num_units=16 --seq_len=6 --batch_size=4 --num_batches=4 --num_warmup_batches=1"
)
strategies=(
  "--variable_update=independent"
  "--variable_update=replicated --all_reduce_spec=nccl"
  "--variable_update=replicated --all_reduce_spec=xring"
  "--variable_update=replicated --all_reduce_spec=pscpu"
  "--variable_update=replicated --all_reduce_spec=psgpu#2"
  "--variable_update=replicated --sharded_update=true"
  "--variable_update=replicated --compact_gradient_transfer=bf16"
  "--variable_update=parameter_server --local_parameter_device=gpu"
  "--variable_update=parameter_server --local_parameter_device=cpu"
)

param_norm() {  # the param_norm member of a result file, as written
  python3 -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["summary"]["param_norm"]))' "$1" 2>/dev/null
}

runs=0 differing=0
for model in "${models[@]}"; do
  for strategy in "${strategies[@]}"; do
    for gpus in 1 2 4; do
      runs=$((runs + 1))
      norms=()
      for side in before after; do
        binary=$before
        [ "$side" = after ] && binary=$after
        file="$out/run${runs}_$side.json"
        # shellcheck disable=SC2086  # each entry is a list of flags
        if ! "$binary" --device=cpu --deterministic=true --num_gpus="$gpus" $model $strategy \
          --display_every=1000 --result_file="$file" >"$out/run${runs}_$side.log" 2>&1; then
          norms+=("failed: $(tail -n 1 "$out/run${runs}_$side.log")")
        else
          norms+=("$(param_norm "$file")")
        fi
      done
      verdict=same
      if [ "${norms[0]}" != "${norms[1]}" ] || [[ "${norms[0]}" == failed* ]]; then
        verdict=DIFFERENT
        differing=$((differing + 1))
      fi
      printf '%-9s %s %s x%d: %s | %s\n' "$verdict" "${model%% *}" "$strategy" "$gpus" "${norms[0]}" "${norms[1]}"
    done
  done
done
echo "$((runs - differing)) of $runs runs train alike (param_norm bit-equal); files in $out"
[ "$differing" -eq 0 ]
