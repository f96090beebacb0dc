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

#include "engine/backend/cnn_geometry.h"
#include "engine/cuda/cudnn_raii.h"
#include "engine/cuda/device_memory.h"

namespace dpbench {

struct ConvPlan {
  CudnnTensorDescriptor input, output;
  CudnnFilterDescriptor filter;
  CudnnConvolutionDescriptor convolution;
  cudnnMathType_t math_type = CUDNN_FMA_MATH;  // what the convolution descriptor was given
  cudnnConvolutionFwdAlgo_t forward_algorithm = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t backward_data_algorithm = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  cudnnConvolutionBwdFilterAlgo_t backward_filter_algorithm = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
  size_t forward_workspace_bytes = 0;
  size_t backward_data_workspace_bytes = 0;
  size_t backward_filter_workspace_bytes = 0;
  // Passes that run through cuDNN's graph API instead (CudnnGraphConvolutions), where its plan
  // timed faster than the classic algorithm (Note [convolution paths] in cuda_conv_ops.cpp).
  bool graph_forward = false, graph_backward_data = false, graph_backward_filter = false;
  // The forward with its bias and ReLU as one graph-API kernel (conv2d_forward_bias); decided
  // once, by conv2d_bias_workspace_bytes.
  bool fused_bias_relu = false, fused_bias_relu_decided = false;
  // The forward with batch norm's sums in its epilogue as one graph-API kernel
  // (conv2d_forward_statistics); decided once, by conv2d_statistics_workspace_bytes.
  bool fused_statistics = false, fused_statistics_decided = false;
  // The accumulating backward-data pass (dx += dgrad, a tensor two layers read) through the graph
  // API; decided at its first call (decide_graph_accumulate in cuda_conv_ops.cpp). Its workspace
  // stays out of workspace_bytes(): it was chosen to fit the workspace the layers already had.
  bool graph_backward_data_accumulate = false, graph_accumulate_decided = false;
  size_t graph_accumulate_workspace_bytes = 0;
  size_t graph_workspace_bytes = 0;  // the largest of the graph passes' in use
  float forward_ms = 0.0f;           // the chosen forward's timed run (0: not timed)

  // One workspace serves all three passes of a layer.
  size_t workspace_bytes() const {
    return std::max({forward_workspace_bytes, backward_data_workspace_bytes,
                     backward_filter_workspace_bytes, graph_workspace_bytes});
  }
};

struct PoolPlan {
  CudnnTensorDescriptor input, output;
  CudnnPoolingDescriptor pooling;
  // Whether each pass runs dpbench's kernel instead of cuDNN's, decided once (CudaBackend's
  // pool_forward and pool_backward): the backward's tiled kernel where the windows tile the input;
  // else dpbench's where it timed faster at the pass's first call or the run is deterministic.
  // One plan serves a geometry with and without PoolGeometry::relu_input (pool_key leaves it out):
  // the choice timed for one holds for both, and either choice is correct for either.
  struct OwnKernel {
    bool own = false, decided = false;
  };
  OwnKernel forward, backward;
  // Max pooling's two-pass backward: each window's first maximum's position (one byte per output
  // element), allocated at the first backward call outside a stream capture.
  DeviceMemory max_positions;
};

// Keys of the plan caches, ordered by the geometries' own fields (an ordered map needs no hash to
// be written, and a network has a few dozen shapes at most): a convolution's whole geometry, a
// pooling's plan_fields().
using ConvKey = ConvGeometry;
struct PoolKey {
  PoolGeometry geometry;
  bool operator<(const PoolKey& o) const { return geometry.plan_fields() < o.geometry.plan_fields(); }
};

inline ConvKey conv_key(const ConvGeometry& g) { return g; }
inline PoolKey pool_key(const PoolGeometry& g) { return PoolKey{g}; }

struct CudnnPlans {
  std::map<ConvKey, ConvPlan> convolutions;
  std::map<PoolKey, PoolPlan> pools;
};

cudnnDataType_t cudnn_data_type(DataType type);

// Tensor descriptor of `shape` in its own layout and element type.
void describe_tensor(const CudnnTensorDescriptor& descriptor, const Tensor4& shape);
// The math type a convolution of `g` runs with: `fp32_math` (FMA or TF32, the backend's choice)
// for fp32 data, tensor cores for 16-bit data, which is what 16-bit data is for.
cudnnMathType_t convolution_math_type(const ConvGeometry& g, cudnnMathType_t fp32_math);
// The classic API's algorithm names, cuDNN's enumerators in lower case without their prefix
// ("implicit_precomp_gemm", "winograd_nonfused", "fft_tiling", "algo_1"), for summary.math_paths:
// Winograd and FFT do fewer multiplications than the direct convolution the FLOP count assumes.
const char* conv_algorithm_name(cudnnConvolutionFwdAlgo_t algorithm);
const char* conv_algorithm_name(cudnnConvolutionBwdDataAlgo_t algorithm);
const char* conv_algorithm_name(cudnnConvolutionBwdFilterAlgo_t algorithm);
// Describes the tensors, filter and convolution of `g` (validated against cuDNN's output shape),
// with fp32 accumulation whatever the data type; the algorithms are left for the caller to choose.
void describe_convolution(ConvPlan& plan, const ConvGeometry& g, cudnnMathType_t math_type);

}  // namespace dpbench
