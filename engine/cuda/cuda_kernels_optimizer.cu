// Fused optimizer updates over a flat range: one read and one write of every array per step.
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"

namespace dpbench::cuda_kernels {
namespace {

__global__ void sgd_update_kernel(float* params, const float* grads, size_t n, float learning_rate) {
  DPB_GRID_STRIDE_LOOP(i, n) { params[i] -= learning_rate * grads[i]; }
}

// tf.train.MomentumOptimizer: v = momentum * v + g;  p -= lr * v
__global__ void momentum_update_kernel(float* params, const float* grads, float* velocity,
                                       size_t n, float learning_rate, float momentum) {
  DPB_GRID_STRIDE_LOOP(i, n) {
    const float v = momentum * velocity[i] + grads[i];
    velocity[i] = v;
    params[i] -= learning_rate * v;
  }
}

// Adam (Kingma & Ba) with bias correction: the corrections 1 - beta^t arrive precomputed.
__global__ void adam_update_kernel(float* params, const float* grads, float* m, float* v, size_t n,
                                   float learning_rate, float beta1, float beta2, float epsilon,
                                   float first_moment_correction, float second_moment_correction) {
  DPB_GRID_STRIDE_LOOP(i, n) {
    const float g = grads[i];
    const float m_new = beta1 * m[i] + (1.0f - beta1) * g;
    const float v_new = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = m_new;
    v[i] = v_new;
    const float m_hat = m_new / first_moment_correction;
    const float v_hat = v_new / second_moment_correction;
    params[i] -= learning_rate * m_hat / (sqrtf(v_hat) + epsilon);
  }
}

}  // namespace

void launch_sgd_update(cudaStream_t stream, float* params, const float* grads, size_t n,
                       float learning_rate) {
  if (n == 0) return;
  sgd_update_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(params, grads, n, learning_rate);
  DPB_CUDA_CHECK_LAUNCH(sgd_update_kernel);
}

void launch_momentum_update(cudaStream_t stream, float* params, const float* grads,
                            float* velocity, size_t n, float learning_rate, float momentum) {
  if (n == 0) return;
  momentum_update_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(params, grads, velocity, n,
                                                                 learning_rate, momentum);
  DPB_CUDA_CHECK_LAUNCH(momentum_update_kernel);
}

void launch_adam_update(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                        size_t n, float learning_rate, float beta1, float beta2, float epsilon,
                        float first_moment_correction, float second_moment_correction) {
  if (n == 0) return;
  adam_update_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(
      params, grads, m, v, n, learning_rate, beta1, beta2, epsilon, first_moment_correction,
      second_moment_correction);
  DPB_CUDA_CHECK_LAUNCH(adam_update_kernel);
}

}  // namespace dpbench::cuda_kernels
