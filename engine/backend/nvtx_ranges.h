// NVTX ranges (--nvtx) in dpbench's own domain, for Nsight Systems: started and ended by id, so
// ranges on different streams may end in any order. Header-only NVTX from the CUDA toolkit; with
// no tool attached each call returns at once.
#pragma once

#include <cstdint>
#include <string>

namespace dpbench {

uint64_t nvtx_range_start(const std::string& name);
void nvtx_range_end(uint64_t range);

}  // namespace dpbench
