// Move-only owners of a cuDNN handle and of the descriptors the image ops cache per shape.
// Creation is checked and throws; destruction ignores errors (it runs during unwinding too).
#pragma once

#include <cudnn.h>

#include <utility>

#include "engine/cuda/cuda_check.h"

namespace dpbench {

// One owner template for every cuDNN object: they all come as a create/destroy pair of C calls.
template <typename Native, cudnnStatus_t (*create_fn)(Native*), cudnnStatus_t (*destroy_fn)(Native)>
class CudnnObject {
 public:
  CudnnObject() { DPB_CUDNN_CHECK(create_fn(&native_)); }
  ~CudnnObject() {
    if (native_ != nullptr) (void)destroy_fn(native_);
  }
  CudnnObject(CudnnObject&& other) noexcept : native_(std::exchange(other.native_, nullptr)) {}
  CudnnObject& operator=(CudnnObject&& other) noexcept {
    std::swap(native_, other.native_);
    return *this;
  }
  CudnnObject(const CudnnObject&) = delete;
  CudnnObject& operator=(const CudnnObject&) = delete;

  Native get() const { return native_; }

 private:
  Native native_ = nullptr;
};

// Bound to the device that is current when it is created.
using CudnnHandle = CudnnObject<cudnnHandle_t, cudnnCreate, cudnnDestroy>;
using CudnnTensorDescriptor =
    CudnnObject<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using CudnnFilterDescriptor =
    CudnnObject<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using CudnnConvolutionDescriptor =
    CudnnObject<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                cudnnDestroyConvolutionDescriptor>;
using CudnnPoolingDescriptor = CudnnObject<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                                           cudnnDestroyPoolingDescriptor>;

}  // namespace dpbench
