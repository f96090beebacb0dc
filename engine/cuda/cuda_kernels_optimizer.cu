// Fused optimizer updates over a flat range: one read and one write of every array per step. The
// mixed-precision extras (UpdateExtras) ride along in the same pass: gradients unscaled as they
// are read, a non-finite step skipped on the device, the 16-bit weight copy written as the fp32
// master weight is.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>
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

// Note [updates four at a time]: the updates stream every array once and do little arithmetic,
// so they are bound by how the bytes move. Where every array starts on a 16-byte boundary (the
// copy on an 8-byte one), each thread moves four consecutive elements per turn as one 16-byte
// load or store per array (8 bytes for a 16-bit copy); the rest (n % 4, or everything where an
// array is not aligned) goes one element at a time. Both paths call the same per-element rule,
// so the results are the same bits either way.

// Element k (0..3) of a float4, by reference.
__device__ __forceinline__ float& lane(float4& v, int k) { return (&v.x)[k]; }

__device__ __forceinline__ float4 load4(const float* p, size_t quad) {
  return reinterpret_cast<const float4*>(p)[quad];
}
__device__ __forceinline__ void store4(float* p, size_t quad, const float4& v) {
  reinterpret_cast<float4*>(p)[quad] = v;
}

// The copy of elements 4 quad .. 4 quad + 3, in one store.
template <typename Copy>
__device__ __forceinline__ void write_copy4(const DeviceExtras<Copy>& extras, size_t quad, float4 values) {
  if constexpr (std::is_same_v<Copy, float>) {
    store4(extras.copy, quad, values);
  } else if constexpr (std::is_same_v<Copy, __half> || std::is_same_v<Copy, __nv_bfloat16>) {
    unsigned bits[4];
    for (int k = 0; k < 4; ++k) {
      if constexpr (std::is_same_v<Copy, __half>) bits[k] = __half_as_ushort(__float2half_rn(lane(values, k)));
      else bits[k] = __bfloat16_as_ushort(__float2bfloat16_rn(lane(values, k)));
    }
    reinterpret_cast<uint2*>(extras.copy)[quad] = make_uint2(bits[0] | bits[1] << 16, bits[2] | bits[3] << 16);
  }
}

// Runs quad_rule(q) over [0, quads) with quads = n / 4 when `by_four`, then one_rule(i) over the
// elements no quad covered, grid-stride.
template <typename Quad, typename One>
__device__ __forceinline__ void for_each_element(size_t n, bool by_four, Quad&& quad_rule, One&& one_rule) {
  const size_t quads = by_four ? n / 4 : 0;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(blockDim.x) * gridDim.x;
  for (size_t q = first; q < quads; q += stride) quad_rule(q);
  for (size_t i = quads * 4 + first; i < n; i += stride) one_rule(i);
}

// The rules, one element each: p (and the state) updated in place, from the unscaled gradient g.
__device__ __forceinline__ void sgd_rule(float& p, float g, float learning_rate) { p = p - learning_rate * g; }

// tf.train.MomentumOptimizer: v = momentum * v + g;  p -= lr * v
__device__ __forceinline__ void momentum_rule(float& p, float g, float& velocity, float learning_rate, float momentum) {
  velocity = momentum * velocity + g;
  p = p - learning_rate * velocity;
}

// The moments' multiply-adds are spelled out: left to the compiler, they were contracted one way
// in the four-at-a-time loop and the other way in the one-at-a-time loop. These are the ones the
// update has always compiled to, so the parameters keep their bits. AdamW's decay (1 - lr *
// weight_decay, 1 for Adam) is a separately rounded product for the same reason: times 1 it is
// exact, and plain Adam's parameters keep their bits too.
__device__ __forceinline__ void adam_rule(float& p, float g, float& m, float& v, float learning_rate, float beta1,
                                          float beta2, float epsilon, float first_moment_correction,
                                          float second_moment_correction, float decay) {
  m = __fmaf_rn(1.0f - beta1, g, __fmul_rn(beta1, m));                 // beta1 m + (1 - beta1) g
  v = __fmaf_rn(g, __fmul_rn(1.0f - beta2, g), __fmul_rn(beta2, v));  // beta2 v + (1 - beta2) g g
  const float m_hat = m / first_moment_correction;
  const float v_hat = v / second_moment_correction;
  p = __fmul_rn(p, decay) - learning_rate * m_hat / (sqrtf(v_hat) + epsilon);
}

template <typename Copy>
__global__ void sgd_update_kernel(float* params, const float* grads, size_t n, float learning_rate, bool by_four,
                                  DeviceExtras<Copy> extras) {
  if (skipped(extras)) return;
  const float scale = gradient_scale(extras);
  for_each_element(
      n, by_four,
      [&](size_t q) {
        float4 p = load4(params, q);
        const float4 g = load4(grads, q);
        for (int k = 0; k < 4; ++k) sgd_rule(lane(p, k), unscaled((&g.x)[k], scale), learning_rate);
        store4(params, q, p);
        write_copy4(extras, q, p);
      },
      [&](size_t i) {
        float p = params[i];
        sgd_rule(p, unscaled(grads[i], scale), learning_rate);
        params[i] = p;
        write_copy(extras, i, p);
      });
}

template <typename Copy>
__global__ void momentum_update_kernel(float* params, const float* grads, float* velocity, size_t n,
                                       float learning_rate, float momentum, bool by_four, DeviceExtras<Copy> extras) {
  if (skipped(extras)) return;
  const float scale = gradient_scale(extras);
  for_each_element(
      n, by_four,
      [&](size_t q) {
        float4 p = load4(params, q), v = load4(velocity, q);
        const float4 g = load4(grads, q);
        for (int k = 0; k < 4; ++k)
          momentum_rule(lane(p, k), unscaled((&g.x)[k], scale), lane(v, k), learning_rate, momentum);
        store4(velocity, q, v);
        store4(params, q, p);
        write_copy4(extras, q, p);
      },
      [&](size_t i) {
        float p = params[i], v = velocity[i];
        momentum_rule(p, unscaled(grads[i], scale), v, learning_rate, momentum);
        velocity[i] = v;
        params[i] = p;
        write_copy(extras, i, p);
      });
}

// Adam (Kingma & Ba) with bias correction: the corrections 1 - beta^t arrive precomputed, or,
// with step_from_zero set, are computed here from t = *step_from_zero + 1 exactly as the host
// would (in double, rounded once to float), by one thread per block for the whole block. `decay`
// is AdamW's factor on the parameters, 1 for Adam.
template <typename Copy>
__global__ void adam_update_kernel(float* params, const float* grads, float* m, float* v, size_t n,
                                   float learning_rate, float beta1, float beta2, float epsilon,
                                   float first_moment_correction, float second_moment_correction, float decay,
                                   const int32_t* step_from_zero, bool by_four, DeviceExtras<Copy> extras) {
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
  for_each_element(
      n, by_four,
      [&](size_t q) {
        float4 p = load4(params, q), m4 = load4(m, q), v4 = load4(v, q);
        const float4 g = load4(grads, q);
        for (int k = 0; k < 4; ++k)
          adam_rule(lane(p, k), unscaled((&g.x)[k], scale), lane(m4, k), lane(v4, k), learning_rate, beta1, beta2,
                    epsilon, first_moment_correction, second_moment_correction, decay);
        store4(m, q, m4);
        store4(v, q, v4);
        store4(params, q, p);
        write_copy4(extras, q, p);
      },
      [&](size_t i) {
        float p = params[i], m1 = m[i], v1 = v[i];
        adam_rule(p, unscaled(grads[i], scale), m1, v1, learning_rate, beta1, beta2, epsilon,
                  first_moment_correction, second_moment_correction, decay);
        m[i] = m1;
        v[i] = v1;
        params[i] = p;
        write_copy(extras, i, p);
      });
}

// Whether every array of an update can move four elements at a time (Note [updates four at a
// time]): the fp32 arrays on 16-byte boundaries, the copy (4 of its elements) on its own width.
bool moves_by_four(std::initializer_list<const void*> fp32_arrays, const UpdateExtras& extras) {
  for (const void* array : fp32_arrays)
    if (reinterpret_cast<uintptr_t>(array) % 16 != 0) return false;
  if (extras.half_params == nullptr) return true;
  const size_t copy_bytes = extras.half_type == DataType::f16 || extras.half_type == DataType::bf16 ? 8 : 16;
  return reinterpret_cast<uintptr_t>(extras.half_params) % copy_bytes == 0;
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
                                                              moves_by_four({params, grads}, extras), device);
  });
  DPB_CUDA_CHECK_LAUNCH(sgd_update_kernel);
}

void launch_momentum_update(cudaStream_t stream, float* params, const float* grads,
                            float* velocity, size_t n, float learning_rate, float momentum,
                            const UpdateExtras& extras) {
  if (n == 0) return;
  with_extras(extras, [&](auto device) {
    momentum_update_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(
        params, grads, velocity, n, learning_rate, momentum, moves_by_four({params, grads, velocity}, extras), device);
  });
  DPB_CUDA_CHECK_LAUNCH(momentum_update_kernel);
}

void launch_adam_update(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                        size_t n, float learning_rate, float beta1, float beta2, float epsilon,
                        float first_moment_correction, float second_moment_correction, float decay,
                        const UpdateExtras& extras) {
  if (n == 0) return;
  with_extras(extras, [&](auto device) {
    adam_update_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(
        params, grads, m, v, n, learning_rate, beta1, beta2, epsilon, first_moment_correction,
        second_moment_correction, decay, extras.step_from_zero, moves_by_four({params, grads, m, v}, extras),
        device);
  });
  DPB_CUDA_CHECK_LAUNCH(adam_update_kernel);
}

}  // namespace dpbench::cuda_kernels
