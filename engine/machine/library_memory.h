// What a GPU's default memory limit leaves to the libraries: cuBLAS and cuDNN handles and
// workspaces, NCCL's buffers and the allocator's rounding take GPU memory that dpbench does not
// allocate (summary.memory's libraries_bytes: 0.3 to 0.6 GiB on the H200s of docs/BENCHMARKS.md),
// partly only once the first step runs. A run's default limit is what the GPU had free less this,
// so the refusal comes at set-up rather than from a library in a step; `dpbench predict` takes it
// off a GPU's memory the same way. --device_memory replaces both.
#pragma once

#include <cstdint>

namespace dpbench {

inline constexpr uint64_t kLibraryMemoryReserve = uint64_t{1} << 30;  // 1 GiB

}  // namespace dpbench
