#!/usr/bin/env bash
# Source this on a GPU machine before running dpbench: keeps NVLink multicast off (it can take a
# shared host's GPUs out of service) and, where the system lacks cuDNN, NCCL or cuBLAS, points the
# loader at the copies bundled with PyTorch's wheels.
export NCCL_NVLS_ENABLE=0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NVSHMEM_DISABLE_NVLS=1

dpbench_binary=${1:-build/dpbench}
# First the CUDA toolkit's own library folders (the machine's CUDA may keep cuDNN/NCCL there).
if [ -x "$dpbench_binary" ] && ldd "$dpbench_binary" | grep -q "not found"; then
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$dir" ] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
fi
# Then the copies bundled with PyTorch's wheels.
if [ -x "$dpbench_binary" ] && ldd "$dpbench_binary" | grep -q "not found"; then
  extra=$(python3 - <<'PY' 2>/dev/null
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
  if [ -n "$extra" ]; then
    export LD_LIBRARY_PATH="$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "env: using PyTorch's bundled libraries from $extra"
  fi
fi
if [ -x "$dpbench_binary" ]; then
  ldd "$dpbench_binary" | grep -E "cudnn|nccl|cublas|cudart"
  ldd "$dpbench_binary" | grep "not found" && echo "env: warning: libraries above still missing" >&2
fi
true
