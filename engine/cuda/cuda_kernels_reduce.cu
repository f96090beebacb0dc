// Deterministic reductions: bias gradient (column sums) and the sum of squares behind param_norm.
// No atomics anywhere, so the same input gives the same bits on every run and every GPU count.
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"

namespace dpbench::cuda_kernels {
namespace {

constexpr int kColumnTile = 32;  // columns per block: one warp reads 32 adjacent floats
constexpr int kRowLanes = 16;    // rows summed in parallel per column

// dbias (cols) = column sums of dy (rows, cols). Block (32, 16): thread (x, y) sums the rows
// y, y+16, ... of column x in order, then the 16 partial sums are added in a fixed order.
__global__ void bias_gradient_kernel(const float* dy, float* dbias, int rows, int cols) {
  __shared__ float partial[kRowLanes][kColumnTile + 1];  // +1 avoids bank conflicts
  const int column = blockIdx.x * kColumnTile + threadIdx.x;
  float sum = 0.0f;
  if (column < cols) {
    for (int row = threadIdx.y; row < rows; row += kRowLanes) {
      sum += dy[static_cast<size_t>(row) * cols + column];
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && column < cols) {
    float total = 0.0f;
    for (int lane = 0; lane < kRowLanes; ++lane) total += partial[lane][threadIdx.x];
    dbias[column] = total;
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

}  // namespace

void launch_bias_gradient(cudaStream_t stream, const float* dy, float* dbias, int rows, int cols) {
  if (cols <= 0) return;
  const dim3 block(kColumnTile, kRowLanes);
  const dim3 grid((cols + kColumnTile - 1) / kColumnTile);
  bias_gradient_kernel<<<grid, block, 0, stream>>>(dy, dbias, rows, cols);
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

}  // namespace dpbench::cuda_kernels
