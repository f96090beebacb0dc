#!/usr/bin/env bash
# How close `dpbench predict` comes on this machine: per model, a traced 1-GPU run, the measured
# N-GPU runs it predicts and the collectives' curves, all from one build in one session.
# `scripts/gpu/check_predictions.sh --help` says how.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

usage() {
  cat <<'EOF'
Usage: scripts/gpu/check_predictions.sh OUT_DIR [ENTRY...]

For each ENTRY (MODEL[:BATCH][+--flag=value...], with the model's flags of these scripts; default:
resnet50:64 inception3:64 vgg16:64 nmt:384 nmt:384+--encoder_type=dynamic rnnlm:512):
  1. the 1-GPU base: --variable_update=independent with --trace_file and --trace_steps=1:20;
  2. on each count of GPUS (default "2"), every strategy of STRATEGIES (default
     'replicated:nccl;parameter_server:gpu', sweep tokens) through scripts/sweep.sh;
  3. `dpbench predict BASE MEASURED... --system SYSTEM --curves CURVES` into OUT_DIR/KEY/predict.md
     and predict.csv.
Before the entries, `dpbench comm_bench` measures every collective the predicted strategies issue
(all_reduce, reduce, broadcast, reduce_scatter, all_gather) on each count (the CURVES, on GPUs
with --beside_compute: compute's slowdown beside each collective,
OUT_DIR/curves/; curves already there from an earlier run into OUT_DIR are kept, so entries can be
split over runs, e.g. SIMULATED_HOSTS for some only). Last, one table: per entry, strategy and
count, the predicted and measured speed, the error, the clock loss and the error at equal clocks.

SIMULATED_HOSTS=H also plays H hosts on this machine with the largest count N of GPUS (N/H GPUs
each): every rank under mpirun in one application context per host, with DPBENCH_HOST_NAME and
NCCL_HOSTID of its host (NCCL then carries the traffic between them over its network transport,
NCCL_IB_DISABLE=1: sockets) and that host's slice of CUDA_VISIBLE_DEVICES. It measures the
all-reduce across the hosts and the collectives of one host (N/H GPUs), runs
distributed_all_reduce flat and with --hierarchical_all_reduce, and predicts them with SYSTEM's
values at N/H GPUs per host (OUT_DIR/simulated_hosts_system.json) into OUT_DIR/KEY/predict_hosts.md
and .csv; the table marks those rows "H hosts". MPIRUN names the launcher (mpirun).
Environment: NUM_BATCHES (40), NUM_WARMUP (10), GPUS, STRATEGIES, SYSTEM
(systems/h200_nvlink_4gpu.json), SIMULATED_HOSTS, COMM_MAX_BYTES (1G: the curves' largest size; the
reference backend's processes each hold their buffers in host memory), DPBENCH_FLAGS (extra flags for every run),
DPBENCH_BUILD_DIR (build), DPBENCH_DEVICE (gpu; cpu: the reference backend, for a dry check).
e.g. check_predictions.sh /tmp/predict resnet50:64 nmt:384
     GPUS="2 4" SIMULATED_HOSTS=2 check_predictions.sh /tmp/predict
EOF
}

case ${1:-} in -h | --help) usage; exit 0 ;; esac
(($# >= 1)) || { usage >&2; exit 2; }
out=$1
shift
entries=("$@")
((${#entries[@]})) || entries=(resnet50:64 inception3:64 vgg16:64 nmt:384 nmt:384+--encoder_type=dynamic rnnlm:512)
build=${DPBENCH_BUILD_DIR:-build}
dpbench=$build/dpbench
device=${DPBENCH_DEVICE:-gpu}
system=${SYSTEM:-systems/h200_nvlink_4gpu.json}
read -r -a counts <<<"${GPUS:-2}"
read -r -a extra_flags <<<"${DPBENCH_FLAGS:-}"
steps=(--num_batches="${NUM_BATCHES:-40}" --num_warmup_batches="${NUM_WARMUP:-10}" --display_every=1000)
mkdir -p "$out/curves"
# shellcheck source=scripts/gpu/common.sh
source scripts/gpu/common.sh "$dpbench" >/dev/null
for entry in "${entries[@]}"; do parse_entry "$entry" || exit 2; done
for n in "${counts[@]}"; do
  if ! [[ $n =~ ^[1-9][0-9]*$ ]] || ((n < 2)); then
    echo "check_predictions.sh: GPUS takes counts of 2 or more, not '$n'" >&2
    exit 2
  fi
done
max_bytes=${COMM_MAX_BYTES:-1G}
status=0
max_count=$(printf '%s\n' "${counts[@]}" | sort -n | tail -n 1)
hosts=${SIMULATED_HOSTS:-0}
[[ $hosts =~ ^[0-9]+$ ]] || { echo "check_predictions.sh: SIMULATED_HOSTS takes a host count, not '$hosts'" >&2; exit 2; }
per_host=0
if ((hosts > 1)); then
  if ((max_count % hosts != 0)); then
    echo "check_predictions.sh: SIMULATED_HOSTS=$hosts does not divide $max_count GPUs" >&2
    exit 2
  fi
  per_host=$((max_count / hosts))
fi

# simulated_hosts COMMAND...: mpirun running COMMAND as `hosts` hosts of `per_host` ranks.
simulated_hosts() {
  local launch=("${MPIRUN:-mpirun}" --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x NCCL_IB_DISABLE=1) h first
  [ -n "${LD_LIBRARY_PATH:-}" ] && launch+=(-x LD_LIBRARY_PATH)
  for ((h = 0; h < hosts; h++)); do
    ((h)) && launch+=(:)
    first=$((h * per_host))
    launch+=(-np "$per_host" -x DPBENCH_HOST_NAME="host$h" -x NCCL_HOSTID="host$h")
    [ "$device" = gpu ] && launch+=(-x CUDA_VISIBLE_DEVICES="$(seq -s, "$first" $((first + per_host - 1)))")
    launch+=("$@")
  done
  "${launch[@]}"
}

# Every collective a predicted strategy issues, so that none is priced by the system file's
# alpha-beta figures where this machine can be measured: all_reduce (replicated), reduce and
# broadcast (parameter_server gpu), reduce_scatter and all_gather (sharded update, hierarchical).
collective_ops=(all_reduce reduce broadcast reduce_scatter all_gather)
# On GPUs each curve also carries how much compute slows beside the collective, which predict
# charges compute beside a transfer; the reference backend runs a device's streams one after
# another, so there is nothing beside anything to measure.
beside=()
[ "$device" = gpu ] && beside=(--beside_compute)
curves=()
for n in "${counts[@]}"; do
  for op in "${collective_ops[@]}"; do
    file=$out/curves/${op}_g$n.json
    # A curve an earlier run into the same OUT_DIR measured is kept (entries split over runs).
    if [ -s "$file" ]; then echo "== comm_bench $op, $n GPUs: kept from an earlier run"; curves+=("$file"); continue; fi
    echo "== comm_bench $op, $n GPUs"
    if "$dpbench" comm_bench --device="$device" --num_gpus="$n" --op="$op" --min_bytes=64K --max_bytes="$max_bytes" \
      "${beside[@]}" --json "$file" >"$out/curves/${op}_g$n.log" 2>&1; then
      curves+=("$file")
    else
      echo "comm_bench $op on $n GPUs failed: $(tail -n 1 "$out/curves/${op}_g$n.log")"
      status=1
    fi
  done
done

host_curves=()
if ((hosts > 1)); then
  file=$out/curves/all_reduce_${hosts}x$per_host.json
  echo "== comm_bench all_reduce across $hosts simulated hosts of $per_host GPUs"
  if [ -s "$file" ]; then
    host_curves+=("$file")
  elif simulated_hosts "$dpbench" comm_bench --device="$device" --min_bytes=64K --max_bytes="$max_bytes" "${beside[@]}" \
    --json "$file" \
    >"${file%.json}.log" 2>&1; then
    host_curves+=("$file")
  else
    echo "comm_bench across simulated hosts failed: $(tail -n 1 "${file%.json}.log")"
    status=1
  fi
  # One host's collectives: those a count of GPUS measured already, the others here.
  for op in "${collective_ops[@]}"; do
    file=$out/curves/${op}_g$per_host.json
    if [ ! -e "$file" ] && ((per_host >= 2)); then
      "$dpbench" comm_bench --device="$device" --num_gpus="$per_host" --op="$op" --min_bytes=64K --max_bytes="$max_bytes" \
        "${beside[@]}" --json "$file" >"$out/curves/${op}_g$per_host.log" 2>&1 || { echo "comm_bench $op on $per_host GPUs failed"; status=1; }
    fi
    [ -e "$file" ] && host_curves+=("$file")
  done
  python3 - "$system" "$per_host" "$hosts" "$out/simulated_hosts_system.json" "$out/curves/all_reduce_${hosts}x$per_host.json" <<'PY'
import json, sys
system, per_host, hosts, target, curve = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
doc = json.load(open(system))
# The collectives no curve covers across the simulated hosts (the sharded update's, the parameter
# server's) take the system file's inter-host bandwidth: here, what the measured all-reduce across
# them reached, not the real adapters the system file describes.
try:
    peak = max(row["busbw_gbps"] for row in json.load(open(curve))["rows"])
    doc["inter_host_bandwidth_GBps"] = {"value": round(peak, 2), "source": f"measured: the largest busbw of {curve}"}
except (OSError, ValueError, KeyError):
    pass
doc["name"] = f"{doc.get('name', system)}, played as {hosts} hosts of {per_host} GPUs"
doc["description"] = (f"{system} with {per_host} GPUs per host: scripts/gpu/check_predictions.sh split the "
                      f"machine's GPUs into {hosts} hosts (DPBENCH_HOST_NAME, NCCL_HOSTID); the measured curves "
                      "give the links' costs.")
doc["gpus_per_host"] = {"value": per_host, "source": f"simulated: {hosts} hosts of {per_host} GPUs on one machine"}
json.dump(doc, open(target, "w"), indent=2)
PY
fi

for entry in "${entries[@]}"; do
  parse_entry "$entry"
  key=$entry_tag
  mkdir -p "$out/$key/logs"
  mapfile -t flags < <(last_of_each --device="$device" "${entry_flags[@]}" "${steps[@]}" "${extra_flags[@]}")
  base=$out/$key/base__1gpu.json
  echo "== $key: traced 1-GPU base"
  "$dpbench" --model="$entry_model" "${flags[@]}" --num_gpus=1 --variable_update=independent \
    --trace_file="$out/$key/base__1gpu.trace.json" --trace_steps=1:20 --result_file="$base" \
    >"$out/$key/logs/base__1gpu.log" 2>&1 || { echo "$key base failed: $(tail -n 1 "$out/$key/logs/base__1gpu.log")"; status=1; continue; }
  echo "== $key: sweep over ${counts[*]} GPUs"
  bash scripts/sweep.sh --dpbench="$dpbench" --models="$entry_model" --gpus="$(IFS=,; echo "${counts[*]}")" \
    --strategies="${STRATEGIES:-replicated:nccl;parameter_server:gpu}" --out="$out/$key/runs" --no-report \
    -- "${flags[@]}" || status=1
  mapfile -t measured < <(ls "$out/$key/runs/"*gpu.json 2>/dev/null)
  for format in markdown csv; do
    file=$out/$key/predict.${format/markdown/md}
    "$dpbench" predict "$base" "${measured[@]}" --system "$system" --max_gpus="$max_count" --format="$format" \
      --output "$file" ${curves[@]:+--curves "${curves[@]}"} >"$out/$key/logs/predict_$format.log" 2>&1 ||
      { echo "$key predict failed: $(tail -n 1 "$out/$key/logs/predict_$format.log")"; status=1; }
  done
  ((hosts > 1)) || continue
  mkdir -p "$out/$key/hosts"
  for variant in flat hierarchical; do
    extra=()
    [ "$variant" = hierarchical ] && extra=(--hierarchical_all_reduce)
    name=${key}__distributed_all_reduce-${variant}__${hosts}x$per_host
    echo "== $key: distributed_all_reduce ($variant) on $hosts simulated hosts of $per_host GPUs"
    simulated_hosts "$dpbench" --model="$entry_model" "${flags[@]}" --variable_update=distributed_all_reduce \
      "${extra[@]}" --result_file="$out/$key/hosts/$name.json" >"$out/$key/logs/$name.log" 2>&1 ||
      { echo "$name failed: $(tail -n 1 "$out/$key/logs/$name.log")"; status=1; }
  done
  mapfile -t measured < <(ls "$out/$key/hosts/"*.json 2>/dev/null)
  for format in markdown csv; do
    file=$out/$key/predict_hosts.${format/markdown/md}
    "$dpbench" predict "$base" "${measured[@]}" --system "$out/simulated_hosts_system.json" --max_gpus="$max_count" \
      --format="$format" --output "$file" ${host_curves[@]:+--curves "${host_curves[@]}"} \
      >"$out/$key/logs/predict_hosts_$format.log" 2>&1 ||
      { echo "$key predict (simulated hosts) failed: $(tail -n 1 "$out/$key/logs/predict_hosts_$format.log")"; status=1; }
  done
done

python3 - "$out" <<'PY'
import csv, json, os, sys

root = sys.argv[1]
# The simulated hosts' rows carry the host count of the run that made them (an earlier run into
# OUT_DIR may have played hosts where this one did not).
try:
    system = json.load(open(os.path.join(root, "simulated_hosts_system.json")))
    hosts = system["name"].rsplit(" played as ", 1)[1].split(" hosts", 1)[0]
except (OSError, ValueError, KeyError, IndexError):
    hosts = "simulated"
def label(strategy, where):
    # The flat distributed_all_reduce runs price as a flat all-reduce: name the run, not the row.
    if where and strategy == "replicated (nccl)":
        strategy = "distributed_all_reduce (flat)"
    return strategy + where
print()
print("| entry | strategy | GPUs | predicted | measured | error % | clock loss % | error at equal clocks % |")
print("|---|---|--:|--:|--:|--:|--:|--:|")
def num(text, spec):
    try:
        return spec.format(float(text))
    except (TypeError, ValueError):
        return "-"
for folder in sorted(os.listdir(root)):
  for table, where in (("predict.csv", ""), ("predict_hosts.csv", f", {hosts} hosts")):
    path = os.path.join(root, folder, table)
    if not os.path.exists(path):
        continue
    with open(path) as f:
        for row in csv.DictReader(f):
            if not row.get("measured_items_per_sec") or row.get("gpu_number") == "1":
                continue
            print(f"| {folder} | {label(row['strategy'], where)} | {row['gpu_number']} | {num(row['items_per_sec'], '{:,.0f}')} | "
                  f"{num(row['measured_items_per_sec'], '{:,.0f}')} | {num(row['error_pct'], '{:+.1f}')} | "
                  f"{num(row['clock_loss_pct'], '{:.1f}')} | {num(row['error_at_equal_clocks_pct'], '{:+.1f}')} |")
PY
exit $status
