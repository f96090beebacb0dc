#!/usr/bin/env bash
# Sourced by every script in scripts/gpu/, and by hand before running dpbench on a GPU machine:
#   source scripts/gpu/common.sh [BINARY]   (default: ${DPBENCH_BUILD_DIR:-build}/dpbench)
# Sets the environment: NVLink multicast off (it can take a shared host's GPUs out of service) and,
# where the system lacks cuDNN, NCCL or cuBLAS, the loader pointed at the CUDA toolkit's folders and
# then at the copies bundled with PyTorch's wheels; prints which libraries BINARY loads.
# Defines what the scripts share (the one place for entry parsing and tables):
#   model_flags MODEL           a model's flags in these scripts (nmt: cudnn_lstm, bi, tf32, the bi
#                               dropped by parse_entry for --encoder_type=transformer; rnnlm:
#                               tf32; gpt: bf16; the CNNs: fp32; trivial: none)
#   parse_entry ENTRY           MODEL[:BATCH][+--flag=value...] -> entry_model, entry_batch,
#                               entry_flags (model_flags, --batch_size, then the entry's flags, each
#                               name once: the entry's win) and entry_tag (a file-name part)
#   last_of_each FLAG...        the flags with each name once, the last given
#   twin_flags SCRIPT... -- FLAG...   the FLAGs that the scripts/bench/ SCRIPTs accept
#   write_test_data DIR         CIFAR-format data (DIR/cifar) and a parallel corpus (DIR/nmt)
#   gpu_table MODE ARGS...      the tables: variants DIR [COLUMNS], builds DIR ROUNDS WORKLOAD...,
#                               twins DIR, kernels DIR TAG (see the modes below)
export NCCL_NVLS_ENABLE=0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

gpu_binary=${1:-${DPBENCH_BUILD_DIR:-build}/dpbench}
# First the CUDA toolkit's own library folders (the machine's CUDA may keep cuDNN/NCCL there).
if [ -x "$gpu_binary" ] && ldd "$gpu_binary" | grep -q "not found"; then
  for gpu_dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$gpu_dir" ] && export LD_LIBRARY_PATH="$gpu_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
fi
# Then the copies bundled with PyTorch's wheels.
if [ -x "$gpu_binary" ] && ldd "$gpu_binary" | grep -q "not found"; then
  gpu_extra=$(python3 - <<'PY' 2>/dev/null
import importlib, os
dirs = []
for name in ("nvidia.cudnn", "nvidia.nccl", "nvidia.cublas", "nvidia.cuda_runtime"):
    try:
        module = importlib.import_module(name)
    except ImportError:
        continue
    for base in list(getattr(module, "__path__", [])):
        lib = os.path.join(base, "lib")
        if os.path.isdir(lib):
            dirs.append(lib)
print(":".join(dirs))
PY
)
  if [ -n "$gpu_extra" ]; then
    export LD_LIBRARY_PATH="$gpu_extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "common.sh: using PyTorch's bundled libraries from $gpu_extra"
  fi
fi
if [ -x "$gpu_binary" ]; then
  ldd "$gpu_binary" | grep -E "cudnn|nccl|cublas|cudart"
  ldd "$gpu_binary" | grep "not found" && echo "common.sh: warning: libraries above still missing" >&2
fi

model_flags() {
  case $1 in
    nmt) echo "--encoder_type=cudnn_lstm --direction=bi --precision=tf32" ;;
    rnnlm) echo "--precision=tf32" ;;
    gpt) echo "--precision=bf16" ;;
    trivial) echo "" ;;
    *) echo "--precision=fp32" ;;
  esac
}

# last_of_each FLAG...: the flags with each --name once, the last one given (dpbench refuses a flag
# given twice with different values; here later settings override earlier defaults), in order.
last_of_each() {
  local flags=("$@") i j keep
  for ((i = 0; i < ${#flags[@]}; i++)); do
    keep=1
    for ((j = i + 1; j < ${#flags[@]}; j++)); do
      [ "${flags[j]%%=*}" = "${flags[i]%%=*}" ] && keep=0
    done
    ((keep)) && printf '%s\n' "${flags[i]}"
  done
  return 0
}

parse_entry() {
  local head flag extra=()
  head=${1%%+*}
  entry_model=${head%%:*}
  entry_batch=""
  [[ $head == *:* ]] && entry_batch=${head#*:}
  if ! [[ $entry_model =~ ^[a-z0-9_]+$ ]] || { [ -n "$entry_batch" ] && ! [[ $entry_batch =~ ^[1-9][0-9]*$ ]]; }; then
    echo "'$1' is not MODEL[:BATCH][+--flag=value...] (e.g. resnet50:64, nmt:384+--encoder_type=dynamic)" >&2
    return 2
  fi
  read -r -a entry_flags <<<"$(model_flags "$entry_model")"
  [ -n "$entry_batch" ] && entry_flags+=(--batch_size="$entry_batch")
  entry_tag=$entry_model${entry_batch:+_b$entry_batch}
  if [[ $1 == *+* ]]; then
    IFS=+ read -r -a extra <<<"${1#*+}"
    for flag in "${extra[@]}"; do
      [[ $flag =~ ^--[a-z0-9_]+(=.*)?$ ]] || { echo "'$1': '$flag' is not a --flag or --flag=value" >&2; return 2; }
      entry_flags+=("$flag")
      entry_tag+="+${flag#--}"
    done
  fi
  entry_tag=${entry_tag//[^A-Za-z0-9._=+-]/-}
  mapfile -t entry_flags < <(last_of_each "${entry_flags[@]}")
  # model_flags' --direction belongs to the LSTM encoders; the transformer refuses it.
  if printf '%s\n' "${entry_flags[@]}" | grep -qx -- --encoder_type=transformer; then
    mapfile -t entry_flags < <(printf '%s\n' "${entry_flags[@]}" | grep -v -- '^--direction=')
  fi
}

twin_flags() {
  local scripts=() flag
  while (($#)) && [ "$1" != -- ]; do scripts+=("$1"); shift; done
  shift
  # The flags the sequence twins share are declared once, in the module they import.
  if grep -q "from twin_timing import" "${scripts[@]}"; then
    scripts+=("$(dirname "${BASH_SOURCE[0]}")/../bench/twin_timing.py")
  fi
  for flag in "$@"; do
    grep -q -- "\"${flag%%=*}\"" "${scripts[@]}" && printf '%s\n' "$flag"
  done
  return 0
}

write_test_data() {
  mkdir -p "$1/cifar" "$1/nmt"
  python3 - "$1" <<'PY'
import os, sys
import numpy as np
root = sys.argv[1]
rng = np.random.default_rng(7)
for i in range(1, 6):  # 50000 random CIFAR-10 records
    path = os.path.join(root, "cifar", f"data_batch_{i}.bin")
    if os.path.exists(path):
        continue
    records = np.empty((10000, 3073), dtype=np.uint8)
    records[:, 0] = rng.integers(0, 10, 10000)
    records[:, 1:] = rng.integers(0, 256, (10000, 3072))
    records.tofile(path)
nmt = os.path.join(root, "nmt")
words = 50000 - 3  # the specials <unk> <s> </s> come first
for side in ("src", "tgt"):
    with open(os.path.join(nmt, f"vocab.{side}"), "w") as f:
        f.write("\n".join(f"{side}{k}" for k in range(words)) + "\n")
pairs = 20000  # of 60 to 99 words
for side, seed in (("src", 1), ("tgt", 2)):
    path = os.path.join(nmt, f"train.{side}")
    if os.path.exists(path):
        continue
    r = np.random.default_rng(seed)
    lengths = r.integers(60, 100, pairs)
    ids = np.minimum(r.zipf(1.2, lengths.sum()), words) - 1
    with open(path, "w") as f:
        start = 0
        for length in lengths:
            f.write(" ".join(f"{side}{k}" for k in ids[start:start + length]) + "\n")
            start += length
PY
}

# Modes:
#   variants DIR [COLUMNS]  compare_variants.sh's folders: per model entry, per setting (the
#     default environment or an --env one), strategy slug and GPU count, the median over the
#     rounds (sweep names NAME__rK), their range, efficiency against the 1-GPU independent run (and
#     against the slowest GPU alone); COLUMNS, comma-separated: comm, telemetry, data.
#   builds DIR ROUNDS WORKLOAD...  compare_builds.sh: median items/s of builds A and B, B/A.
#   twins DIR  compare_pytorch.sh: KEY_gN__dpbench[-VARIANT].json against KEY_gN__TWIN.json (a
#     result or the JSON line a twin printed), with scaling against the smallest GPU count; with
#     rounds (KEY_gN__WHO__rR.json), medians, each round's figure and the rounds' ratios; where a
#     twin's line has an mfu (pytorch_gpt.py's), MFU columns for dpbench and each twin. Then, where
#     the folder holds a sweep (the ddp workload), a second table with each torchrun twin beside the
#     strategy it mirrors (ddp: replicated:nccl, fsdp: fully_sharded, fsdp_keep:
#     fully_sharded+--reshard_after_forward=false): both throughputs and memory peaks, dpbench / twin.
#   kernels DIR TAG  profile_kernels.sh: ncu's kernel durations summed by kernel family.
gpu_table() {
  python3 - "$@" <<'PY'
import collections, csv, glob, json, os, re, statistics, sys

mode, args = sys.argv[1], sys.argv[2:]


def load(path):
    """A result's summary, or the last JSON object line a twin printed; None."""
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
            if "items_per_sec" not in s and "images_per_sec" in s:
                s = dict(s, items_per_sec=s["images_per_sec"])
            return s if isinstance(s.get("items_per_sec"), (int, float)) else None
    return None


def num(value, spec="{:,.0f}"):
    return "-" if not isinstance(value, (int, float)) or isinstance(value, bool) else spec.format(value)


def med(values):
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(values) if values else None


def variants(root, columns=""):
    columns = [c for c in columns.split(",") if c]
    extra = {"comm": ["exposed comm ms/step", "transfer ms/step (min device)", "busbw GB/s", "kernels/step"],
             "telemetry": ["SM MHz", "power-capped", "mJ per item"],
             "data": ["feed", "data wait ms/step", "steps/s"]}
    for entry in sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))):
        groups = collections.defaultdict(list)  # (setting, slug, n) -> summaries
        alone = {}
        for folder, _, files in os.walk(os.path.join(root, entry)):
            setting = os.path.relpath(folder, os.path.join(root, entry)).split(os.sep)[0]
            for name in sorted(files):
                m = re.match(r"(.+)__(.+)__(\d+)gpu(?:__r\d+)?\.json$", name)
                s = load(os.path.join(folder, name)) if m else None
                if not s:
                    continue
                if setting.startswith("alone-gpu"):
                    alone[int(setting[len("alone-gpu"):])] = s["items_per_sec"]
                else:
                    groups[(setting, m.group(2), int(m.group(3)))].append(s)
        if not groups:
            continue

        def speed(key):
            return med(s["items_per_sec"] for s in groups.get(key, []))

        unit = next(iter(groups.values()))[0].get("unit", "items/s")
        print(f"\n### {entry}: {unit}, median over the rounds\n")
        if alone:
            print("Each GPU alone (1 GPU, independent): " + ", ".join(
                f"GPU {g} {alone[g]:,.0f}" for g in sorted(alone)) + "\n")
        slowest = min(alone.values()) if alone else None
        head = ["strategy", "GPUs", "runs", "items/s", "range", "efficiency vs 1 GPU", "step ms"]
        if slowest:
            head.append("efficiency vs slowest GPU alone")
        for c in columns:
            head += extra.get(c, [])
        print("| " + " | ".join(head) + " |")
        print("|---|" + "--:|" * (len(head) - 1))
        for setting, slug, n in sorted(groups, key=lambda k: (k[0] != "default", k[0], k[1], k[2])):
            runs = groups[(setting, slug, n)]
            rate = speed((setting, slug, n))
            rates = [s["items_per_sec"] for s in runs]
            one = (speed((setting, "independent", 1)) or speed(("default", "independent", 1))
                   or speed((setting, slug, 1)))
            label = slug if setting == "default" else f"{slug} [{setting}]"
            row = [label, str(n), str(len(runs)), num(rate), f"{min(rates):,.0f}-{max(rates):,.0f}",
                   f"{100 * rate / (n * one):.1f}%" if one else "-",
                   num(med(s["step_time_ms"]["median"] for s in runs), "{:.2f}")]
            if slowest:
                row.append(f"{100 * rate / (n * slowest):.1f}%")
            pick = lambda f, spec="{:.2f}": num(med(f(s) for s in runs), spec)
            comm = lambda s: s.get("comm") or {}
            tele = lambda s: s.get("gpu_telemetry") or {}
            for c in columns:
                if c == "comm":
                    row += [pick(lambda s: comm(s).get("exposed_comm_ms_per_step"), "{:.3f}"),
                            pick(lambda s: comm(s).get("transfer_ms_per_step_min")),
                            pick(lambda s: comm(s).get("busbw_gbps"), "{:.0f}"),
                            pick(lambda s: s.get("kernel_launches_per_step"), "{:,.0f}")]
                elif c == "telemetry":
                    joules = med(1e3 / tele(s)["items_per_joule"] for s in runs if tele(s).get("items_per_joule"))
                    capped = med(tele(s).get("power_capped_share") for s in runs)
                    row += [pick(lambda s: tele(s).get("sm_clock_mhz_mean"), "{:,.0f}"),
                            "-" if capped is None else f"{100 * capped:.0f}%", num(joules, "{:.3f}")]
                elif c == "data":
                    row += [(runs[0].get("data") or {}).get("feed", "-"),
                            pick(lambda s: (s.get("data") or {}).get("wait_ms_per_step"), "{:.3f}"),
                            pick(lambda s: s["measured_steps"] / s["total_time_s"])]
            print("| " + " | ".join(row) + " |")


def builds(root, rounds, *workloads):
    rounds = int(rounds)
    print(f"| workload | A items/s (median of {rounds}) | B items/s | B/A | A runs | B runs |")
    print("|---|--:|--:|--:|---|---|")
    for w, flags in enumerate(workloads, 1):
        rates = {side: [s["items_per_sec"] for s in (load(f"{root}/w{w}_{side}_r{r}.json")
                                                     for r in range(1, rounds + 1)) if s] for side in "ab"}
        if not rates["a"] or not rates["b"]:
            print(f"| {flags} | - | - | - | {len(rates['a'])} | {len(rates['b'])} |")
            continue
        ma, mb = statistics.median(rates["a"]), statistics.median(rates["b"])
        spread = lambda v: ", ".join(f"{x:,.0f}" for x in v)
        print(f"| {flags} | {ma:,.0f} | {mb:,.0f} | {mb / ma:.4f} | {spread(rates['a'])} | {spread(rates['b'])} |")


def twins(root):
    runs = collections.defaultdict(lambda: collections.defaultdict(dict))  # KEY -> {(who, n): {round: summary}}
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            # A sweep's MODEL__SLUG__Ngpu.json in the folder OUT_DIR/KEY is dpbench-SLUG of KEY.
            sweep = re.match(r"[^_]+(?:_[^_]+)*__(.+)__(\d+)gpu\.json$", name)
            m = re.match(r"(.+)_g(\d+)__(.+?)(?:__r(\d+))?\.json$", name)
            if sweep and folder != root:
                key, n, who, round_ = os.path.basename(folder), int(sweep.group(2)), "dpbench-" + sweep.group(1), 1
            elif m and folder == root:
                key, n, who, round_ = m.group(1), int(m.group(2)), m.group(3), int(m.group(4) or 1)
            else:
                continue
            s = load(os.path.join(folder, name))
            if s:
                runs[key][(who, n)][round_] = s
    names = sorted({who for r in runs.values() for who, _ in r if not who.startswith("dpbench")})
    scaling = any(len({n for _, n in r}) > 1 for r in runs.values())
    rounds = max((len(v) for r in runs.values() for v in r.values()), default=1)
    # Only twins that count FLOPs print an mfu; the other workloads' tables stay as they were.
    mfu = any("mfu" in s for r in runs.values() for (who, _), v in r.items() if not who.startswith("dpbench")
              for s in v.values())
    # Twins that print torch.cuda.max_memory_allocated get a memory column beside dpbench's peak.
    memory = any("max_memory_allocated_bytes" in s for r in runs.values() for (who, _), v in r.items()
                 if not who.startswith("dpbench") for s in v.values())
    head = ["run", "GPUs", "variant", "dpbench items/s"] + (["vs N x smallest"] if scaling else [])
    head += ["step ms (median)", "kernels/step", "CUDA graph"] + (["dpbench MFU"] if mfu else [])
    head += ["dpbench peak GiB"] if memory else []
    for name in names:
        head += [f"{name} items/s"] + ([f"{name} vs N x smallest"] if scaling else [])
        head += ([f"{name} MFU"] if mfu else []) + ([f"{name} max allocated GiB"] if memory else [])
        head += [f"dpbench / {name}"]
        head += [f"rounds' dpbench / {name}"] if rounds > 1 else []
    print("| " + " | ".join(head) + " |")
    print("|---|--:|---|" + "--:|" * (len(head) - 3))

    def rate(by_round):
        return statistics.median(s["items_per_sec"] for s in by_round.values())

    def figure(by_round):  # the median, then each round's figure in round order when there are several
        text = f"{rate(by_round):,.0f}"
        if len(by_round) > 1:
            text += " (" + ", ".join(f"{by_round[k]['items_per_sec']:,.0f}" for k in sorted(by_round)) + ")"
        return text

    def percent(values):  # the median MFU over the rounds, in %
        value = med(values)
        return "-" if value is None else f"{100 * value:.1f}%"

    def gib(values):  # the largest figure over the rounds, in GiB
        values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return f"{max(values) / 2**30:.2f}" if values else "-"

    def vs(r, who, n, value):
        smallest = min(k for w, k in r if w == who)
        base = rate(r[(who, smallest)]) / smallest
        return f"{100 * value / (n * base):.1f}%"

    for key, r in runs.items():
        for who, n in sorted(r, key=lambda k: (k[1], k[0])):
            if not who.startswith("dpbench"):
                continue
            mine = r[(who, n)]
            value = rate(mine)
            s = mine[min(mine)]
            row = [key, str(n), who[len("dpbench-"):] or "-", f"{figure(mine)} {s.get('unit', '')}".strip()]
            row += [vs(r, who, n, value)] if scaling else []
            step_ms = [(x.get("step_time_ms") or {}).get("median") for x in mine.values()]
            step_ms = [v for v in step_ms if isinstance(v, (int, float))]
            row += [num(statistics.median(step_ms) if step_ms else None, "{:.3f}"),
                    num(s.get("kernel_launches_per_step")), "yes" if s.get("cuda_graph") else "no"]
            row += [percent((x.get("flops") or {}).get("mfu") for x in mine.values())] if mfu else []
            row += [gib((x.get("memory") or {}).get("peak_bytes") for x in mine.values())] if memory else []
            for name in names:
                theirs = r.get((name, n))
                if not theirs:
                    row += ["-"] * ((3 if scaling else 2) + (1 if mfu else 0) + (1 if memory else 0) + (1 if rounds > 1 else 0))
                    continue
                row += [figure(theirs)] + ([vs(r, name, n, rate(theirs))] if scaling else [])
                row += [percent(x.get("mfu") for x in theirs.values())] if mfu else []
                row += [gib(x.get("max_memory_allocated_bytes") for x in theirs.values())] if memory else []
                row.append(f"{value / rate(theirs):.2f}x")
                if rounds > 1:  # round k's dpbench against round k's twin
                    ratios = [mine[k]["items_per_sec"] / theirs[k]["items_per_sec"] for k in mine if k in theirs]
                    row.append(f"{min(ratios):.2f}x to {max(ratios):.2f}x" if ratios else "-")
            print("| " + " | ".join(row) + " |")

    # The torchrun twins each mirror one of the sweep's strategies (its file-name slug): the main
    # table sets every strategy against every twin, this one each twin against its own.
    mirrors = {"ddp": "replicated-nccl", "fsdp": "fully_sharded",
               "fsdp_keep": "fully_sharded+reshard_after_forward=false"}
    pairs = [(key, n, name, "dpbench-" + mirrors[name]) for key, r in runs.items()
             for name, n in sorted(r, key=lambda k: (k[1], k[0]))
             if name in mirrors and ("dpbench-" + mirrors[name], n) in r]
    if not pairs:
        return
    head = ["run", "GPUs", "twin", "dpbench strategy", "dpbench items/s", "twin items/s", "dpbench / twin"]
    head += ["rounds' dpbench / twin"] if rounds > 1 else []
    head += ["dpbench peak GiB", "twin max allocated GiB"] if memory else []
    print("\nEach torchrun twin beside the dpbench strategy it mirrors:\n")
    print("| " + " | ".join(head) + " |")
    print("|---|--:|---|---|" + "--:|" * (len(head) - 4))
    for key, n, name, who in pairs:
        mine, theirs = runs[key][(who, n)], runs[key][(name, n)]
        row = [key, str(n), name, who[len("dpbench-"):], figure(mine), figure(theirs),
               f"{rate(mine) / rate(theirs):.2f}x"]
        if rounds > 1:
            ratios = [mine[k]["items_per_sec"] / theirs[k]["items_per_sec"] for k in mine if k in theirs]
            row.append(f"{min(ratios):.2f}x to {max(ratios):.2f}x" if ratios else "-")
        if memory:
            row += [gib((x.get("memory") or {}).get("peak_bytes") for x in mine.values()),
                    gib(x.get("max_memory_allocated_bytes") for x in theirs.values())]
        print("| " + " | ".join(row) + " |")


def kernels(root, tag):
    scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "s": 1e3, "second": 1e3}
    for who in ("dpbench", "pytorch"):
        try:
            lines = list(csv.reader(open(f"{root}/ncu_{who}_{tag}.csv")))
        except OSError:
            continue
        # The programs' own output (the twin's JSON line, progress) precedes ncu's table.
        start = next((i for i, r in enumerate(lines) if "Kernel Name" in r), None)
        if start is None:
            print(f"{who}: no kernels recorded")
            continue
        rows = [r for r in lines[start:] if len(r) == len(lines[start])]
        head = rows[0]
        name_at, value_at, unit_at = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
        families = collections.defaultdict(lambda: [0.0, 0])
        total = 0.0
        for r in rows[1:]:
            ms = float(r[value_at].replace(",", "")) * scale[r[unit_at]]
            family = re.sub(r"<.*", "", re.sub(r"^void ", "", r[name_at]))[:80]
            families[family][0] += ms
            families[family][1] += 1
            total += ms
        print(f"\n{who} {tag}: {len(rows) - 1} kernels, {total:.2f} ms of kernel time")
        print("| ms | calls | kernel family |\n|--:|--:|---|")
        for family, (ms, calls) in sorted(families.items(), key=lambda kv: -kv[1][0])[:25]:
            print(f"| {ms:.3f} | {calls} | `{family}` |")


{"variants": variants, "builds": builds, "twins": twins, "kernels": kernels}[mode](*args)
PY
}
true
