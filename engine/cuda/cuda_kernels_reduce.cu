// Deterministic reductions: bias gradient (column sums of fp32 or 16-bit rows, summed in fp32) and
// the sum of squares behind param_norm.
// No atomics anywhere, so the same input gives the same bits on every run and every GPU count.
// Also the loss-scaling pair: the search for a non-finite gradient (an "any" reduction, where
// every finding writes the same 1, so order cannot matter) and the one-thread scale update.
#include <cstdint>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"
#include "engine/cuda/cuda_packs.cuh"

namespace dpbench::cuda_kernels {
namespace {

constexpr int kColumnTile = 32;  // threads per row of a block: one warp reads adjacent columns
constexpr int kRowLanes = 16;    // rows summed in parallel per column

// dbias (cols, fp32) = column sums of dy (rows, cols) of T. Block (32, 16): thread (x, y) sums
// the rows y, y+16, ... of its kVec adjacent columns in order, in fp32, then the 16 partial sums
// of each column are added in a fixed order. 16-bit rows go two columns to a thread, so that a
// warp still reads 128 contiguous bytes of a row; kVec > 1 needs cols to be a multiple of it.
template <typename T, int kVec>
__global__ void bias_gradient_kernel(const T* dy, float* dbias, int rows, int cols) {
  __shared__ float partial[kVec][kRowLanes][kColumnTile + 1];  // +1 avoids bank conflicts
  const int first_column = (blockIdx.x * kColumnTile + threadIdx.x) * kVec;
  float sum[kVec] = {};
  if (first_column < cols) {
    for (int row = threadIdx.y; row < rows; row += kRowLanes) {
      const T* row_start = dy + static_cast<size_t>(row) * cols;  // (cols)
      const Pack<T, kVec> values = load_pack<kVec>(row_start + first_column);
#pragma unroll
      for (int k = 0; k < kVec; ++k) sum[k] += element(values, k);
    }
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) partial[k][threadIdx.y][threadIdx.x] = sum[k];
  __syncthreads();
  if (threadIdx.y == 0 && first_column < cols) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      float total = 0.0f;
      for (int lane = 0; lane < kRowLanes; ++lane) total += partial[k][lane][threadIdx.x];
      dbias[first_column + k] = total;
    }
  }
}

// Stage 1: block b writes its sum of x[i]^2 (grid-stride, in double) to partials[b].
__global__ void sum_squares_partials_kernel(const float* x, size_t n, double* partials) {
  __shared__ double shared[32];
  double sum = 0.0;
  DPB_GRID_STRIDE_LOOP(i, n) {
    const double value = x[i];
    sum += value * value;
  }
  sum = block_reduce(sum, SumOp{}, 0.0, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// Stage 2 (one block): partials[0] = sum of partials[0, count). block_reduce ends with a barrier,
// so every partial has been read before partials[0] is overwritten.
__global__ void sum_partials_kernel(double* partials, int count) {
  __shared__ double shared[32];
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_reduce(sum, SumOp{}, 0.0, shared);
  if (threadIdx.x == 0) partials[0] = sum;
}

// Infinity and NaN are the values whose exponent bits are all ones; an integer test on the bits
// costs less than isfinite and cannot be optimised away by fast-math assumptions.
__device__ __forceinline__ bool non_finite_bits(float value) {
  return (__float_as_uint(value) & 0x7f800000u) == 0x7f800000u;
}

// x[0, head) one by one, x[head, head + 4 * quads) as float4 (16-byte aligned there), the rest
// one by one. A block that saw a non-finite value stores 1; others store nothing, so concurrent
// stores all carry the same value and the flag is never cleared here.
__global__ void find_non_finite_kernel(const float* x, size_t n, size_t head, size_t quads,
                                       int32_t* flag) {
  bool found = false;
  const float4* body = reinterpret_cast<const float4*>(x + head);
  DPB_GRID_STRIDE_LOOP(q, quads) {
    const float4 v = body[q];
    found |= non_finite_bits(v.x) | non_finite_bits(v.y) | non_finite_bits(v.z) |
             non_finite_bits(v.w);
  }
  const size_t tail_start = head + 4 * quads;
  DPB_GRID_STRIDE_LOOP(t, head + (n - tail_start)) {
    const size_t i = t < head ? t : tail_start + (t - head);
    found |= non_finite_bits(x[i]);
  }
  if (__syncthreads_or(found) && threadIdx.x == 0) *flag = 1;
}

// Backend::update_loss_scale's rule; one thread, reading and writing device memory, so it works
// unchanged inside a replayed CUDA graph.
__global__ void update_loss_scale_kernel(LossScaleState* state, int increase_every) {
  constexpr float kMaxScale = 16777216.0f;  // 2^24
  float scale = state->scale;
  if (state->non_finite != 0) {
    scale = fmaxf(1.0f, scale * 0.5f);
    state->good_steps = 0;
  } else if (++state->good_steps >= increase_every) {
    scale = fminf(kMaxScale, scale * 2.0f);
    state->good_steps = 0;
  }
  state->scale = scale;
  state->inverse_scale = 1.0f / scale;
  state->non_finite = 0;
}

}  // namespace

void launch_bias_gradient(cudaStream_t stream, DataType dy_type, const void* dy, float* dbias,
                          int rows, int cols) {
  if (cols <= 0) return;
  const dim3 block(kColumnTile, kRowLanes);
  with_storage_type(dy_type, "bias_gradient", [&](auto tag) {
    using T = decltype(tag);
    const T* typed = static_cast<const T*>(dy);
    if constexpr (sizeof(T) == 2) {
      // Pairs of columns need every row to start on 4 bytes: an even width, an aligned start.
      if (cols % 2 == 0 && aligned_to({dy}, 4)) {
        const dim3 grid((cols + 2 * kColumnTile - 1) / (2 * kColumnTile));
        bias_gradient_kernel<T, 2><<<grid, block, 0, stream>>>(typed, dbias, rows, cols);
        return;
      }
    }
    const dim3 grid((cols + kColumnTile - 1) / kColumnTile);
    bias_gradient_kernel<T, 1><<<grid, block, 0, stream>>>(typed, dbias, rows, cols);
  });
  DPB_CUDA_CHECK_LAUNCH(bias_gradient_kernel);
}

void launch_sum_squares(cudaStream_t stream, const float* x, size_t n, double* scratch) {
  // The grid depends only on n, so the summation order (and the result) is reproducible.
  const size_t wanted_blocks = (n + kBlockSize - 1) / kBlockSize;
  const int blocks = static_cast<int>(
      wanted_blocks == 0 ? 1
                         : (wanted_blocks < static_cast<size_t>(kSumSquaresMaxPartials)
                                ? wanted_blocks
                                : static_cast<size_t>(kSumSquaresMaxPartials)));
  sum_squares_partials_kernel<<<blocks, kBlockSize, 0, stream>>>(x, n, scratch);
  DPB_CUDA_CHECK_LAUNCH(sum_squares_partials_kernel);
  sum_partials_kernel<<<1, kBlockSize, 0, stream>>>(scratch, blocks);
  DPB_CUDA_CHECK_LAUNCH(sum_partials_kernel);
}

void launch_find_non_finite(cudaStream_t stream, const float* x, size_t n, LossScaleState* state) {
  if (n == 0) return;
  // Gradient ranges start anywhere in a flat buffer: peel up to 3 floats to reach a 16-byte
  // boundary instead of giving up on vector loads (float pointers are 4-byte aligned).
  const size_t misalignment = reinterpret_cast<uintptr_t>(x) % 16;
  size_t head = misalignment == 0 ? 0 : (16 - misalignment) / sizeof(float);
  if (misalignment % sizeof(float) != 0 || head > n) head = n;
  const size_t quads = (n - head) / 4;
  const size_t singles = n - 4 * quads;
  find_non_finite_kernel<<<grid_for(quads + singles), kBlockSize, 0, stream>>>(
      x, n, head, quads, &state->non_finite);
  DPB_CUDA_CHECK_LAUNCH(find_non_finite_kernel);
}

void launch_update_loss_scale(cudaStream_t stream, LossScaleState* state, int increase_every) {
  update_loss_scale_kernel<<<1, 1, 0, stream>>>(state, increase_every);
  DPB_CUDA_CHECK_LAUNCH(update_loss_scale_kernel);
}

}  // namespace dpbench::cuda_kernels
