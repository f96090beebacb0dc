// DeviceMemory (device_memory.h).
#include "engine/cuda/device_memory.h"

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "engine/cuda/cuda_check.h"
#include "engine/errors.h"

namespace dpbench {

DeviceMemory::DeviceMemory(size_t bytes, MemoryLedger& ledger, const MemoryTag& tag) : bytes_(bytes) {
  const cudaError_t status = cudaMalloc(&data_, bytes > 0 ? bytes : 1);
  if (status != cudaSuccess) {
    data_ = nullptr;
    (void)cudaGetLastError();  // clear it, so the next launch check does not report it again
    cuda_detail::throw_library_error("CUDA", "cudaMalloc of a backend workspace", static_cast<int>(status),
                                     cudaGetErrorString(status), __FILE__, __LINE__);
  }
  entry_ = ledger.record(tag, MemoryPlace::device, bytes);
}

DeviceMemory DeviceMemory::transient(size_t bytes, MemoryLedger& ledger, const MemoryTag& tag) {
  if (bytes > ledger.room_for_transients())
    throw RuntimeError(tag.owner + ": " + std::to_string(bytes) + " bytes would pass the device's memory limit");
  return DeviceMemory(bytes, ledger, tag);
}

DeviceMemory::~DeviceMemory() {
  if (data_ != nullptr) (void)cudaFree(data_);
}

DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      entry_(std::move(other.entry_)) {}

// Swaps: the memory this held (and its ledger entry) goes with `other`, when it goes.
DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(bytes_, other.bytes_);
  std::swap(entry_, other.entry_);
  return *this;
}

}  // namespace dpbench
