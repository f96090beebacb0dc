// Fused optimizer updates over a flat range: one read and one write of every array per step. The
// mixed-precision extras (UpdateExtras) ride along in the same pass: gradients unscaled as they
// are read, a non-finite step skipped on the device, the 16-bit weight copy written as the fp32
// master weight is.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"

namespace dpbench::cuda_kernels {
namespace {

struct NoCopy {};  // no rounded copy of the parameters wanted

// The extras as a kernel sees them; Copy is the element type of the rounded copy (or NoCopy).
template <typename Copy>
struct DeviceExtras {
  const float* inverse_loss_scale;
  const int32_t* skip;
  Copy* copy;
};

// Read on the device, so a replayed CUDA graph sees each step's own decision and scale.
template <typename Copy>
__device__ __forceinline__ bool skipped(const DeviceExtras<Copy>& extras) {
  return extras.skip != nullptr && *extras.skip != 0;
}

template <typename Copy>
__device__ __forceinline__ float gradient_scale(const DeviceExtras<Copy>& extras) {
  return extras.inverse_loss_scale != nullptr ? *extras.inverse_loss_scale : 1.0f;
}

// A separately rounded product: the compiler may not fuse it into a neighbouring fma, so with no
// scale (1.0f, exact) every later operation, fma contractions included, is the one the fp32
// path has always compiled to, and its results keep their bits.
__device__ __forceinline__ float unscaled(float gradient, float scale) {
  return __fmul_rn(gradient, scale);
}

template <typename Copy>
__device__ __forceinline__ void write_copy(const DeviceExtras<Copy>& extras, size_t i, float value) {
  if constexpr (std::is_same_v<Copy, __half>) {
    extras.copy[i] = __float2half_rn(value);
  } else if constexpr (std::is_same_v<Copy, __nv_bfloat16>) {
    extras.copy[i] = __float2bfloat16_rn(value);
  } else if constexpr (std::is_same_v<Copy, float>) {
    extras.copy[i] = value;
  }
}

template <typename Copy>
__global__ void sgd_update_kernel(float* params, const float* grads, size_t n, float learning_rate,
                                  DeviceExtras<Copy> extras) {
  if (skipped(extras)) return;
  const float scale = gradient_scale(extras);
  DPB_GRID_STRIDE_LOOP(i, n) {
    const float p = params[i] - learning_rate * unscaled(grads[i], scale);
    params[i] = p;
    write_copy(extras, i, p);
  }
}

// tf.train.MomentumOptimizer: v = momentum * v + g;  p -= lr * v
template <typename Copy>
__global__ void momentum_update_kernel(float* params, const float* grads, float* velocity,
                                       size_t n, float learning_rate, float momentum,
                                       DeviceExtras<Copy> extras) {
  if (skipped(extras)) return;
  const float scale = gradient_scale(extras);
  DPB_GRID_STRIDE_LOOP(i, n) {
    const float v = momentum * velocity[i] + unscaled(grads[i], scale);
    velocity[i] = v;
    const float p = params[i] - learning_rate * v;
    params[i] = p;
    write_copy(extras, i, p);
  }
}

// Adam (Kingma & Ba) with bias correction: the corrections 1 - beta^t arrive precomputed, or,
// with step_from_zero set, are computed here from t = *step_from_zero + 1 exactly as the host
// would (in double, rounded once to float), by one thread per block for the whole block.
template <typename Copy>
__global__ void adam_update_kernel(float* params, const float* grads, float* m, float* v, size_t n,
                                   float learning_rate, float beta1, float beta2, float epsilon,
                                   float first_moment_correction, float second_moment_correction,
                                   const int32_t* step_from_zero, DeviceExtras<Copy> extras) {
  if (skipped(extras)) return;  // uniform over the grid, so the barrier below is safe
  if (step_from_zero != nullptr) {
    __shared__ float corrections[2];
    if (threadIdx.x == 0) {
      const double t = static_cast<double>(*step_from_zero) + 1.0;
      corrections[0] = static_cast<float>(1.0 - pow(static_cast<double>(beta1), t));
      corrections[1] = static_cast<float>(1.0 - pow(static_cast<double>(beta2), t));
    }
    __syncthreads();
    first_moment_correction = corrections[0];
    second_moment_correction = corrections[1];
  }
  const float scale = gradient_scale(extras);
  DPB_GRID_STRIDE_LOOP(i, n) {
    const float g = unscaled(grads[i], scale);
    const float m_new = beta1 * m[i] + (1.0f - beta1) * g;
    const float v_new = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = m_new;
    v[i] = v_new;
    const float m_hat = m_new / first_moment_correction;
    const float v_hat = v_new / second_moment_correction;
    const float p = params[i] - learning_rate * m_hat / (sqrtf(v_hat) + epsilon);
    params[i] = p;
    write_copy(extras, i, p);
  }
}

template <typename Copy>
DeviceExtras<Copy> device_extras(const UpdateExtras& extras) {
  return DeviceExtras<Copy>{extras.inverse_loss_scale, extras.skip,
                            static_cast<Copy*>(extras.half_params)};
}

// Calls launch(DeviceExtras<Copy>) with Copy the type of the wanted copy: one kernel per type,
// so the plain fp32 update carries no per-element test for a copy.
template <typename Launch>
void with_extras(const UpdateExtras& extras, Launch&& launch) {
  if (extras.half_params == nullptr) {
    launch(device_extras<NoCopy>(extras));
    return;
  }
  switch (extras.half_type) {
    case DataType::f16: launch(device_extras<__half>(extras)); break;
    case DataType::bf16: launch(device_extras<__nv_bfloat16>(extras)); break;
    default: launch(device_extras<float>(extras)); break;
  }
}

}  // namespace

void launch_sgd_update(cudaStream_t stream, float* params, const float* grads, size_t n,
                       float learning_rate, const UpdateExtras& extras) {
  if (n == 0) return;
  with_extras(extras, [&](auto device) {
    sgd_update_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(params, grads, n, learning_rate,
                                                              device);
  });
  DPB_CUDA_CHECK_LAUNCH(sgd_update_kernel);
}

void launch_momentum_update(cudaStream_t stream, float* params, const float* grads,
                            float* velocity, size_t n, float learning_rate, float momentum,
                            const UpdateExtras& extras) {
  if (n == 0) return;
  with_extras(extras, [&](auto device) {
    momentum_update_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(params, grads, velocity, n,
                                                                   learning_rate, momentum, device);
  });
  DPB_CUDA_CHECK_LAUNCH(momentum_update_kernel);
}

void launch_adam_update(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                        size_t n, float learning_rate, float beta1, float beta2, float epsilon,
                        float first_moment_correction, float second_moment_correction,
                        const UpdateExtras& extras) {
  if (n == 0) return;
  with_extras(extras, [&](auto device) {
    adam_update_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(
        params, grads, m, v, n, learning_rate, beta1, beta2, epsilon, first_moment_correction,
        second_moment_correction, extras.step_from_zero, device);
  });
  DPB_CUDA_CHECK_LAUNCH(adam_update_kernel);
}

}  // namespace dpbench::cuda_kernels
