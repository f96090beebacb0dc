// The guards that keep a thread's current GPU as they found it: CurrentDeviceScope makes a GPU
// current for a scope (set-up code on any thread, a rank thread calling into a library for its own
// device); CallerDeviceRestorer only puts the caller's device back, for code that visits several
// GPUs itself or calls a library that switches them.
#pragma once

#include <cuda_runtime.h>

#include "engine/cuda/cuda_check.h"

namespace dpbench {

// Makes `ordinal` current and restores the caller's device when the scope ends (also by an
// exception). Threads that drive one device have it current already: then this is one
// cudaGetDevice and nothing to restore.
class CurrentDeviceScope {
 public:
  explicit CurrentDeviceScope(int ordinal) {
    DPB_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != ordinal) {
      DPB_CUDA_CHECK(cudaSetDevice(ordinal));
      changed_ = true;
    }
  }
  ~CurrentDeviceScope() {
    if (changed_) (void)cudaSetDevice(previous_);
  }
  CurrentDeviceScope(const CurrentDeviceScope&) = delete;
  CurrentDeviceScope& operator=(const CurrentDeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

// Puts the caller's current device back when the scope ends, whatever the code inside made
// current. It never throws (destructors use it): a device that cannot be read or set back is left,
// and the error cleared so the next launch check does not blame it.
class CallerDeviceRestorer {
 public:
  CallerDeviceRestorer() : known_(cudaGetDevice(&previous_) == cudaSuccess) {
    if (!known_) (void)cudaGetLastError();
  }
  ~CallerDeviceRestorer() {
    if (known_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  CallerDeviceRestorer(const CallerDeviceRestorer&) = delete;
  CallerDeviceRestorer& operator=(const CallerDeviceRestorer&) = delete;

 private:
  int previous_ = -1;
  bool known_ = false;
};

}  // namespace dpbench
