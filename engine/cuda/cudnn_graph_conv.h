// Convolutions through cuDNN's graph ("backend") API: fprop, fprop with a fused per-channel bias
// and ReLU, dgrad (overwriting or accumulating) and wgrad, on 4-D NCHW or NHWC tensors of fp32,
// fp16 or bf16 with fp32 compute. In NHWC 16-bit the best sm_90 kernels and the runtime-fused
// ones are reachable only this way (PyTorch reaches them so too); the classic API cannot fuse.
// prepare() builds and times the plans of one geometry once; the per-step calls only run them.
// See Note [graph convolution plans] in cudnn_graph_conv.cpp for how a plan is chosen.
//
// This header needs no CUDA header (cudnn.h declares the same handle type), so that code built
// without them, the [gpu] tests, can use it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "engine/backend/cnn_geometry.h"
#include "engine/backend/device.h"
#include "engine/errors.h"

struct cudnnContext;
typedef struct cudnnContext* cudnnHandle_t;  // exactly as cudnn.h declares it

namespace dpbench {

enum class ConvPass { forward, backward_data, backward_filter };

// What is fused around the convolution: bias_relu (forward only) gives y = relu(conv + bias) with
// a (1, K, 1, 1) fp32 bias; accumulate (backward_data only) gives dx = dgrad + dx. statistics
// (forward only) gives y = conv(x) and, per output channel, the fp32 sum and sum of squares of y
// over (n, h, w): batch norm's statistics made in the convolution's epilogue instead of in a pass
// that reads y again. input_scale_bias_relu_statistics (forward only) is the same for
// y = conv(relu(x * scale + bias)), with (1, C, 1, 1) scale and bias per input channel in x's
// type (cuDNN's pattern for this fusion: 16-bit scale, bias and intermediates, fp32 compute): the
// previous batch norm's apply and ReLU in the convolution's prologue, so the normalised input is
// never stored.
enum class ConvEpilogue { none, bias_relu, accumulate, statistics, input_scale_bias_relu_statistics };

// The buffers of a statistics plan beyond x, w and y (see ConvEpilogue): K floats each for the
// sums; C elements of x's type each for the input's scale and bias
// (input_scale_bias_relu_statistics only).
struct ConvStatisticsBuffers {
  float* sum = nullptr;
  float* square_sum = nullptr;
  const void* input_scale = nullptr;
  const void* input_bias = nullptr;
};

// No cuDNN engine runs this graph (a fused epilogue for this shape or type, say) within the
// workspace limit. Callers catch it to fall back to the unfused path; prepare() keeps the answer,
// so asking again costs a map lookup.
class GraphConvolutionUnsupported : public RuntimeError {
 public:
  explicit GraphConvolutionUnsupported(const std::string& message) : RuntimeError(message) {}
};

// One per stream, like CudaBackend: the handle's stream is where everything runs, and the plan
// cache is not locked. The device must be current on the calling thread.
class CudnnGraphConvolutions {
 public:
  // `handle` is bound to its stream by the owner and must outlive this object. `allow_tf32`
  // lets fp32 data run on TF32 tensor cores; without it, engines cuDNN notes as using tensor cores
  // on fp32 data are excluded. It is part of every plan's choice, so a change of mind is a new
  // object.
  explicit CudnnGraphConvolutions(cudnnHandle_t handle, bool allow_tf32 = false);
  // For code built without the CUDA headers (the tests): a cuDNN handle of its own, bound to
  // `device`'s `stream`. Throws RuntimeError unless `device` is a CUDA device.
  CudnnGraphConvolutions(Device& device, StreamKind stream, bool allow_tf32 = false);
  ~CudnnGraphConvolutions();
  CudnnGraphConvolutions(const CudnnGraphConvolutions&) = delete;
  CudnnGraphConvolutions& operator=(const CudnnGraphConvolutions&) = delete;

  // Builds, times and caches the plan of (g, pass, epilogue) on first use; later calls return at
  // once. Returns the workspace bytes the plan needs (at most `workspace_limit`). Buffers by the
  // geometry's roles: `x` the input or its gradient, `w` the filter or its gradient, `y` the
  // output or its gradient, `bias` (bias_relu only) K floats, `workspace` `workspace_limit`
  // bytes. The timing runs the candidates on these buffers and overwrites the pass's output (y,
  // x or w), so give it scratch or data that is about to be overwritten. Synchronises the stream:
  // never call it for a new geometry during a graph capture (that throws RuntimeError). Throws
  // GraphConvolutionUnsupported when no engine fits, RuntimeError for inconsistent geometry,
  // combination or misaligned (under 16 bytes) buffers.
  size_t prepare(const ConvGeometry& g, ConvPass pass, ConvEpilogue epilogue,
                 size_t workspace_limit, void* x, void* w, void* y, const float* bias,
                 void* workspace);
  // The same for the forward statistics epilogues, with their buffers; refuses the others.
  size_t prepare_statistics(const ConvGeometry& g, ConvEpilogue epilogue, size_t workspace_limit,
                            void* x, void* w, void* y, const ConvStatisticsBuffers& statistics,
                            void* workspace);

  // The per-step calls: a variant pack (host memory only) and one cudnnBackendExecute on the
  // handle's stream; no device allocation, no synchronisation, so they can be captured. Each
  // throws RuntimeError when its plan was not prepared or the workspace is smaller than prepare()
  // returned.
  void forward(const ConvGeometry& g, const void* x, const void* w, void* y, void* workspace,
               size_t workspace_bytes);
  void forward_bias_relu(const ConvGeometry& g, const void* x, const void* w, const float* bias,
                         void* y, void* workspace, size_t workspace_bytes);
  // statistics or input_scale_bias_relu_statistics, as prepared.
  void forward_statistics(const ConvGeometry& g, ConvEpilogue epilogue, const void* x, const void* w,
                          void* y, const ConvStatisticsBuffers& statistics, void* workspace,
                          size_t workspace_bytes);
  void backward_data(const ConvGeometry& g, const void* dy, const void* w, void* dx,
                     void* workspace, size_t workspace_bytes, bool accumulate = false);
  void backward_filter(const ConvGeometry& g, const void* x, const void* dy, void* dw,
                       void* workspace, size_t workspace_bytes);

  // The prepared plan in a few words, for the result JSON: "engine 12 (runtime compiled), 2.0 MiB
  // workspace, fastest of 6 timed". Throws RuntimeError when not prepared.
  std::string describe(const ConvGeometry& g, ConvPass pass, ConvEpilogue epilogue) const;

  // The prepared plan's best time when prepare() timed it, in milliseconds (for choosing between
  // this path and another). Throws as describe() does, GraphConvolutionUnsupported included.
  double timed_milliseconds(const ConvGeometry& g, ConvPass pass, ConvEpilogue epilogue) const;

  // Plans built (supported or not); prepare() of a cached geometry adds none.
  size_t plans_built() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpbench
