// The one guard that makes a GPU current for a scope: set-up code on any thread, and a rank thread
// calling into a library for its own device, leave the thread's current device as they found it.
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

}  // namespace dpbench
