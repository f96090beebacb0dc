// Element-wise kernels: bias add, ReLU, fill/scale/axpy and the synthetic-data fills. All are
// memory-bound grid-stride loops; kernels first, launchers after.
#include <cstdint>

#include "engine/counter_random.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"

namespace dpbench::cuda_kernels {
namespace {

// y (rows, cols) += bias (cols)
__global__ void add_bias_kernel(float* y, const float* bias, size_t total, int cols) {
  DPB_GRID_STRIDE_LOOP(i, total) { y[i] += bias[i % cols]; }
}

__global__ void relu_forward_kernel(const float* x, float* y, size_t n) {
  DPB_GRID_STRIDE_LOOP(i, n) { y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
}

// dx may alias dy: each element is read and written by the same thread.
__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, size_t n) {
  DPB_GRID_STRIDE_LOOP(i, n) { dx[i] = y[i] > 0.0f ? dy[i] : 0.0f; }
}

__global__ void fill_kernel(float* x, size_t n, float value) {
  DPB_GRID_STRIDE_LOOP(i, n) { x[i] = value; }
}

__global__ void scale_kernel(float* x, size_t n, float alpha) {
  DPB_GRID_STRIDE_LOOP(i, n) { x[i] *= alpha; }
}

__global__ void axpy_kernel(float alpha, const float* x, float* y, size_t n) {
  DPB_GRID_STRIDE_LOOP(i, n) { y[i] = fmaf(alpha, x[i], y[i]); }
}

// y = a + b (then ReLU). Four floats per thread where every pointer is 16-byte aligned (planned
// buffers always are), which these bandwidth-bound joins need to approach the memory's speed;
// `vectorised` false takes every element one by one.
template <bool kRelu>
__global__ void add_tensors_kernel(const float* a, const float* b, float* y, size_t n,
                                   bool vectorised) {
  auto join = [](float u, float v) {
    const float sum = u + v;
    return kRelu && !(sum > 0.0f) ? 0.0f : sum;
  };
  const size_t quads = vectorised ? n / 4 : 0;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* y4 = reinterpret_cast<float4*>(y);
  DPB_GRID_STRIDE_LOOP(q, quads) {
    const float4 u = a4[q], v = b4[q];
    y4[q] = make_float4(join(u.x, v.x), join(u.y, v.y), join(u.z, v.z), join(u.w, v.w));
  }
  DPB_GRID_STRIDE_LOOP(t, n - quads * 4) {
    const size_t i = quads * 4 + t;
    y[i] = join(a[i], b[i]);
  }
}

// g = relu ? (y > 0 ? dy : 0) : dy into da and db (either may be null or alias dy).
template <bool kRelu>
__global__ void add_tensors_backward_kernel(const float* y, const float* dy, float* da, float* db,
                                            size_t n) {
  DPB_GRID_STRIDE_LOOP(i, n) {
    const float g = kRelu && !(y[i] > 0.0f) ? 0.0f : dy[i];
    if (da != nullptr) da[i] = g;
    if (db != nullptr) db[i] = g;
  }
}

// Must match ReferenceBackend::fill_uniform_by_index bit for bit: the same counter function and
// one correctly rounded fma (never a multiply and an add that the compiler may or may not fuse).
__global__ void fill_uniform_by_index_kernel(float* x, size_t n, uint64_t seed,
                                             uint64_t random_stream, uint64_t first_index,
                                             float lo, float range) {
  DPB_GRID_STRIDE_LOOP(i, n) {
    x[i] = fmaf(range, counter_uniform(seed, random_stream, first_index + i), lo);
  }
}

__global__ void fill_labels_by_index_kernel(int32_t* labels, size_t n, uint64_t seed,
                                            uint64_t random_stream, uint64_t first_index,
                                            uint32_t num_classes) {
  DPB_GRID_STRIDE_LOOP(i, n) {
    labels[i] = static_cast<int32_t>(counter_uint(seed, random_stream, first_index + i) % num_classes);
  }
}

}  // namespace

void launch_add_bias(cudaStream_t stream, float* y, const float* bias, int rows, int cols) {
  const size_t total = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  if (rows <= 0 || cols <= 0) return;
  add_bias_kernel<<<grid_for(total), kBlockSize, 0, stream>>>(y, bias, total, cols);
  DPB_CUDA_CHECK_LAUNCH(add_bias_kernel);
}

void launch_relu_forward(cudaStream_t stream, const float* x, float* y, size_t n) {
  if (n == 0) return;
  relu_forward_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(x, y, n);
  DPB_CUDA_CHECK_LAUNCH(relu_forward_kernel);
}

void launch_relu_backward(cudaStream_t stream, const float* y, const float* dy, float* dx,
                          size_t n) {
  if (n == 0) return;
  relu_backward_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(y, dy, dx, n);
  DPB_CUDA_CHECK_LAUNCH(relu_backward_kernel);
}

void launch_fill(cudaStream_t stream, float* x, size_t n, float value) {
  if (n == 0) return;
  fill_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(x, n, value);
  DPB_CUDA_CHECK_LAUNCH(fill_kernel);
}

void launch_scale(cudaStream_t stream, float* x, size_t n, float alpha) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(x, n, alpha);
  DPB_CUDA_CHECK_LAUNCH(scale_kernel);
}

void launch_axpy(cudaStream_t stream, float alpha, const float* x, float* y, size_t n) {
  if (n == 0) return;
  axpy_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(alpha, x, y, n);
  DPB_CUDA_CHECK_LAUNCH(axpy_kernel);
}

void launch_fill_uniform_by_index(cudaStream_t stream, float* x, size_t n, uint64_t seed,
                                  uint64_t random_stream, uint64_t first_index, float lo,
                                  float hi) {
  if (n == 0) return;
  const float range = hi - lo;  // rounded once on the host, as the reference does
  fill_uniform_by_index_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(
      x, n, seed, random_stream, first_index, lo, range);
  DPB_CUDA_CHECK_LAUNCH(fill_uniform_by_index_kernel);
}

void launch_fill_labels_by_index(cudaStream_t stream, int32_t* labels, size_t n, uint64_t seed,
                                 uint64_t random_stream, uint64_t first_index, int classes) {
  if (n == 0) return;
  fill_labels_by_index_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(
      labels, n, seed, random_stream, first_index, static_cast<uint32_t>(classes));
  DPB_CUDA_CHECK_LAUNCH(fill_labels_by_index_kernel);
}

namespace {
__global__ void append_scalar_kernel(const float* value, float* history, int32_t* cursor) {
  history[*cursor] = *value;
  ++*cursor;
}
}  // namespace

void launch_append_scalar(cudaStream_t stream, const float* value, float* history, int32_t* cursor) {
  append_scalar_kernel<<<1, 1, 0, stream>>>(value, history, cursor);
  DPB_CUDA_CHECK_LAUNCH(append_scalar_kernel);
}

void launch_add_tensors(cudaStream_t stream, const float* a, const float* b, float* y, size_t n,
                        bool relu) {
  if (n == 0) return;
  const bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                         reinterpret_cast<uintptr_t>(y)) % 16) == 0;
  const unsigned grid = grid_for(aligned ? (n + 3) / 4 : n);
  if (relu) {
    add_tensors_kernel<true><<<grid, kBlockSize, 0, stream>>>(a, b, y, n, aligned);
  } else {
    add_tensors_kernel<false><<<grid, kBlockSize, 0, stream>>>(a, b, y, n, aligned);
  }
  DPB_CUDA_CHECK_LAUNCH(add_tensors_kernel);
}

void launch_add_tensors_backward(cudaStream_t stream, const float* y, const float* dy, bool relu,
                                 float* da, float* db, size_t n) {
  if (n == 0 || (da == nullptr && db == nullptr)) return;
  if (relu) {
    add_tensors_backward_kernel<true><<<grid_for(n), kBlockSize, 0, stream>>>(y, dy, da, db, n);
  } else {
    add_tensors_backward_kernel<false><<<grid_for(n), kBlockSize, 0, stream>>>(y, dy, da, db, n);
  }
  DPB_CUDA_CHECK_LAUNCH(add_tensors_backward_kernel);
}

}  // namespace dpbench::cuda_kernels
