// What CudaBackend keeps per geometry for cuDNN's fused LSTM (the v8 RNN API): the descriptors,
// the sizes cuDNN asked for, the device array of sequence lengths, and how the canonical weight
// layout (rnn_geometry.h) maps onto cuDNN's weight space. Built once, when a layer prepares the
// geometry (lstm_workspace_bytes), never per step: building allocates device memory.
#pragma once

#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <map>
#include <memory>

#include "engine/cuda/cudnn_raii.h"
#include "engine/rnn_geometry.h"

namespace dpbench {

using CudnnRnnDescriptor =
    CudnnObject<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using CudnnRnnDataDescriptor = CudnnObject<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor,
                                           cudnnDestroyRNNDataDescriptor>;
using CudnnDropoutDescriptor =
    CudnnObject<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor,
                cudnnDestroyDropoutDescriptor>;

// Device memory a plan or a backend owns (cudaMalloc'd at set-up, freed with its owner). Move-only.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(size_t bytes);
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
};

struct RnnPlan {
  RnnGeometry geometry;
  cudnnMathType_t math_type = CUDNN_FMA_MATH;
  CudnnDropoutDescriptor dropout;  // rate 0: cuDNN wants one even without dropout
  CudnnRnnDescriptor rnn;
  CudnnRnnDataDescriptor x, y;   // (T, B, in), (T, B, H * D), sequence-major packed, all lengths T
  CudnnTensorDescriptor state;   // hx, cx, hy, cy and their gradients: (L * D, B, H)
  DeviceMemory sequence_lengths;  // (B) int32, every entry T: cuDNN reads it on the device

  size_t weight_space_bytes = 0;  // cuDNN's, which the zero-copy path requires to be the canonical size
  size_t workspace_bytes = 0;
  size_t reserve_bytes = 0;

  // True: cuDNN's weight space is the canonical layout, so the caller's weights and weight
  // gradients go to cuDNN as they are. False: they are packed into (and gradients added back
  // from) the buffers below, through the block table.
  bool zero_copy = false;
  DeviceMemory packed_weights, packed_dweights;  // weight_space_bytes each; repacking only
  DeviceMemory blocks;                            // (block_count) WeightBlock; repacking only
  int block_count = 0;
  size_t largest_block = 0;

  // Created on first need (outside a capture), for the calls that pass nullptr:
  DeviceMemory zero_dy;     // (T, B, H * D) zeros: backward data without output gradients
  DeviceMemory dx_scratch;  // (T, B, in): backward data whose dx nobody wants
};

// Key: the geometry's fields, the math type and whether repacking was forced.
using RnnKey = std::array<int, 8>;
RnnKey rnn_key(const RnnGeometry& g, cudnnMathType_t math_type, bool always_repack);

struct RnnPlans {
  std::map<RnnKey, std::unique_ptr<RnnPlan>> plans;
  size_t created = 0;
};

// Describes `g` to cuDNN, asks for its sizes, compares cuDNN's weight offsets with the canonical
// layout and sets up the zero-copy or the repacking path. Synchronous: it allocates, and its small
// uploads go through `stream`, which it synchronises before returning; call outside a capture.
// `always_repack` takes the repacking path even where zero copy would do (for its tests).
std::unique_ptr<RnnPlan> build_rnn_plan(cudnnHandle_t handle, cudaStream_t stream,
                                        const RnnGeometry& g, cudnnMathType_t math_type,
                                        bool always_repack);

}  // namespace dpbench
