// Move-only owners of CUDA streams, events and cuBLAS handles. Creation is checked and throws;
// destruction ignores errors, because destructors run during unwinding and must never throw.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <utility>

#include "engine/cuda/cuda_check.h"

namespace dpbench {

// Non-blocking: never implicitly synchronises with the legacy default stream.
class CudaStream {
 public:
  CudaStream() { DPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& other) noexcept {
    std::swap(stream_, other.stream_);
    return *this;
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  // Timing events cost more to record; events used only for ordering should not pay for it.
  explicit CudaEvent(bool timing) {
    DPB_CUDA_CHECK(
        cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~CudaEvent() {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
  }
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Bound to the device that is current when it is created.
class CublasHandle {
 public:
  CublasHandle() { DPB_CUBLAS_CHECK(cublasCreate(&handle_)); }
  ~CublasHandle() {
    if (handle_ != nullptr) (void)cublasDestroy(handle_);
  }
  CublasHandle(CublasHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  CublasHandle& operator=(CublasHandle&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace dpbench
