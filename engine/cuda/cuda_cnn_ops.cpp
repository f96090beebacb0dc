// CudaBackend's image ops other than convolution: pooling through cuDNN (descriptors cached per
// shape) or dpbench's kernels, whichever times faster per shape and pass (or tiles);
// batch norm through cuda_kernels_batch_norm.cu; per-channel bias, dropout and channel slices
// through cuda_kernels_cnn.cu. Image buffers hold the shape's type (fp32, fp16 or bf16).
#include <cudnn.h>

#include <algorithm>
#include <string>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cudnn_plans.h"
#include "engine/cuda/stream_timing.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

cudnnPoolingMode_t cudnn_pooling_mode(PoolMode mode) {
  switch (mode) {
    // The deterministic variant routes each window's gradient to one position, reproducibly.
    case PoolMode::max: return CUDNN_POOLING_MAX_DETERMINISTIC;
    case PoolMode::average_include_padding: return CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    case PoolMode::average_exclude_padding: return CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  }
  throw RuntimeError("unknown pooling mode");
}

// A channel slice of `whole` (channels [offset, offset + slice.c)) seen as strided rows: NCHW
// has one row of slice.c * h * w elements per image, NHWC one row of slice.c elements per pixel.
// Lengths and strides count elements; whole_offset_bytes is where the slice starts in `whole`.
struct ChannelSliceRows {
  size_t rows = 0, row_length = 0;
  size_t slice_stride = 0, whole_stride = 0;
  size_t whole_offset_bytes = 0;
  size_t element_bytes = 0;
};

ChannelSliceRows channel_slice_rows(const Tensor4& whole, const Tensor4& slice, int offset,
                                    const char* caller) {
  if (whole.n != slice.n || whole.h != slice.h || whole.w != slice.w ||
      whole.format != slice.format || whole.type != slice.type || offset < 0 ||
      offset + slice.c > whole.c) {
    throw RuntimeError(std::string("CudaBackend::") + caller + ": channels [" +
                       std::to_string(offset) + ", " + std::to_string(offset + slice.c) +
                       ") as " + describe(slice) + " do not fit " + describe(whole));
  }
  const size_t plane = static_cast<size_t>(whole.h) * whole.w;
  ChannelSliceRows rows;
  rows.element_bytes = data_type_bytes(whole.type);
  size_t whole_offset = 0;
  if (whole.format == DataFormat::nchw) {
    rows.rows = static_cast<size_t>(whole.n);
    rows.row_length = static_cast<size_t>(slice.c) * plane;
    rows.whole_stride = static_cast<size_t>(whole.c) * plane;
    whole_offset = static_cast<size_t>(offset) * plane;
  } else {
    rows.rows = static_cast<size_t>(whole.n) * plane;
    rows.row_length = static_cast<size_t>(slice.c);
    rows.whole_stride = static_cast<size_t>(whole.c);
    whole_offset = static_cast<size_t>(offset);
  }
  rows.slice_stride = rows.row_length;
  rows.whole_offset_bytes = whole_offset * rows.element_bytes;
  return rows;
}

// The kernels see a tensor as `outer` blocks of (channels x inner): NCHW has outer = n and inner =
// h * w, NHWC outer = n * h * w and inner = 1.
cuda_kernels::ChannelLayout channel_layout(const Tensor4& shape) {
  const size_t plane = static_cast<size_t>(shape.h) * shape.w;
  cuda_kernels::ChannelLayout layout;
  layout.channels = shape.c;
  layout.outer = shape.format == DataFormat::nchw ? static_cast<size_t>(shape.n) : shape.n * plane;
  layout.inner = shape.format == DataFormat::nchw ? plane : 1;
  return layout;
}

// dpbench's pooling kernels index in 32 bits.
bool pool_fits_own_kernels(const PoolGeometry& g) {
  constexpr size_t kLimit = size_t{1} << 31;
  return g.input.count() < kLimit && g.output.count() < kLimit;
}

cuda_kernels::PoolShape pool_shape(const PoolGeometry& g) {
  cuda_kernels::PoolShape shape;
  shape.n = static_cast<unsigned>(g.input.n);
  shape.c = static_cast<unsigned>(g.input.c);
  shape.in_h = static_cast<unsigned>(g.input.h);
  shape.in_w = static_cast<unsigned>(g.input.w);
  shape.out_h = g.output.h;
  shape.out_w = g.output.w;
  shape.window_h = g.window_h;
  shape.window_w = g.window_w;
  shape.stride_h = g.stride_h;
  shape.stride_w = g.stride_w;
  shape.pad_h = g.pad_h;
  shape.pad_w = g.pad_w;
  shape.include_padding = g.mode == PoolMode::average_include_padding;
  return shape;
}

// dpbench's kernels in deterministic runs: the reference's arithmetic, so the same bits every run
// (a choice, not a timing). Else the faster of the two, each timed three times at the first call
// outside a stream capture (the eager first step), on the call's own buffers, whose output both
// overwrite completely; until then cuDNN's.
template <typename CudnnPass, typename OwnPass>
void run_faster_pool_kernel(cudaStream_t stream, bool deterministic, PoolPlan::OwnKernel& choice,
                            const CudnnPass& cudnn_kernel, const OwnPass& own_kernel) {
  if (!choice.decided && deterministic) choice.decided = choice.own = true;
  if (!choice.decided && !stream_capturing(stream)) {
    choice.decided = true;
    constexpr int kRuns = 3;
    float cudnn_ms = 1e30f, own_ms = 1e30f;
    for (int run = 0; run < kRuns; ++run) {
      cudnn_ms = std::min(cudnn_ms, timed_on_stream(stream, cudnn_kernel));
      own_ms = std::min(own_ms, timed_on_stream(stream, own_kernel));
    }
    choice.own = own_ms < cudnn_ms;
  }
  if (choice.own) return own_kernel();
  cudnn_kernel();
}

}  // namespace

PoolPlan& CudaBackend::pool_plan(const PoolGeometry& g) {
  const PoolKey key = pool_key(g);
  const auto found = plans_->pools.find(key);
  if (found != plans_->pools.end()) return found->second;
  if (g.output.n != g.input.n || g.output.c != g.input.c || g.output.format != g.input.format ||
      g.output.type != g.input.type) {
    throw RuntimeError("pooling geometry is inconsistent: " + describe(g.input) + " -> " +
                       describe(g.output));
  }
  PoolPlan plan;
  describe_tensor(plan.input, g.input);
  describe_tensor(plan.output, g.output);
  DPB_CUDNN_CHECK(cudnnSetPooling2dDescriptor(plan.pooling.get(), cudnn_pooling_mode(g.mode),
                                              CUDNN_NOT_PROPAGATE_NAN, g.window_h, g.window_w,
                                              g.pad_h, g.pad_w, g.stride_h, g.stride_w));
  int n = 0, c = 0, h = 0, w = 0;
  DPB_CUDNN_CHECK(
      cudnnGetPooling2dForwardOutputDim(plan.pooling.get(), plan.input.get(), &n, &c, &h, &w));
  if (h != g.output.h || w != g.output.w) {
    throw RuntimeError("pooling geometry " + describe(g.input) + " -> " + describe(g.output) +
                       " disagrees with cuDNN's output size " + std::to_string(h) + "x" +
                       std::to_string(w));
  }
  return plans_->pools.emplace(key, std::move(plan)).first->second;
}

void CudaBackend::add_channel_bias(const Tensor4& shape, void* y, const float* bias, bool relu) {
  cuda_kernels::launch_add_channel_bias(stream_, shape.type, y, bias, channel_layout(shape), relu);
}

size_t CudaBackend::channel_bias_workspace_bytes(const Tensor4& shape) {
  return cuda_kernels::channel_sum_workspace_bytes(channel_layout(shape));
}

void CudaBackend::channel_bias_gradient(const Tensor4& shape, const void* y, void* dy,
                                        float* dbias, bool relu, void* workspace) {
  cuda_kernels::launch_channel_bias_gradient(stream_, shape.type, y, dy, dbias, relu,
                                             channel_layout(shape), static_cast<float*>(workspace));
}

void CudaBackend::batch_norm_forward_training(const Tensor4& shape, const void* x,
                                              const float* gamma, const float* beta,
                                              float epsilon, bool relu, void* y,
                                              float* saved_mean, float* saved_inv_std,
                                              void* workspace, const void* residual,
                                              const float* x_statistics) {
  cuda_kernels::launch_batch_norm_forward(stream_, shape, x, residual, gamma, beta, epsilon, relu, y,
                                          saved_mean, saved_inv_std, workspace, x_statistics);
}

void CudaBackend::batch_norm_pair_forward_training(const Tensor4& shape, const void* x, const float* gamma,
                                                   const float* beta, float* saved_mean, float* saved_inv_std,
                                                   const void* z, const float* z_gamma, const float* z_beta,
                                                   float* z_saved_mean, float* z_saved_inv_std, float epsilon,
                                                   bool relu, void* y, void* workspace,
                                                   const float* x_statistics, const float* z_statistics) {
  cuda_kernels::launch_batch_norm_pair_forward(stream_, shape, x, gamma, beta, saved_mean, saved_inv_std, z, z_gamma,
                                               z_beta, z_saved_mean, z_saved_inv_std, epsilon, relu, y, workspace,
                                               x_statistics, z_statistics);
}

void CudaBackend::batch_norm_inference(const Tensor4& shape, const void* x, const InferenceNorm& norm,
                                       const void* z, const InferenceNorm* z_norm, bool relu, void* y) {
  cuda_kernels::launch_batch_norm_inference(stream_, shape, x, norm, z, z_norm, relu, y);
}

void CudaBackend::batch_norm_backward(const Tensor4& shape, const void* x, const void* y,
                                      const void* dy, const float* gamma, const float* saved_mean,
                                      const float* saved_inv_std, float /*epsilon*/, bool relu,
                                      void* dx, float* dgamma, float* dbeta, void* workspace,
                                      void* d_residual) {
  // epsilon is already inside saved_inv_std.
  cuda_kernels::launch_batch_norm_backward(stream_, shape, x, y, dy, gamma, saved_mean,
                                           saved_inv_std, relu, dx, d_residual, dgamma, dbeta, workspace);
}

size_t CudaBackend::batch_norm_workspace_bytes(const Tensor4& shape) {
  return cuda_kernels::batch_norm_workspace_bytes(shape);
}

void CudaBackend::pool_forward(const PoolGeometry& g, const void* x, void* y) {
  PoolPlan& plan = pool_plan(g);
  auto cudnn_forward = [&] {
    const float one = 1.0f, zero = 0.0f;  // float for 16-bit data too: cuDNN's rule
    DPB_CUDNN_CHECK(cudnnPoolingForward(cudnn_, plan.pooling.get(), &one, plan.input.get(), x, &zero,
                                        plan.output.get(), y));
  };
  if (!pool_fits_own_kernels(g)) return cudnn_forward();
  const cuda_kernels::PoolShape shape = pool_shape(g);
  const bool nhwc = g.input.format == DataFormat::nhwc, max = g.mode == PoolMode::max;
  run_faster_pool_kernel(stream_, deterministic_, plan.forward, cudnn_forward, [&] {
    cuda_kernels::launch_pool_forward(stream_, g.input.type, x, y, shape, nhwc, max);
  });
}

void CudaBackend::pool_backward(const PoolGeometry& g, const void* x, const void* y,
                                const void* dy, void* dx) {
  PoolPlan& plan = pool_plan(g);
  auto cudnn_backward = [&] {
    const float one = 1.0f, zero = 0.0f;
    DPB_CUDNN_CHECK(cudnnPoolingBackward(cudnn_, plan.pooling.get(), &one, plan.output.get(), y,
                                         plan.output.get(), dy, plan.input.get(), x, &zero,
                                         plan.input.get(), dx));
  };
  if (!pool_fits_own_kernels(g)) {
    cudnn_backward();
    if (g.relu_input) cuda_kernels::launch_relu_backward(stream_, g.input.type, x, dx, dx, g.input.count(), 1.0f);
    return;
  }
  cuda_kernels::PoolShape shape = pool_shape(g);
  const bool nhwc = g.input.format == DataFormat::nhwc, max = g.mode == PoolMode::max;
  if (max && cuda_kernels::pool_tiles_exactly(shape)) {
    plan.backward.decided = plan.backward.own = true;
    shape.relu_input = g.relu_input;  // masked in the same pass
    return cuda_kernels::launch_pool_backward(stream_, g.input.type, x, dy, dx, shape, nhwc,
                                              cuda_kernels::PoolBackwardKernel::tiled, max);
  }
  if (max && cuda_kernels::max_pool_positions_fit(shape)) {
    // Overlapping windows: cuDNN's, or each window's first maximum found once and then gathered
    // (with the ReLU's backward in the same pass), whichever is faster. The second needs a
    // positions buffer: allocated while it may still run (undecided, or chosen), never inside a
    // capture, and freed once cuDNN's wins; without memory for it the kernels below run instead.
    const bool two_pass_may_run = !plan.backward.decided || plan.backward.own;
    if (two_pass_may_run && plan.max_positions.data() == nullptr && !stream_capturing(stream_)) {
      try {
        plan.max_positions = DeviceMemory(cuda_kernels::max_pool_positions_bytes(shape), memory_,
                                          MemoryTag{MemoryCategory::workspaces, "max-pool positions"});
      } catch (const RuntimeError&) {
        // cudaMalloc refused: the gather and cuDNN's need no buffer.
      }
    }
    if (two_pass_may_run && plan.max_positions.data() != nullptr) {
      shape.relu_input = g.relu_input;
      auto cudnn_then_relu = [&] {
        cudnn_backward();
        if (g.relu_input) cuda_kernels::launch_relu_backward(stream_, g.input.type, x, dx, dx, g.input.count(), 1.0f);
      };
      run_faster_pool_kernel(stream_, deterministic_, plan.backward, cudnn_then_relu, [&] {
        cuda_kernels::launch_pool_backward(stream_, g.input.type, x, dy, dx, shape, nhwc,
                                           cuda_kernels::PoolBackwardKernel::two_pass, max,
                                           plan.max_positions.as<uint8_t>());
      });
      if (plan.backward.decided && !plan.backward.own) plan.max_positions = DeviceMemory();
      return;
    }
  }
  if (g.relu_input) {
    // Other windows: the pooling's backward, then the ReLU's over dx.
    PoolGeometry plain = g;
    plain.relu_input = false;
    pool_backward(plain, x, y, dy, dx);
    cuda_kernels::launch_relu_backward(stream_, g.input.type, x, dx, dx, g.input.count(), 1.0f);
    return;
  }
  // Which is faster depends on the windows, layout and type: cuDNN is slow in NHWC; the gather
  // rescans a max window once per element it holds.
  run_faster_pool_kernel(stream_, deterministic_, plan.backward, cudnn_backward, [&] {
    cuda_kernels::launch_pool_backward(stream_, g.input.type, x, dy, dx, shape, nhwc,
                                       cuda_kernels::PoolBackwardKernel::gather, max);
  });
}

void CudaBackend::dropout_forward(DataType type, const void* x, void* y, size_t n, float rate,
                                  uint64_t seed, uint64_t first_index, const int32_t* step) {
  cuda_kernels::launch_dropout(stream_, type, x, y, n, rate, seed, first_index, step);
}

void CudaBackend::dropout_backward(DataType type, const void* dy, void* dx, size_t n, float rate,
                                   uint64_t seed, uint64_t first_index, const int32_t* step) {
  // The mask is a pure function of (seed, step, index): regenerating it costs less than storing it.
  cuda_kernels::launch_dropout(stream_, type, dy, dx, n, rate, seed, first_index, step);
}

void CudaBackend::copy_into_channels(const Tensor4& src_shape, const void* src,
                                     const Tensor4& dst_shape, void* dst, int channel_offset) {
  const ChannelSliceRows rows =
      channel_slice_rows(dst_shape, src_shape, channel_offset, "copy_into_channels");
  cuda_kernels::launch_copy_rows(stream_, src, rows.slice_stride,
                                 static_cast<char*>(dst) + rows.whole_offset_bytes,
                                 rows.whole_stride, rows.row_length, rows.rows, rows.element_bytes);
}

void CudaBackend::copy_from_channels(const Tensor4& src_shape, const void* src,
                                     int channel_offset, const Tensor4& dst_shape, void* dst) {
  const ChannelSliceRows rows =
      channel_slice_rows(src_shape, dst_shape, channel_offset, "copy_from_channels");
  cuda_kernels::launch_copy_rows(stream_, static_cast<const char*>(src) + rows.whole_offset_bytes,
                                 rows.whole_stride, dst, rows.slice_stride, rows.row_length,
                                 rows.rows, rows.element_bytes);
}

}  // namespace dpbench
