#!/usr/bin/env bash
# Installs dpbench's build dependencies from Debian's packages, idempotently: packages already
# present are not touched and apt-get runs only when something is missing.
# The CUDA toolkit (nvcc, cuBLAS) with cuDNN and NCCL must already be installed (/usr/local/cuda).
# --slurm also installs Slurm and munge for the test that starts a one-node cluster
# (tests/scripts/test_slurm.sh); CI asks for it, a workstation need not (the packages bring
# services a machine that is no cluster does not want).
set -euo pipefail

packages=(cmake g++ make libspdlog-dev libfmt-dev nlohmann-json3-dev catch2
          libopenmpi-dev openmpi-bin)
case ${1:-} in
  --slurm) packages+=(slurm-wlm munge) ;;
  "") ;;
  *) echo "setup: error: unknown option '$1'; accepted: --slurm" >&2; exit 2 ;;
esac
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: error: the CUDA toolkit (nvcc) is not installed; install CUDA 12 or 13 with cuDNN and NCCL (e.g. NVIDIA's cuda-toolkit, cudnn and libnccl-dev packages)" >&2
  exit 1
fi
echo "setup: dependencies present"
