// Image-op kernels cuDNN has no call for: per-channel bias (add, with an optional ReLU, and its
// gradient, with the ReLU's mask), inverted dropout with a counter-based mask, and the strided
// row copy behind channel slices. Kernels first, launchers after.
#include <algorithm>

#include "engine/counter_random.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"

namespace dpbench::cuda_kernels {
namespace {

// ---- per-channel bias ------------------------------------------------------------------
// NHWC (inner == 1): a (rows, channels) matrix. NCHW: one block per (image, channel) plane,
// threads along the plane, so no per-element division finds the channel.
template <bool kRelu>
__device__ __forceinline__ float biased(float value, float bias) {
  const float sum = value + bias;
  return kRelu && !(sum > 0.0f) ? 0.0f : sum;
}

template <bool kRelu>
__global__ void add_bias_rows_kernel(float* y, const float* bias, size_t total, unsigned channels) {
  DPB_GRID_STRIDE_LOOP(i, total) { y[i] = biased<kRelu>(y[i], bias[i % channels]); }
}

template <bool kRelu>
__global__ void add_bias_planes_kernel(float* y, const float* bias, size_t planes, int channels,
                                       size_t inner) {
  for (size_t plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    const float b = bias[plane % channels];
    float* row = y + plane * inner;
    for (size_t i = threadIdx.x; i < inner; i += blockDim.x) row[i] = biased<kRelu>(row[i], b);
  }
}

// The per-channel sums run in two stages with a fixed shape, so they are reproducible: stage 1
// writes partial sums (parts, channels) to the workspace, stage 2 adds each channel's parts in
// order. Stage 1 also applies the ReLU mask to dy when asked, since it reads dy anyway.
constexpr int kChannelTile = 32;  // NHWC: channels per block (one warp's coalesced row)
constexpr int kRowLanes = 8;      // NHWC: rows in flight per block
constexpr int kTargetBlocks = 2048;

struct ChannelSumShape {
  bool planes = false;  // NCHW: one part per image; NHWC: one part per chunk of rows
  size_t parts = 0;
  size_t rows_per_part = 0;  // NHWC
  unsigned tiles = 0;        // NHWC: channel tiles
};

ChannelSumShape channel_sum_shape(const ChannelLayout& layout) {
  ChannelSumShape shape;
  if (layout.inner > 1) {
    shape.planes = true;
    shape.parts = layout.outer;
    return shape;
  }
  shape.tiles = static_cast<unsigned>((layout.channels + kChannelTile - 1) / kChannelTile);
  const size_t wanted = (kTargetBlocks + shape.tiles - 1) / shape.tiles;
  const size_t most = (layout.outer + kRowLanes - 1) / kRowLanes;  // at least kRowLanes rows each
  shape.parts = std::max<size_t>(1, std::min(wanted, most));
  shape.rows_per_part = (layout.outer + shape.parts - 1) / shape.parts;
  shape.parts = (layout.outer + shape.rows_per_part - 1) / shape.rows_per_part;
  return shape;
}

template <bool kRelu>
__device__ __forceinline__ float masked_gradient(const float* y, float* dy, size_t i) {
  float g = dy[i];
  if (kRelu && !(y[i] > 0.0f)) {
    g = 0.0f;
    dy[i] = 0.0f;
  }
  return g;
}

// NHWC stage 1: block (kChannelTile, kRowLanes) sums rows [part * rows_per_part, ...) of its
// channel tile; partials (parts, channels).
template <bool kRelu>
__global__ void channel_sum_rows_kernel(const float* y, float* dy, size_t rows, int channels,
                                        size_t rows_per_part, float* partials) {
  __shared__ float lanes[kRowLanes][kChannelTile + 1];
  const int channel = blockIdx.x * kChannelTile + threadIdx.x;
  const size_t first = blockIdx.y * rows_per_part;
  const size_t last = first + rows_per_part < rows ? first + rows_per_part : rows;
  float sum = 0.0f;
  if (channel < channels) {
    for (size_t row = first + threadIdx.y; row < last; row += kRowLanes)
      sum += masked_gradient<kRelu>(y, dy, row * channels + channel);
  }
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && channel < channels) {
    float total = 0.0f;
    for (int lane = 0; lane < kRowLanes; ++lane) total += lanes[lane][threadIdx.x];
    partials[static_cast<size_t>(blockIdx.y) * channels + channel] = total;
  }
}

// NCHW stage 1: one warp per (image, channel) plane; partials (images, channels) = plane order.
template <bool kRelu>
__global__ void channel_sum_planes_kernel(const float* y, float* dy, size_t planes, size_t inner,
                                          float* partials) {
  const size_t warps_per_block = blockDim.x / 32;
  const size_t lane = threadIdx.x % 32;
  for (size_t plane = blockIdx.x * warps_per_block + threadIdx.x / 32; plane < planes;
       plane += static_cast<size_t>(gridDim.x) * warps_per_block) {
    float sum = 0.0f;
    for (size_t i = lane; i < inner; i += 32) sum += masked_gradient<kRelu>(y, dy, plane * inner + i);
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) partials[plane] = sum;
  }
}

// Stage 2: dbias[c] = sum over parts of partials[part][c], in double, in part order.
__global__ void sum_channel_parts_kernel(const float* partials, size_t parts, int channels,
                                         float* dbias) {
  DPB_GRID_STRIDE_LOOP(c, static_cast<size_t>(channels)) {
    double total = 0.0;
    for (size_t part = 0; part < parts; ++part) total += partials[part * channels + c];
    dbias[c] = static_cast<float>(total);
  }
}

// ---- max-pooling backward for windows that do not overlap -----------------------------------
// cuDNN's deterministic max-pool backward took 10 ms of a 33 ms VGG-16 step in NHWC on an H200.
// When stride >= window every input lies in at most one window, so each input element can find
// its window, rescan it for the first maximum (lowest h, then w, as the reference) and take that
// window's gradient or 0: a gather, with no atomics. Rows are (n, h) in NHWC and (n, c) in NCHW;
// the column index inside a row needs one 32-bit division.
template <bool kNhwc>
__global__ void max_pool_backward_disjoint_kernel(const float* x, const float* dy, float* dx,
                                                  MaxPoolShape s) {
  const unsigned columns = kNhwc ? s.in_w * s.c : s.in_h * s.in_w;
  const unsigned rows = kNhwc ? s.n * s.in_h : s.n * s.c;
  const unsigned column = blockIdx.x * blockDim.x + threadIdx.x;
  if (column >= columns) return;
  for (unsigned row = blockIdx.y; row < rows; row += gridDim.y) {
    unsigned n, c, h, w;
    if (kNhwc) {
      n = row / s.in_h;
      h = row - n * s.in_h;
      w = column / s.c;
      c = column - w * s.c;
    } else {
      n = row / s.c;
      c = row - n * s.c;
      h = column / s.in_w;
      w = column - h * s.in_w;
    }
    auto input_at = [&](unsigned hh, unsigned ww) -> size_t {
      return kNhwc ? ((static_cast<size_t>(n) * s.in_h + hh) * s.in_w + ww) * s.c + c
                   : ((static_cast<size_t>(n) * s.c + c) * s.in_h + hh) * s.in_w + ww;
    };
    const size_t self = input_at(h, w);
    float gradient = 0.0f;
    const int oh = (static_cast<int>(h) + s.pad_h) / s.stride_h;
    const int ow = (static_cast<int>(w) + s.pad_w) / s.stride_w;
    const int h0 = oh * s.stride_h - s.pad_h, w0 = ow * s.stride_w - s.pad_w;
    if (oh < s.out_h && ow < s.out_w && static_cast<int>(h) < h0 + s.window_h &&
        static_cast<int>(w) < w0 + s.window_w) {
      const int h_begin = max(h0, 0), h_end = min(h0 + s.window_h, static_cast<int>(s.in_h));
      const int w_begin = max(w0, 0), w_end = min(w0 + s.window_w, static_cast<int>(s.in_w));
      size_t best = input_at(h_begin, w_begin);
      float best_value = x[best];
      for (int hh = h_begin; hh < h_end; ++hh) {
        for (int ww = w_begin; ww < w_end; ++ww) {
          const size_t at = input_at(hh, ww);
          if (x[at] > best_value) {
            best_value = x[at];
            best = at;
          }
        }
      }
      if (best == self) {
        const size_t out = kNhwc ? ((static_cast<size_t>(n) * s.out_h + oh) * s.out_w + ow) * s.c + c
                                 : ((static_cast<size_t>(n) * s.c + c) * s.out_h + oh) * s.out_w + ow;
        gradient = dy[out];
      }
    }
    dx[self] = gradient;
  }
}

// out = keep ? in / keep_probability : 0, keep = uniform(seed, kRandomStreamDropout + *step, i)
// >= rate. The same mask serves forward (in = x) and backward (in = dy); the step is read on the
// device so that a replayed graph draws a new mask each step. A true division (not a multiply by
// the reciprocal) matches the reference's rounding bit for bit. out may alias in.
__global__ void dropout_kernel(const float* in, float* out, size_t n, float rate,
                               float keep_probability, uint64_t seed, uint64_t first_index,
                               const int32_t* step) {
  const uint64_t random_stream = kRandomStreamDropout + static_cast<uint64_t>(*step);
  DPB_GRID_STRIDE_LOOP(i, n) {
    const bool keep = counter_uniform(seed, random_stream, first_index + i) >= rate;
    out[i] = keep ? in[i] / keep_probability : 0.0f;
  }
}

// dst[r * dst_stride + k] = src[r * src_stride + k] for r < rows, k < row_length.
__global__ void copy_rows_kernel(const float* src, size_t src_stride, float* dst, size_t dst_stride,
                                 size_t row_length, size_t total) {
  DPB_GRID_STRIDE_LOOP(i, total) {
    const size_t row = i / row_length;
    const size_t k = i % row_length;
    dst[row * dst_stride + k] = src[row * src_stride + k];
  }
}

}  // namespace

void launch_add_channel_bias(cudaStream_t stream, float* y, const float* bias,
                             const ChannelLayout& layout, bool relu) {
  const size_t total = layout.outer * layout.channels * layout.inner;
  if (total == 0) return;
  if (layout.inner == 1) {
    const unsigned channels = static_cast<unsigned>(layout.channels);
    if (relu) {
      add_bias_rows_kernel<true><<<grid_for(total), kBlockSize, 0, stream>>>(y, bias, total, channels);
    } else {
      add_bias_rows_kernel<false><<<grid_for(total), kBlockSize, 0, stream>>>(y, bias, total, channels);
    }
  } else {
    const size_t planes = layout.outer * layout.channels;
    const unsigned blocks = static_cast<unsigned>(std::min<size_t>(planes, 65536));
    if (relu) {
      add_bias_planes_kernel<true><<<blocks, kBlockSize, 0, stream>>>(y, bias, planes,
                                                                     layout.channels, layout.inner);
    } else {
      add_bias_planes_kernel<false><<<blocks, kBlockSize, 0, stream>>>(y, bias, planes,
                                                                      layout.channels, layout.inner);
    }
  }
  DPB_CUDA_CHECK_LAUNCH(add_channel_bias);
}

size_t channel_sum_workspace_bytes(const ChannelLayout& layout) {
  return channel_sum_shape(layout).parts * static_cast<size_t>(layout.channels) * sizeof(float);
}

void launch_channel_bias_gradient(cudaStream_t stream, const float* y, float* dy, float* dbias,
                                  bool relu, const ChannelLayout& layout, float* workspace) {
  if (layout.channels <= 0) return;
  const ChannelSumShape shape = channel_sum_shape(layout);
  if (shape.parts == 0 || layout.inner == 0) {
    DPB_CUDA_CHECK(cudaMemsetAsync(dbias, 0, sizeof(float) * layout.channels, stream));
    return;
  }
  if (shape.planes) {
    const size_t planes = layout.outer * layout.channels;
    const size_t warps_per_block = kBlockSize / 32;
    const unsigned blocks = static_cast<unsigned>(
        std::min<size_t>((planes + warps_per_block - 1) / warps_per_block, 65536));
    if (relu) {
      channel_sum_planes_kernel<true><<<blocks, kBlockSize, 0, stream>>>(y, dy, planes, layout.inner, workspace);
    } else {
      channel_sum_planes_kernel<false><<<blocks, kBlockSize, 0, stream>>>(y, dy, planes, layout.inner, workspace);
    }
  } else {
    const dim3 block(kChannelTile, kRowLanes);
    const dim3 grid(shape.tiles, static_cast<unsigned>(shape.parts));
    if (relu) {
      channel_sum_rows_kernel<true><<<grid, block, 0, stream>>>(y, dy, layout.outer, layout.channels,
                                                                shape.rows_per_part, workspace);
    } else {
      channel_sum_rows_kernel<false><<<grid, block, 0, stream>>>(y, dy, layout.outer, layout.channels,
                                                                 shape.rows_per_part, workspace);
    }
  }
  DPB_CUDA_CHECK_LAUNCH(channel_sum_stage1);
  sum_channel_parts_kernel<<<grid_for(static_cast<size_t>(layout.channels)), kBlockSize, 0, stream>>>(
      workspace, shape.parts, layout.channels, dbias);
  DPB_CUDA_CHECK_LAUNCH(sum_channel_parts_kernel);
}

void launch_max_pool_backward_disjoint(cudaStream_t stream, const float* x, const float* dy,
                                       float* dx, const MaxPoolShape& shape, bool nhwc) {
  const unsigned columns = nhwc ? shape.in_w * shape.c : shape.in_h * shape.in_w;
  const unsigned rows = nhwc ? shape.n * shape.in_h : shape.n * shape.c;
  if (columns == 0 || rows == 0) return;
  const dim3 grid((columns + kBlockSize - 1) / kBlockSize, std::min(rows, 65535u));
  if (nhwc) {
    max_pool_backward_disjoint_kernel<true><<<grid, kBlockSize, 0, stream>>>(x, dy, dx, shape);
  } else {
    max_pool_backward_disjoint_kernel<false><<<grid, kBlockSize, 0, stream>>>(x, dy, dx, shape);
  }
  DPB_CUDA_CHECK_LAUNCH(max_pool_backward_disjoint_kernel);
}

void launch_dropout(cudaStream_t stream, const float* in, float* out, size_t n, float rate,
                    uint64_t seed, uint64_t first_index, const int32_t* step) {
  if (n == 0) return;
  const float keep_probability = 1.0f - rate;  // rounded once, as the reference rounds it
  dropout_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(in, out, n, rate, keep_probability, seed,
                                                         first_index, step);
  DPB_CUDA_CHECK_LAUNCH(dropout_kernel);
}

void launch_copy_rows(cudaStream_t stream, const float* src, size_t src_stride, float* dst,
                      size_t dst_stride, size_t row_length, size_t rows) {
  const size_t total = row_length * rows;
  if (total == 0) return;
  copy_rows_kernel<<<grid_for(total), kBlockSize, 0, stream>>>(src, src_stride, dst, dst_stride,
                                                               row_length, total);
  DPB_CUDA_CHECK_LAUNCH(copy_rows_kernel);
}

}  // namespace dpbench::cuda_kernels
