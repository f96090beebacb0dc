#!/usr/bin/env bash
# scripts/gpu/compare_pytorch.sh without a GPU: ROUNDS=2 on the reference backend with no twin (two
# dpbench results, the table's median and each round's figure), the twins table over made-up
# results of two rounds (medians, each round's figure, the rounds' ratios paired by round), its MFU
# columns where a twin gives an mfu, its memory columns where a twin gives its allocator's peak, and
# the table of the torchrun twins beside the sweep's strategies they mirror (ddp: replicated:nccl,
# fsdp: fully_sharded, fsdp_keep: fully_sharded+--reshard_after_forward=false), and the errors for a
# bad ROUNDS.
# Usage: test_compare_pytorch.sh DPBENCH
set -uo pipefail
dpbench=${1:?usage: test_compare_pytorch.sh DPBENCH}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/scripts/result_checks.sh
source "$(dirname "$0")/result_checks.sh"
build=$(dirname "$dpbench")

DPBENCH_BUILD_DIR=$build DPBENCH_DEVICE=cpu TWINS="" ROUNDS=2 NUM_BATCHES=4 NUM_WARMUP=1 \
  bash "$root/scripts/gpu/compare_pytorch.sh" cnn "$work/dry" trivial:8 >"$work/dry.txt" 2>&1 ||
  fail "ROUNDS=2 on the reference backend: exit code $?: $(tail -n 3 "$work/dry.txt")"
for f in trivial_b8_fp32_NCHW_g1__dpbench.json trivial_b8_fp32_NCHW_g1__dpbench__r2.json; do
  [ -s "$work/dry/$f" ] || fail "ROUNDS=2: no $f: $(ls "$work/dry" 2>&1)"
done
# One row for the two rounds: the median, then both rounds' figures in parentheses.
grep -Eq '^\| trivial_b8_fp32_NCHW \| 1 \| - \| [0-9,]+ \([0-9,]+, [0-9,]+\)' "$work/dry.txt" ||
  fail "ROUNDS=2: no row with the median and both rounds: $(cat "$work/dry.txt")"

# Made-up results: dpbench 100 and 120 items/s, the twin 90 (round 1, a result file) and 100 (round 2,
# the JSON line a twin prints after its log); round 3 of dpbench has no twin to pair with.
mkdir -p "$work/twins"
summary() { echo "{\"summary\": {\"items_per_sec\": $1, \"step_time_ms\": {\"median\": $2}, \"cuda_graph\": true}}"; }
summary 100 10 >"$work/twins/m_g1__dpbench.json"
summary 120 8 >"$work/twins/m_g1__dpbench__r2.json"
summary 110 9 >"$work/twins/m_g1__dpbench__r3.json"
summary 90 11 >"$work/twins/m_g1__compiled.json"
{ echo "compiling..."; echo '{"items_per_sec": 100}'; } >"$work/twins/m_g1__compiled__r2.json"
table=$(bash -c 'source "$1/scripts/gpu/common.sh" /nonexistent >/dev/null 2>&1; gpu_table twins "$2"' _ "$root" "$work/twins")
echo "$table" | grep -q "rounds' dpbench / compiled" || fail "twins table: no column of the rounds' ratios: $table"
# dpbench: median of 100, 120, 110 = 110; the twin: median of 90 and 100 = 95; 110 / 95 = 1.16x;
# round 1 100/90 = 1.11x, round 2 120/100 = 1.20x.
echo "$table" | grep -q '| m | 1 | - | 110 (100, 120, 110) | 9.000 | - | yes | 95 (90, 100) | 1.16x | 1.11x to 1.20x |' ||
  fail "twins table: the row is not medians, rounds and paired ratios: $table"
echo "$table" | grep -q "MFU" && fail "twins table: MFU columns though no twin gave an mfu: $table"

# A twin that prints an mfu (pytorch_gpt.py) brings MFU columns: dpbench's summary.flops.mfu and the
# twin's own, each the median over the rounds; a twin off the peak table (mfu null) shows "-".
mkdir -p "$work/gpt"
gpt() { echo "{\"summary\": {\"items_per_sec\": $1, \"step_time_ms\": {\"median\": 10}, \"flops\": {\"mfu\": $2}}}"; }
gpt 300000 0.45 >"$work/gpt/gpt_b16_bf16_g1__dpbench.json"
gpt 320000 0.49 >"$work/gpt/gpt_b16_bf16_g1__dpbench__r2.json"
echo '{"items_per_sec": 200000, "mfu": 0.30}' >"$work/gpt/gpt_b16_bf16_g1__compiled.json"
echo '{"items_per_sec": 200000, "mfu": 0.32}' >"$work/gpt/gpt_b16_bf16_g1__compiled__r2.json"
echo '{"items_per_sec": 150000, "mfu": null}' >"$work/gpt/gpt_b8+gpt_size=350m_bf16_g1__compiled.json"
gpt 100000 null >"$work/gpt/gpt_b8+gpt_size=350m_bf16_g1__dpbench.json"
table=$(bash -c 'source "$1/scripts/gpu/common.sh" /nonexistent >/dev/null 2>&1; gpu_table twins "$2"' _ "$root" "$work/gpt")
echo "$table" | grep -q '| CUDA graph | dpbench MFU | compiled items/s | compiled MFU | dpbench / compiled |' ||
  fail "twins table: no MFU columns for a twin with an mfu: $table"
echo "$table" | grep -q '| gpt_b16_bf16 | 1 | - | 310,000 (300,000, 320,000) | 10.000 | - | no | 47.0% | 200,000 (200,000, 200,000) | 31.0% | 1.55x |' ||
  fail "twins table: the MFU columns are not the medians of the rounds: $table"
echo "$table" | grep -q '| gpt_b8+gpt_size=350m_bf16 | 1 | - | 100,000 | 10.000 | - | no | - | 150,000 | - | 0.67x |' ||
  fail "twins table: an mfu of null is not shown as -: $table"

# A twin that prints max_memory_allocated_bytes brings dpbench's summary.memory.peak_bytes beside it,
# each the largest over the rounds, in GiB.
mkdir -p "$work/memory"
echo '{"summary": {"items_per_sec": 100, "memory": {"peak_bytes": 3221225472}}}' >"$work/memory/m_g1__dpbench.json"
echo '{"summary": {"items_per_sec": 100, "memory": {"peak_bytes": 2147483648}}}' >"$work/memory/m_g1__dpbench__r2.json"
echo '{"items_per_sec": 50, "max_memory_allocated_bytes": 4294967296}' >"$work/memory/m_g1__eager.json"
table=$(bash -c 'source "$1/scripts/gpu/common.sh" /nonexistent >/dev/null 2>&1; gpu_table twins "$2"' _ "$root" "$work/memory")
echo "$table" | grep -q '| CUDA graph | dpbench peak GiB | eager items/s | eager max allocated GiB | dpbench / eager |' ||
  fail "twins table: no memory columns for a twin with max_memory_allocated_bytes: $table"
echo "$table" | grep -q '| m | 1 | - | 100 (100, 100) | - | - | no | 3.00 | 50 | 4.00 | 2.00x |' ||
  fail "twins table: the memory columns are not the largest peaks in GiB: $table"
echo "$table" | grep -q "GiB" <<<"$(bash -c 'source "$1/scripts/gpu/common.sh" /nonexistent >/dev/null 2>&1; gpu_table twins "$2"' _ "$root" "$work/gpt")" &&
  fail "twins table: memory columns though no twin gave its peak"

# The ddp workload's folder: a sweep in OUT_DIR/KEY (MODEL__SLUG__Ngpu.json) and the twins' lines
# beside it; each twin is set against its own strategy, parameter_server against none.
mkdir -p "$work/ddp/gpt_b16_bf16"
peak() { echo "{\"summary\": {\"items_per_sec\": $1, \"memory\": {\"peak_bytes\": $2}}}"; }
peak 900 4294967296 >"$work/ddp/gpt_b16_bf16/gpt__replicated-nccl__2gpu.json"
peak 800 2147483648 >"$work/ddp/gpt_b16_bf16/gpt__fully_sharded__2gpu.json"
peak 850 3221225472 >"$work/ddp/gpt_b16_bf16/gpt__fully_sharded+reshard_after_forward=false__2gpu.json"
peak 700 4294967296 >"$work/ddp/gpt_b16_bf16/gpt__parameter_server-gpu__2gpu.json"
echo '{"framework": "pytorch-ddp", "items_per_sec": 1000, "max_memory_allocated_bytes": 5368709120}' >"$work/ddp/gpt_b16_bf16_g2__ddp.json"
{ echo "a warning"; echo '{"framework": "pytorch-fsdp2", "items_per_sec": 400, "max_memory_allocated_bytes": 1073741824}'; } \
  >"$work/ddp/gpt_b16_bf16_g2__fsdp.json"
echo '{"framework": "pytorch-fsdp2", "items_per_sec": 1700, "max_memory_allocated_bytes": 2147483648}' \
  >"$work/ddp/gpt_b16_bf16_g2__fsdp_keep.json"
table=$(bash -c 'source "$1/scripts/gpu/common.sh" /nonexistent >/dev/null 2>&1; gpu_table twins "$2"' _ "$root" "$work/ddp")
for row in '| gpt_b16_bf16 | 2 | ddp | replicated-nccl | 900 | 1,000 | 0.90x | 4.00 | 5.00 |' \
  '| gpt_b16_bf16 | 2 | fsdp | fully_sharded | 800 | 400 | 2.00x | 2.00 | 1.00 |' \
  '| gpt_b16_bf16 | 2 | fsdp_keep | fully_sharded+reshard_after_forward=false | 850 | 1,700 | 0.50x | 3.00 | 2.00 |'; do
  echo "$table" | grep -qF "$row" || fail "twins table: no row $row: $table"
done
[ "$(echo "$table" | grep -Ec '^\| gpt_b16_bf16 \| 2 \| (ddp|fsdp|fsdp_keep) \| ')" = 3 ] ||
  fail "twins table: not one row per twin beside its strategy: $table"
grep -q "beside the dpbench strategy" <<<"$(bash -c 'source "$1/scripts/gpu/common.sh" /nonexistent >/dev/null 2>&1; gpu_table twins "$2"' _ "$root" "$work/memory")" &&
  fail "twins table: a table of mirrored strategies without a sweep"

for bad in 0 two -1; do
  expect_exit "ROUNDS=$bad" 2 env DPBENCH_BUILD_DIR="$build" DPBENCH_DEVICE=cpu TWINS="" ROUNDS=$bad \
    bash "$root/scripts/gpu/compare_pytorch.sh" cnn "$work/bad" trivial:8
  grep -q "ROUNDS must be a positive whole number, not '$bad'" "$work/stderr" || fail "ROUNDS=$bad: $(cat "$work/stderr")"
done
expect_exit "ROUNDS with ddp" 2 env DPBENCH_BUILD_DIR="$build" DPBENCH_DEVICE=cpu TWINS="" ROUNDS=2 \
  bash "$root/scripts/gpu/compare_pytorch.sh" ddp "$work/bad" trivial:8
grep -q "ROUNDS is for cnn, rnn, transformer, gpt and trivial" "$work/stderr" || fail "ROUNDS with ddp: $(cat "$work/stderr")"
finish "compare_pytorch.sh: rounds, medians, paired ratios and the twins beside their strategies as expected"
