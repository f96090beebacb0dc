// Fused softmax cross-entropy: forward loss and backward dlogits in one pass over the logits,
// then a deterministic mean of the row losses (which may be written to host-mapped memory).
// With loss scaling the gradient leaves already multiplied by the scale; the loss does not.
#include <cmath>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"

namespace dpbench::cuda_kernels {
namespace {

// One block per row. logits, dlogits (rows, classes), may alias; labels, row_losses (rows).
// loss_scale (device memory, may be null) is read here rather than passed by value, so a replayed
// CUDA graph scales by the current step's scale.
__global__ void softmax_cross_entropy_rows_kernel(const float* logits, const int32_t* labels,
                                                  int rows, int classes, float* row_losses,
                                                  float* dlogits, const float* loss_scale) {
  __shared__ float shared[32];
  const size_t row = blockIdx.x;
  const float* x = logits + row * classes;
  float* dx = dlogits + row * classes;
  const int label = labels[row];
  // A bad label cannot throw from a kernel; a NaN loss makes it impossible to miss.
  const bool label_valid = label >= 0 && label < classes;

  // Subtracting the row maximum keeps expf from overflowing; the softmax is unchanged.
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < classes; j += blockDim.x) local_max = fmaxf(local_max, x[j]);
  const float row_max = block_reduce(local_max, MaxOp{}, -INFINITY, shared);

  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < classes; j += blockDim.x) local_sum += expf(x[j] - row_max);
  // Read before the barrier in the next reduction: after it, dx (maybe x itself) is written.
  const float label_logit = (threadIdx.x == 0 && label_valid) ? x[label] : 0.0f;
  const float exp_sum = block_reduce(local_sum, SumOp{}, 0.0f, shared);

  if (threadIdx.x == 0) {
    row_losses[row] = label_valid ? logf(exp_sum) - (label_logit - row_max) : NAN;
  }
  const float inverse_sum = 1.0f / exp_sum;
  const float inverse_rows = 1.0f / static_cast<float>(rows);
  // A separate rounded product (never fused): with no scale (1.0f, exact) dlogits keep the bits
  // of the unscaled kernel; scales are powers of two, so scaling costs no precision either.
  const float scale = loss_scale != nullptr ? *loss_scale : 1.0f;
  for (int j = threadIdx.x; j < classes; j += blockDim.x) {
    const float probability = expf(x[j] - row_max) * inverse_sum;
    dx[j] = __fmul_rn((probability - (j == label ? 1.0f : 0.0f)) * inverse_rows, scale);
  }
}

// One block: *loss_out = mean(row_losses), summed in double in a fixed order.
__global__ void mean_loss_kernel(const float* row_losses, int rows, float* loss_out) {
  __shared__ double shared[32];
  double sum = 0.0;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) sum += row_losses[i];
  sum = block_reduce(sum, SumOp{}, 0.0, shared);
  if (threadIdx.x == 0) *loss_out = rows > 0 ? static_cast<float>(sum / rows) : 0.0f;
}

}  // namespace

void launch_softmax_cross_entropy(cudaStream_t stream, const float* logits, const int32_t* labels,
                                  int rows, int classes, float* row_losses, float* loss_out,
                                  float* dlogits, const float* loss_scale) {
  if (rows > 0) {
    // Small class counts would leave most of a large block idle.
    const int block_size = classes <= 128 ? 128 : (classes <= 2048 ? 256 : 512);
    softmax_cross_entropy_rows_kernel<<<rows, block_size, 0, stream>>>(logits, labels, rows,
                                                                      classes, row_losses, dlogits,
                                                                      loss_scale);
    DPB_CUDA_CHECK_LAUNCH(softmax_cross_entropy_rows_kernel);
  }
  mean_loss_kernel<<<1, kBlockSize, 0, stream>>>(row_losses, rows, loss_out);
  DPB_CUDA_CHECK_LAUNCH(mean_loss_kernel);
}

}  // namespace dpbench::cuda_kernels
