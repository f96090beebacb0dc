// What CudaBackend caches per shape for its cuDNN calls: descriptors and, for convolutions, the
// chosen algorithms and their workspace. Building these costs microseconds to seconds (an
// algorithm search), so it happens once per shape and the per-step calls only look them up.
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <map>
#include <string>

#include "engine/cnn_geometry.h"
#include "engine/cuda/cudnn_raii.h"

namespace dpbench {

struct ConvPlan {
  CudnnTensorDescriptor input, output;
  CudnnFilterDescriptor filter;
  CudnnConvolutionDescriptor convolution;
  cudnnConvolutionFwdAlgo_t forward_algorithm = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t backward_data_algorithm = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  cudnnConvolutionBwdFilterAlgo_t backward_filter_algorithm = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
  size_t forward_workspace_bytes = 0;
  size_t backward_data_workspace_bytes = 0;
  size_t backward_filter_workspace_bytes = 0;

  // One workspace serves all three passes of a layer.
  size_t workspace_bytes() const {
    return std::max({forward_workspace_bytes, backward_data_workspace_bytes,
                     backward_filter_workspace_bytes});
  }
};

struct PoolPlan {
  CudnnTensorDescriptor input, output;
  CudnnPoolingDescriptor pooling;
};

// Keys: every field that changes a descriptor, flattened (an ordered map needs no hash to be
// written, and a network has a few dozen shapes at most).
using ConvKey = std::array<int, 18>;
using PoolKey = std::array<int, 16>;

ConvKey conv_key(const ConvGeometry& g);
PoolKey pool_key(const PoolGeometry& g);

struct CudnnPlans {
  std::map<ConvKey, ConvPlan> convolutions;
  std::map<PoolKey, PoolPlan> pools;
};

// fp32 tensor descriptor of `shape` in its own layout.
void describe_tensor(const CudnnTensorDescriptor& descriptor, const Tensor4& shape);
// Describes the tensors, filter and convolution of `g` (validated against cuDNN's output shape);
// the algorithms are left for the caller to choose.
void describe_convolution(ConvPlan& plan, const ConvGeometry& g, cudnnMathType_t math_type);

}  // namespace dpbench
