// Device memory that a plan or a backend owns: cudaMalloc'd when it is made, freed with its owner,
// and recorded in the device's MemoryLedger meanwhile, like every Device::allocate.
#pragma once

#include <cstddef>

#include "engine/machine/memory_ledger.h"

namespace dpbench {

// Move-only, like the buffer it owns.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(size_t bytes, MemoryLedger& ledger, const MemoryTag& tag);
  ~DeviceMemory();
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  LedgerEntry entry_;
};

}  // namespace dpbench
