// Device memory that a plan or a backend owns: cudaMalloc'd when it is made, freed with its owner,
// and recorded in the device's MemoryLedger meanwhile, like every Device::allocate.
#pragma once

#include <cstddef>

#include "engine/machine/memory_ledger.h"

namespace dpbench {

// Note [search memory]
// At set-up the backend times algorithms (cuDNN's convolution search, the linear, attention and
// LSTM paths) on buffers of its own that it frees again: a transient above what the steps hold.
// Those buffers keep within the device's memory limit (--device_memory, else what the GPU had
// free less the libraries' reserve; MemoryLedger::room_for_transients): a timing whose buffers
// do not fit is not run (the heuristics' or the plain choice stands), and the convolution search
// gives its workspace what room is left after its tensors (at most kMaxConvWorkspaceBytes, and
// half of what the GPU has free). So a search never refuses a run nor passes its limit. A CNN
// replica sizes its convolutions, and decides its accumulating ones, before its arena exists, so
// the search's buffers never sit beside the step's activations: its whole-run peak is the larger
// of the steps' and the search's own (up to 2 GiB of workspace and one layer's tensors, the larger
// only at small batches); a timing in a model's first step (gpt's linear and attention paths)
// still comes on top of the activations it holds. The
// search's tensors grow with the batch, its workspace (recorded as a workspace) does not:
// memory predictions keep that part fixed (Note [memory from one run] in
// reports/step_prediction.h), and the too-little-memory fit leaves the transients out (Note [too
// little memory] in engine/training/runner.h).

// Move-only, like the buffer it owns.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(size_t bytes, MemoryLedger& ledger, const MemoryTag& tag);
  // A set-up transient (Note [search memory]): throws RuntimeError, allocating nothing, where
  // `bytes` would pass the device's memory limit.
  static DeviceMemory transient(size_t bytes, MemoryLedger& ledger, const MemoryTag& tag);
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
