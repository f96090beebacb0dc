// Element-wise kernels: bias add, ReLU, GELU's backward, residual joins, type conversion, fill/scale/axpy and the
// synthetic-data fills. All are memory-bound grid-stride loops; kernels first, launchers after.
// The typed ones (ReLU, joins, conversion, the 16-bit fill) keep fp32, fp16 or bf16 in memory and
// compute in fp32.

#include <cstdint>

#include "engine/backend/counter_random.h"
#include "engine/backend/gelu.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"
#include "engine/cuda/cuda_packs.cuh"

namespace dpbench::cuda_kernels {
namespace {

// y (rows, cols) += bias (cols)
__global__ void add_bias_kernel(float* y, const float* bias, size_t total, int cols) {
  DPB_GRID_STRIDE_LOOP(i, total) { y[i] += bias[i % cols]; }
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

// ---- typed element-wise ops --------------------------------------------------------------------
// Loads widen exactly and stores round to nearest even (cuda_packs.cuh), as the host's
// store_from_float does, so one fp32 result stores the same bits on both backends. K > 1 elements
// move as whole 16-byte packs: these ops are bandwidth-bound, and element-by-element 2-byte
// accesses would leave most of it unused.

// Each op reads all its inputs for elements [i, i + K) before writing any output, all in one
// thread, which is what lets outputs alias inputs (dx over dy, y over a).
template <typename T>
struct ReluForward {
  const T* x;
  T* y;
  template <int K>
  __device__ void apply(size_t i) const {
    float v[K];
    load_widened<K>(x + i, v);
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = v[k] > 0.0f ? v[k] : 0.0f;
    store_rounded<K>(y + i, v);
  }
};

template <typename T>
struct ReluBackward {
  const T* y;
  const T* dy;
  T* dx;
  float scale;  // 1, or dropout's keep scale (exact for 1)
  template <int K>
  __device__ void apply(size_t i) const {
    float out[K], g[K];
    load_widened<K>(y + i, out);
    load_widened<K>(dy + i, g);
#pragma unroll
    for (int k = 0; k < K; ++k) g[k] = out[k] > 0.0f ? __fmul_rn(g[k], scale) : 0.0f;
    store_rounded<K>(dx + i, g);
  }
};

template <typename T>
struct GeluBackward {
  const T* x;  // the pre-activation
  const T* dy;
  T* dx;
  template <int K>
  __device__ void apply(size_t i) const {
    float v[K], g[K];
    load_widened<K>(x + i, v);
    load_widened<K>(dy + i, g);
#pragma unroll
    for (int k = 0; k < K; ++k) g[k] = g[k] * gelu_tanh_derivative(v[k]);
    store_rounded<K>(dx + i, g);
  }
};

template <typename T, bool kRelu>
struct AddTensors {
  const T* a;
  const T* b;
  T* y;
  template <int K>
  __device__ void apply(size_t i) const {
    float u[K], v[K];
    load_widened<K>(a + i, u);
    load_widened<K>(b + i, v);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const float sum = u[k] + v[k];
      u[k] = kRelu && !(sum > 0.0f) ? 0.0f : sum;
    }
    store_rounded<K>(y + i, u);
  }
};

// da and db may each be null (not wanted) or alias dy.
template <typename T, bool kRelu>
struct AddTensorsBackward {
  const T* y;
  const T* dy;
  T* da;
  T* db;
  template <int K>
  __device__ void apply(size_t i) const {
    float g[K];
    load_widened<K>(dy + i, g);
    if (kRelu) {
      float out[K];
      load_widened<K>(y + i, out);
#pragma unroll
      for (int k = 0; k < K; ++k) g[k] = out[k] > 0.0f ? g[k] : 0.0f;
    }
    if (da != nullptr) store_rounded<K>(da + i, g);
    if (db != nullptr) store_rounded<K>(db + i, g);
  }
};

// x = value rounded to T (to nearest even, as the reference's store_from_float).
template <typename T>
struct Fill {
  T* x;
  float value;
  template <int K>
  __device__ void apply(size_t i) const {
    float v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = value;
    store_rounded<K>(x + i, v);
  }
};

// dst = src * scale: the product is rounded to fp32 first, then to the destination type, which
// is what the reference's store_from_float(load_as_float(src) * scale) does too.
template <typename Source, typename Destination>
struct Convert {
  const Source* src;
  Destination* dst;
  float scale;
  template <int K>
  __device__ void apply(size_t i) const {
    float v[K];
    load_widened<K>(src + i, v);
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = __fmul_rn(v[k], scale);
    store_rounded<K>(dst + i, v);
  }
};

// Packs of N elements over [0, packs * N), then single elements over the tail. `packs` is 0 when
// a pointer is not 16-byte aligned.
template <int N, typename Op>
__global__ void elementwise_kernel(Op op, size_t n, size_t packs) {
  DPB_GRID_STRIDE_LOOP(q, packs) { op.template apply<N>(q * N); }
  const size_t first = packs * N;
  DPB_GRID_STRIDE_LOOP(t, n - first) { op.template apply<1>(first + t); }
}

template <int N, typename Op>
void launch_elementwise(cudaStream_t stream, const Op& op, size_t n, bool aligned) {
  const size_t packs = aligned ? n / N : 0;
  elementwise_kernel<N><<<grid_for(packs + (n - packs * N)), kBlockSize, 0, stream>>>(op, n, packs);
}

// Elements per pack: one 16-byte word of the narrowest type involved.
template <typename T>
constexpr int kPackOf = static_cast<int>(16 / sizeof(T));

}  // namespace

void launch_add_bias(cudaStream_t stream, float* y, const float* bias, int rows, int cols) {
  const size_t total = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  if (rows <= 0 || cols <= 0) return;
  add_bias_kernel<<<grid_for(total), kBlockSize, 0, stream>>>(y, bias, total, cols);
  DPB_CUDA_CHECK_LAUNCH(add_bias_kernel);
}

void launch_fill(cudaStream_t stream, DataType type, void* x, size_t n, float value) {
  if (n == 0) return;
  if (type == DataType::f32) {
    fill_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(static_cast<float*>(x), n, value);
    DPB_CUDA_CHECK_LAUNCH(fill_kernel);
    return;
  }
  with_storage_type(type, "fill", [&](auto tag) {
    using T = decltype(tag);
    launch_elementwise<kPackOf<T>>(stream, Fill<T>{static_cast<T*>(x), value}, n, aligned_to({x}, 16));
  });
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

namespace {
__device__ int64_t global_timer_ns() {
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return static_cast<int64_t>(now);
}
__global__ void write_timestamp_kernel(int64_t* slot) { *slot = global_timer_ns(); }
__global__ void add_elapsed_since_kernel(const int64_t* start, int64_t* total) {
  *total += global_timer_ns() - *start;
}
__global__ void lap_kernel(int64_t* clock, int64_t* total) {
  const int64_t now = global_timer_ns();
  *total += now - *clock;
  *clock = now;
}
}  // namespace

void launch_write_timestamp(cudaStream_t stream, int64_t* slot) {
  write_timestamp_kernel<<<1, 1, 0, stream>>>(slot);
  DPB_CUDA_CHECK_LAUNCH(write_timestamp_kernel);
}

void launch_lap(cudaStream_t stream, int64_t* clock, int64_t* total) {
  lap_kernel<<<1, 1, 0, stream>>>(clock, total);
  DPB_CUDA_CHECK_LAUNCH(lap_kernel);
}

void launch_add_elapsed_since(cudaStream_t stream, const int64_t* start, int64_t* total) {
  add_elapsed_since_kernel<<<1, 1, 0, stream>>>(start, total);
  DPB_CUDA_CHECK_LAUNCH(add_elapsed_since_kernel);
}

void launch_relu_forward(cudaStream_t stream, DataType type, const void* x, void* y, size_t n) {
  if (n == 0) return;
  with_storage_type(type, "relu_forward", [&](auto tag) {
    using T = decltype(tag);
    const ReluForward<T> op{static_cast<const T*>(x), static_cast<T*>(y)};
    launch_elementwise<kPackOf<T>>(stream, op, n, aligned_to({x, y}, 16));
  });
  DPB_CUDA_CHECK_LAUNCH(relu_forward_kernel);
}

void launch_relu_backward(cudaStream_t stream, DataType type, const void* y, const void* dy,
                          void* dx, size_t n, float scale) {
  if (n == 0) return;
  with_storage_type(type, "relu_backward", [&](auto tag) {
    using T = decltype(tag);
    const ReluBackward<T> op{static_cast<const T*>(y), static_cast<const T*>(dy),
                             static_cast<T*>(dx), scale};
    launch_elementwise<kPackOf<T>>(stream, op, n, aligned_to({y, dy, dx}, 16));
  });
  DPB_CUDA_CHECK_LAUNCH(relu_backward_kernel);
}

void launch_gelu_backward(cudaStream_t stream, DataType type, const void* x, const void* dy, void* dx, size_t n) {
  if (n == 0) return;
  with_storage_type(type, "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    const GeluBackward<T> op{static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx)};
    launch_elementwise<kPackOf<T>>(stream, op, n, aligned_to({x, dy, dx}, 16));
  });
  DPB_CUDA_CHECK_LAUNCH(gelu_backward_kernel);
}

void launch_add_tensors(cudaStream_t stream, DataType type, const void* a, const void* b, void* y,
                        size_t n, bool relu) {
  if (n == 0) return;
  const bool aligned = aligned_to({a, b, y}, 16);
  with_storage_type(type, "add_tensors", [&](auto tag) {
    using T = decltype(tag);
    const T* a_typed = static_cast<const T*>(a);
    const T* b_typed = static_cast<const T*>(b);
    T* y_typed = static_cast<T*>(y);
    if (relu) {
      launch_elementwise<kPackOf<T>>(stream, AddTensors<T, true>{a_typed, b_typed, y_typed}, n,
                                     aligned);
    } else {
      launch_elementwise<kPackOf<T>>(stream, AddTensors<T, false>{a_typed, b_typed, y_typed}, n,
                                     aligned);
    }
  });
  DPB_CUDA_CHECK_LAUNCH(add_tensors_kernel);
}

void launch_add_tensors_backward(cudaStream_t stream, DataType type, const void* y, const void* dy,
                                 bool relu, void* da, void* db, size_t n) {
  if (n == 0 || (da == nullptr && db == nullptr)) return;
  // y is read only with the ReLU; a null da or db is never accessed.
  const bool aligned = aligned_to({relu ? y : nullptr, dy, da, db}, 16);
  with_storage_type(type, "add_tensors_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* y_typed = static_cast<const T*>(y);
    const T* dy_typed = static_cast<const T*>(dy);
    T* da_typed = static_cast<T*>(da);
    T* db_typed = static_cast<T*>(db);
    if (relu) {
      launch_elementwise<kPackOf<T>>(
          stream, AddTensorsBackward<T, true>{y_typed, dy_typed, da_typed, db_typed}, n, aligned);
    } else {
      launch_elementwise<kPackOf<T>>(
          stream, AddTensorsBackward<T, false>{y_typed, dy_typed, da_typed, db_typed}, n, aligned);
    }
  });
  DPB_CUDA_CHECK_LAUNCH(add_tensors_backward_kernel);
}

void launch_convert(cudaStream_t stream, DataType src_type, const void* src, DataType dst_type,
                    void* dst, size_t n, float scale) {
  if (n == 0) return;
  const bool aligned = aligned_to({src, dst}, 16);
  with_storage_type(src_type, "convert", [&](auto source_tag) {
    using Source = decltype(source_tag);
    with_storage_type(dst_type, "convert", [&](auto destination_tag) {
      using Destination = decltype(destination_tag);
      constexpr int kPack = kPackOf<Source> > kPackOf<Destination> ? kPackOf<Source>
                                                                    : kPackOf<Destination>;
      const Convert<Source, Destination> op{static_cast<const Source*>(src),
                                            static_cast<Destination*>(dst), scale};
      launch_elementwise<kPack>(stream, op, n, aligned);
    });
  });
  DPB_CUDA_CHECK_LAUNCH(convert_kernel);
}

}  // namespace dpbench::cuda_kernels
