// Image-op kernels cuDNN has no call for: per-channel bias in NCHW (NHWC is the row-major bias of
// cuda_kernels_elementwise/reduce), inverted dropout with a counter-based mask, and the strided
// row copy behind channel slices. Kernels first, launchers after.
#include "engine/counter_random.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"

namespace dpbench::cuda_kernels {
namespace {

// y (n, c, hw) += bias (c)
__global__ void add_channel_bias_nchw_kernel(float* y, const float* bias, size_t total, int channels,
                                             size_t plane) {
  DPB_GRID_STRIDE_LOOP(i, total) { y[i] += bias[(i / plane) % channels]; }
}

// dbias (c) = sum over n and hw of dy (n, c, hw). One block per channel walks the channel's n
// planes as one flat range; each thread's share and the block reduction have a fixed order, so
// the result is reproducible without atomics.
__global__ void channel_bias_gradient_nchw_kernel(const float* dy, float* dbias, int batch,
                                                  int channels, size_t plane) {
  __shared__ float shared[32];
  const int channel = blockIdx.x;
  const size_t count = static_cast<size_t>(batch) * plane;
  float sum = 0.0f;
  for (size_t j = threadIdx.x; j < count; j += blockDim.x) {
    const size_t image = j / plane;
    sum += dy[(image * channels + channel) * plane + j % plane];
  }
  sum = block_reduce(sum, SumOp{}, 0.0f, shared);
  if (threadIdx.x == 0) dbias[channel] = sum;
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

void launch_add_channel_bias_nchw(cudaStream_t stream, float* y, const float* bias, int batch,
                                  int channels, size_t plane) {
  const size_t total = static_cast<size_t>(batch) * channels * plane;
  if (total == 0) return;
  add_channel_bias_nchw_kernel<<<grid_for(total), kBlockSize, 0, stream>>>(y, bias, total,
                                                                          channels, plane);
  DPB_CUDA_CHECK_LAUNCH(add_channel_bias_nchw_kernel);
}

void launch_channel_bias_gradient_nchw(cudaStream_t stream, const float* dy, float* dbias,
                                       int batch, int channels, size_t plane) {
  if (channels <= 0) return;
  channel_bias_gradient_nchw_kernel<<<channels, kBlockSize, 0, stream>>>(dy, dbias, batch,
                                                                         channels, plane);
  DPB_CUDA_CHECK_LAUNCH(channel_bias_gradient_nchw_kernel);
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
