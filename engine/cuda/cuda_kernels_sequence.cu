// Kernels of the sequence ops: row-wise softmax cross-entropy over vocabulary-sized rows, a
// reproducible scaled sum, the embedding gather and scatter-add (by atomics, or in a fixed order
// for --deterministic), the rows a batch of ids touched and their packing for a sparse exchange.
// (The LSTM's kernels are in cuda_kernels_lstm.cu.) Kernels first, launchers after.
// Logits, activations and embedding rows hold fp32, fp16 or bf16 (cuda_packs.cuh); the arithmetic
// is fp32, 16-bit results are rounded once, and the gradient of a table is fp32.
// All are memory-bound: rows move in 16-byte packs where their alignment allows, element by
// element otherwise (a softmax row that fits is held in shared memory, read once), and nothing
// allocates or synchronises, so every launcher can be captured in a graph.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <cuda_pipeline.h>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"
#include "engine/cuda/cuda_packs.cuh"

namespace dpbench::cuda_kernels {
namespace {

// Two pointers whose distance is a multiple of 16 bytes reach 16-byte boundaries at the same
// element, so one pack split of a row serves both.
bool same_alignment_16(const void* a, const void* b) {
  return (reinterpret_cast<uintptr_t>(a) - reinterpret_cast<uintptr_t>(b)) % 16 == 0;
}

// ---- softmax cross-entropy over rows ---------------------------------------------------------

// A row of n elements as `head` elements up to the first 16-byte boundary, `packs` packs of kVec
// (16 bytes) from there and a tail of the rest. With vectorise off everything is head (element by
// element).
template <int kVec>
struct RowSplit {
  int head;
  int packs;
  // The t-th element outside the packed body, t in [0, n - kVec * packs): head, then tail.
  __device__ int scalar_index(int t) const {
    return t < head ? t : head + kVec * packs + (t - head);
  }
};

template <int kVec, typename T>
__device__ __forceinline__ RowSplit<kVec> split_row(const T* row, int n, bool vectorise) {
  if (!vectorise) return {n, 0};
  const int misaligned = static_cast<int>((reinterpret_cast<uintptr_t>(row) / sizeof(T)) % kVec);
  const int head = min((kVec - misaligned) % kVec, n);
  return {head, (n - head) / kVec};
}

// Running maximum m and sum of exp(x - m) of the values seen ("online softmax"): one pass gives
// both, with one expf per value: exp(-|x - m|) is the new term when x <= m, and the factor that
// rescales the sum when x is the new maximum (whose own term is then exp(0) = 1).
struct SoftmaxStats {
  float max;
  float sum;
};

__device__ __forceinline__ void absorb(SoftmaxStats& stats, float x) {
  const float e = expf(-fabsf(x - stats.max));  // NaN for a NaN x, which poisons the sum below
  if (x > stats.max) {
    stats.sum = stats.sum * e + 1.0f;
    stats.max = x;
  } else if (x != -INFINITY) {  // exp(-inf) adds nothing; -inf - -inf would add a NaN
    stats.sum += e;
  }
}

__device__ __forceinline__ SoftmaxStats merge(SoftmaxStats a, SoftmaxStats b) {
  const float max = fmaxf(a.max, b.max);
  if (max == -INFINITY) return {max, a.sum + b.sum};  // both empty (0), or a NaN seen: keep it
  return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
}

// Merges every thread's stats and returns the block's to all threads; the order depends only on
// blockDim (a multiple of 32). Ends with a barrier. `shared` holds 32 entries.
__device__ SoftmaxStats block_merge(SoftmaxStats stats, SoftmaxStats* shared) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) {
    const SoftmaxStats other{__shfl_down_sync(0xffffffffu, stats.max, offset),
                             __shfl_down_sync(0xffffffffu, stats.sum, offset)};
    stats = merge(stats, other);
  }
  if (lane == 0) shared[warp] = stats;
  __syncthreads();
  if (warp == 0) {
    stats = lane < blockDim.x / 32 ? shared[lane] : SoftmaxStats{-INFINITY, 0.0f};
    for (int offset = 16; offset > 0; offset /= 2) {
      const SoftmaxStats other{__shfl_down_sync(0xffffffffu, stats.max, offset),
                               __shfl_down_sync(0xffffffffu, stats.sum, offset)};
      stats = merge(stats, other);
    }
    if (lane == 0) shared[0] = stats;
  }
  __syncthreads();
  const SoftmaxStats result = shared[0];
  __syncthreads();
  return result;
}

// One block per row. logits, dlogits (rows, classes) of T, rows row_stride elements apart, may alias (each element is read, then
// written, by one thread; everything else is read before the barrier in block_merge); labels,
// row_losses (rows). The row is read twice (stats, then gradient) and never held on chip, so
// rows of any length fit (those that fit shared memory take softmax_cross_entropy_held_rows_kernel); a 16-bit row is widened as it is read and its gradient rounded once as
// it is written. loss_scale is read on the device (a replayed graph sees each step's).
template <typename T>
__global__ void softmax_cross_entropy_rows_kernel(const T* logits, const int32_t* labels,
                                                  int classes, int row_stride, float gradient_scale,
                                                  float* row_losses, T* dlogits,
                                                  const float* loss_scale,
                                                  const float* row_weights, bool vectorise) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  __shared__ SoftmaxStats shared[32];
  const size_t row = blockIdx.x;
  const T* x = logits + row * row_stride;  // (classes)
  T* dx = dlogits + row * row_stride;      // (classes)
  const int label = labels[row];
  // A bad label cannot throw from a kernel; a NaN loss makes it impossible to miss.
  const bool label_valid = label >= 0 && label < classes;
  const RowSplit<kVec> split = split_row<kVec>(x, classes, vectorise);
  const int singles = classes - kVec * split.packs;
  const T* body = x + split.head;  // (packs * kVec), 16-byte aligned

  SoftmaxStats stats{-INFINITY, 0.0f};
  for (int q = threadIdx.x; q < split.packs; q += blockDim.x) {
    const Pack<T, kVec> v = load_pack<kVec>(body, q);
#pragma unroll
    for (int k = 0; k < kVec; ++k) absorb(stats, element(v, k));
  }
  for (int t = threadIdx.x; t < singles; t += blockDim.x) {
    absorb(stats, load_widened(x + split.scalar_index(t)));
  }
  const float label_logit = (threadIdx.x == 0 && label_valid) ? load_widened(x + label) : 0.0f;
  stats = block_merge(stats, shared);
  if (threadIdx.x == 0) {
    const float loss = label_valid ? logf(stats.sum) - (label_logit - stats.max) : NAN;
    row_losses[row] = row_weights != nullptr ? loss * row_weights[row] : loss;
  }

  const float inverse_sum = 1.0f / stats.sum;
  // gradient_scale * 1 is exact: unweighted rows keep the bits of the unweighted kernel.
  const float row_scale = row_weights != nullptr ? gradient_scale * row_weights[row] : gradient_scale;
  const float scale = loss_scale != nullptr ? *loss_scale : 1.0f;
  // The loss scale is applied as a separate rounded product (never fused): scales are powers of
  // two, so dlogits keep the bits they have without one.
  auto gradient = [&](int j, float xj) {
    const float probability = expf(xj - stats.max) * inverse_sum;
    return __fmul_rn((probability - (j == label ? 1.0f : 0.0f)) * row_scale, scale);
  };
  T* dbody = dx + split.head;  // (packs * kVec), 16-byte aligned
  for (int q = threadIdx.x; q < split.packs; q += blockDim.x) {
    const Pack<T, kVec> v = load_pack<kVec>(body, q);
    const int j = split.head + kVec * q;
    float g[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) g[k] = gradient(j + k, element(v, k));
    store_pack<kVec>(dbody, q, round_pack<T, kVec>(g));
  }
  for (int t = threadIdx.x; t < singles; t += blockDim.x) {
    const int j = split.scalar_index(t);
    store_rounded(dx + j, gradient(j, load_widened(x + j)));
  }
}

// Note [held softmax rows]
// A vocabulary's row is far longer than a warp can hold (50304 bf16 logits are 98 KiB), and
// holding it in a block's registers would leave an SM one row at a time: nothing to overlap the
// memory traffic of one row with the arithmetic (two exponentials an element) of another. Shared
// memory holds it instead: the row's 16-byte packs are copied there asynchronously (cp.async, no
// registers on the way), and the hardware runs two such blocks an SM where two rows fit (bf16 or
// fp16 rows up to ~56000 classes on an H100 or H200), one otherwise (fp32 up to ~58000). The row
// is then read from memory once and written once, where the streaming kernel reads it twice.
// The few elements before the first and after the last 16-byte boundary (fewer than two packs'
// worth) are held one a thread in registers. With the row on chip the statistics take three
// passes (maximum, sum of exp(x - max), gradient) instead of the online rescaling. gpt's 16384 x
// 50304 logits on an H200: 1.40 ms streamed, 0.93 held in bf16; 2.36 and 1.65 (with expf, one
// block an SM) in fp32.
constexpr int kHeldRowThreads = 512;

// A block per row, as softmax_cross_entropy_rows_kernel (same arguments and results, logits and
// dlogits aliasing or not), with the row held in shared memory (Note [held softmax rows]):
// logits and dlogits equally aligned, the row's packs at `held` ((classes / kVec) packs of
// dynamic shared memory). Each thread takes the packs threadIdx.x, + blockDim.x, ... in order,
// then its lone element if it has one, for the maximum, the sum and the gradient alike; the
// block's maximum and sum come from block_reduce, so the sums' order depends on blockDim alone.
template <typename T>
__global__ void __launch_bounds__(kHeldRowThreads, 2) softmax_cross_entropy_held_rows_kernel(
    const T* logits, const int32_t* labels, int classes, int row_stride, float gradient_scale,
    float* row_losses, T* dlogits, const float* loss_scale, const float* row_weights) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  extern __shared__ uint4 held[];  // (packs) the row's packed body
  __shared__ float reduced[32];
  const size_t row = blockIdx.x;
  const T* x = logits + row * row_stride;  // (classes)
  T* dx = dlogits + row * row_stride;      // (classes)
  const int label = labels[row];
  const bool label_valid = label >= 0 && label < classes;  // else a NaN loss, as the streaming kernel
  const RowSplit<kVec> split = split_row<kVec>(x, classes, true);
  const T* body = x + split.head;  // (packs * kVec), 16-byte aligned
  for (int q = threadIdx.x; q < split.packs; q += blockDim.x)
    __pipeline_memcpy_async(&held[q], body + static_cast<size_t>(q) * kVec, sizeof(uint4));
  __pipeline_commit();
  // While the copies fly: this thread's lone element (head or tail), if any, and the label's logit.
  const int singles = classes - kVec * split.packs;  // under 2 kVec <= 16: at most one a thread
  const int lone = static_cast<int>(threadIdx.x) < singles ? split.scalar_index(threadIdx.x) : -1;
  const float lone_logit = lone >= 0 ? load_widened(x + lone) : -INFINITY;
  const float label_logit = (threadIdx.x == 0 && label_valid) ? load_widened(x + label) : 0.0f;
  __pipeline_wait_prior(0);
  __syncthreads();
  const T* held_row = reinterpret_cast<const T*>(held);  // (packs * kVec)
  // exp(v - m) as exp2f((v - m) log2(e)): one MUFU.EX2 and a multiply where expf spends ~8
  // instructions. With two exponentials an element and the row on chip the kernel is bound by
  // instructions as much as by memory: 0.93 ms against expf's 1.11 (gpt's 16384 x 50304 bf16 on
  // an H200). Error: exp2f's 2 ulp, plus |v - m| ulp from rounding the argument.
  auto exp_shifted = [](float v, float m) { return exp2f((v - m) * 1.4426950408889634f); };

  float max = lone_logit;  // fmaxf skips a NaN; the sum below still turns NaN
#pragma unroll 4
  for (int q = threadIdx.x; q < split.packs; q += blockDim.x) {
    const Pack<T, kVec> v = load_pack<kVec>(held_row, q);
#pragma unroll
    for (int k = 0; k < kVec; ++k) max = fmaxf(max, element(v, k));
  }
  max = block_reduce(max, MaxOp{}, -INFINITY, reduced);
  float sum = 0.0f;
#pragma unroll 4
  for (int q = threadIdx.x; q < split.packs; q += blockDim.x) {
    const Pack<T, kVec> v = load_pack<kVec>(held_row, q);
#pragma unroll
    for (int k = 0; k < kVec; ++k) sum += exp_shifted(element(v, k), max);
  }
  if (lone >= 0) sum += exp_shifted(lone_logit, max);
  sum = block_reduce(sum, SumOp{}, 0.0f, reduced);
  if (threadIdx.x == 0) {
    const float loss = label_valid ? logf(sum) - (label_logit - max) : NAN;
    row_losses[row] = row_weights != nullptr ? loss * row_weights[row] : loss;
  }

  // Every read of the row from global memory is done (block_reduce ends with a barrier), so dx
  // may overwrite it.
  const float inverse_sum = 1.0f / sum;
  const float row_scale = row_weights != nullptr ? gradient_scale * row_weights[row] : gradient_scale;
  const float scale = loss_scale != nullptr ? *loss_scale : 1.0f;
  // The loss scale a separate rounded product, as in softmax_cross_entropy_rows_kernel.
  auto gradient = [&](int j, float xj) {
    const float probability = exp_shifted(xj, max) * inverse_sum;
    return __fmul_rn((probability - (j == label ? 1.0f : 0.0f)) * row_scale, scale);
  };
  T* dbody = dx + split.head;  // (packs * kVec), 16-byte aligned
#pragma unroll 4
  for (int q = threadIdx.x; q < split.packs; q += blockDim.x) {
    const Pack<T, kVec> v = load_pack<kVec>(held_row, q);
    const int j = split.head + kVec * q;
    float g[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) g[k] = gradient(j + k, element(v, k));
    store_pack<kVec>(dbody, q, round_pack<T, kVec>(g));
  }
  if (lone >= 0) store_rounded(dx + lone, gradient(lone, lone_logit));
}

// One block: *out = scale * sum of x, in double. Thread t sums x[t], x[t + blockDim], ... in
// order and block_reduce combines the threads in a fixed order, so the result depends on n only.
__global__ void sum_scaled_kernel(const float* x, size_t n, float scale, float* out) {
  __shared__ double shared[32];
  double sum = 0.0;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) sum += x[i];
  sum = block_reduce(sum, SumOp{}, 0.0, shared);
  if (threadIdx.x == 0) *out = static_cast<float>(sum * static_cast<double>(scale));
}

// ---- embeddings ------------------------------------------------------------------------------
// threadIdx.y picks a row, threadIdx.x strides over its columns, the grid strides over rows.

// Rows of `cols` words copied as they are stored, whatever the element type: Word is the widest
// of 16, 4 or 2 bytes that the row length and both pointers allow.
template <typename Word>
__global__ void embedding_forward_kernel(const Word* table, const int32_t* ids, size_t n, int cols,
                                         Word* y) {
  for (size_t r = static_cast<size_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < n;
       r += static_cast<size_t>(gridDim.x) * blockDim.y) {
    const Word* source = table + static_cast<size_t>(ids[r]) * cols;  // (cols) of the id's row
    Word* target = y + r * cols;                                        // (cols)
    for (int c = threadIdx.x; c < cols; c += blockDim.x) target[c] = source[c];
  }
}

__device__ __forceinline__ void atomic_add(float* address, float value) {
  atomicAdd(address, value);
}

__device__ __forceinline__ void atomic_add(float4* address, float4 value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(address, value);  // one 16-byte vector atomic (sm_90 and later)
#else
  float* lanes = reinterpret_cast<float*>(address);
  atomicAdd(lanes + 0, value.x);
  atomicAdd(lanes + 1, value.y);
  atomicAdd(lanes + 2, value.z);
  atomicAdd(lanes + 3, value.w);
#endif
}

// Adds the kVec fp32 values at `target` (16-byte aligned when kVec is 4).
template <int kVec>
__device__ __forceinline__ void atomic_add_lanes(float* target, const float (&values)[kVec]) {
  if constexpr (kVec == 4) {
    atomic_add(reinterpret_cast<float4*>(target),
               make_float4(values[0], values[1], values[2], values[3]));
  } else {
    atomic_add(target, values[0]);
  }
}

// dy rows of T (dim = packs * kVec), widened into the fp32 table: a row is `packs` packs of kVec
// elements (kVec 4: a float4 atomic into the table per pack, kVec 1: a float one).
template <typename T, int kVec>
__global__ void embedding_backward_kernel(const int32_t* ids, const T* dy, size_t n, int packs,
                                          float* dtable) {
  const size_t dim = static_cast<size_t>(packs) * kVec;
  for (size_t r = static_cast<size_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < n;
       r += static_cast<size_t>(gridDim.x) * blockDim.y) {
    float* target = dtable + static_cast<size_t>(ids[r]) * dim;  // (dim), shared by repeated ids
    const T* source = dy + r * dim;                                // (dim)
    for (int c = threadIdx.x; c < packs; c += blockDim.x) {
      const Pack<T, kVec> v = load_pack<kVec>(source, c);
      float values[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) values[k] = element(v, k);
      atomic_add_lanes<kVec>(target + static_cast<size_t>(c) * kVec, values);
    }
  }
}

__global__ void iota_kernel(int32_t* values, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    values[i] = static_cast<int32_t>(i);
}

// ids sorted stably (sorted_ids, with each one's original position in `positions`): the thread of
// the first entry of each run of equal ids sums that run's dy rows (of T, widened) in position
// order in fp32 and adds the sum to the fp32 table row once, so every row gets the same bits on
// every run. Rows as in embedding_backward_kernel: `packs` packs of kVec elements, kVec 4 moving a
// float4 of the table.
template <typename T, int kVec>
__global__ void embedding_backward_sorted_kernel(const int32_t* sorted_ids, const int32_t* positions,
                                                 const T* dy, size_t n, int packs, float* dtable) {
  const size_t dim = static_cast<size_t>(packs) * kVec;
  for (size_t r = static_cast<size_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < n;
       r += static_cast<size_t>(gridDim.x) * blockDim.y) {
    const int32_t id = sorted_ids[r];
    if (r > 0 && sorted_ids[r - 1] == id) continue;  // not the first of its run
    float* target = dtable + static_cast<size_t>(id) * dim;  // (dim)
    for (int c = threadIdx.x; c < packs; c += blockDim.x) {
      const Pack<T, kVec> first = load_pack<kVec>(dy + static_cast<size_t>(positions[r]) * dim, c);
      float sum[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) sum[e] = element(first, e);
      for (size_t k = r + 1; k < n && sorted_ids[k] == id; ++k) {
        const Pack<T, kVec> next = load_pack<kVec>(dy + static_cast<size_t>(positions[k]) * dim, c);
#pragma unroll
        for (int e = 0; e < kVec; ++e) sum[e] = sum[e] + element(next, e);
      }
      if constexpr (kVec == 4) {
        float4* lanes = reinterpret_cast<float4*>(target) + c;
        const float4 old = *lanes;
        *lanes = make_float4(old.x + sum[0], old.y + sum[1], old.z + sum[2], old.w + sum[3]);
      } else {
        target[c] += sum[0];
      }
    }
  }
}

template <typename T>
__device__ __forceinline__ T zero_value();
template <>
__device__ __forceinline__ float zero_value<float>() { return 0.0f; }
template <>
__device__ __forceinline__ float4 zero_value<float4>() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }

// Row r < *count: rows_out[r] = rows[r] and values_out[r] = table[rows[r]]; rows past *count (up
// to capacity) become row 0 with zero values, padding that scatters nothing.
template <typename T>
__global__ void gather_rows_kernel(const T* table, int cols, const int32_t* rows,
                                   const int32_t* count, size_t capacity, int32_t* rows_out,
                                   T* values_out) {
  const int32_t counted = *count;  // at most capacity by contract; clamped all the same
  const size_t used = counted <= 0                              ? 0
                      : static_cast<size_t>(counted) > capacity ? capacity
                                                                : static_cast<size_t>(counted);
  for (size_t r = static_cast<size_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < capacity;
       r += static_cast<size_t>(gridDim.x) * blockDim.y) {
    T* target = values_out + r * cols;  // (cols)
    if (r < used) {
      const int32_t row = rows[r];
      const T* source = table + static_cast<size_t>(row) * cols;  // (cols) of the touched row
      if (threadIdx.x == 0) rows_out[r] = row;
      for (int c = threadIdx.x; c < cols; c += blockDim.x) target[c] = source[c];
    } else {
      if (threadIdx.x == 0) rows_out[r] = 0;
      for (int c = threadIdx.x; c < cols; c += blockDim.x) target[c] = zero_value<T>();
    }
  }
}

// flags[id] = 1 for every id in range; concurrent stores of one id all store the same 1.
__global__ void flag_ids_kernel(const int32_t* ids, size_t n, int vocab, uint8_t* flags) {
  DPB_GRID_STRIDE_LOOP(i, n) {
    const int32_t id = ids[i];
    if (id >= 0 && id < vocab) flags[id] = 1;
  }
}

// ---- launch helpers --------------------------------------------------------------------------

// Threads per row and rows per block for the row kernels (256 threads a block): columns are
// covered by whole warps, none of which would find no column to work on.
dim3 row_block(int cols) {
  const int x = cols < 64 ? 32 : std::min(256, cols / 32 * 32);
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(kBlockSize / x));
}

unsigned row_grid(size_t rows, const dim3& block) {
  const size_t blocks = (rows + block.y - 1) / block.y;
  return static_cast<unsigned>(std::max<size_t>(1, std::min(blocks, kMaxGridBlocks)));
}

// Launches softmax_cross_entropy_held_rows_kernel where a row's packs fit the device's shared
// memory (Note [held softmax rows]), opting in past 48 KB (legal inside a graph capture; repeated
// on every launch, since the setting is per device); returns false (running nothing) where they
// do not fit. logits and dlogits must be equally aligned.
template <typename T>
bool launch_softmax_held_rows(cudaStream_t stream, const T* logits, const int32_t* labels, int rows, int classes,
                              int row_stride, float gradient_scale, float* row_losses, T* dlogits,
                              const float* loss_scale, const float* row_weights) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  const size_t bytes = static_cast<size_t>(classes / kVec) * 16;  // the most packs a row can have
  auto kernel = softmax_cross_entropy_held_rows_kernel<T>;
  if (!allow_dynamic_shared_memory(kernel, bytes)) return false;
  // Short rows would leave most of a large block idle.
  const int block_size = classes >= 2048 ? kHeldRowThreads : classes >= 512 ? 256 : classes >= 128 ? 128 : 32;
  kernel<<<static_cast<unsigned>(rows), block_size, bytes, stream>>>(
      logits, labels, classes, row_stride, gradient_scale, row_losses, dlogits, loss_scale, row_weights);
  return true;
}

constexpr size_t kFlagAlignment = 256;  // the CUB scratch after the flags starts here

size_t flags_bytes(int vocab) {
  return (static_cast<size_t>(vocab) + kFlagAlignment - 1) / kFlagAlignment * kFlagAlignment;
}

// Bytes of CUB scratch for compacting the flagged ids of a vocabulary (a host computation).
size_t select_scratch_bytes(int vocab) {
  size_t bytes = 0;
  DPB_CUDA_CHECK(cub::DeviceSelect::Flagged(
      nullptr, bytes, thrust::counting_iterator<int32_t>(0), static_cast<const uint8_t*>(nullptr),
      static_cast<int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<int64_t>(vocab)));
  return bytes;
}

// Workspace of the ordered scatter-add: sorted ids, positions and sorted positions (n each, every
// array starting on a 256-byte boundary), then CUB's sort scratch.
size_t ids_bytes(size_t n) {
  return (n * sizeof(int32_t) + kFlagAlignment - 1) / kFlagAlignment * kFlagAlignment;
}

size_t sort_scratch_bytes(size_t n) {
  size_t bytes = 0;
  DPB_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int64_t>(n)));
  return bytes;
}

}  // namespace

void launch_softmax_cross_entropy_rows(cudaStream_t stream, DataType type, const void* logits,
                                       const int32_t* labels, int rows, int classes, int row_stride,
                                       float gradient_scale, float* row_losses, void* dlogits,
                                       const float* loss_scale, const float* row_weights) {
  if (rows <= 0 || classes <= 0) return;
  // Long rows get the largest blocks (a 50000-class fp32 row is ~12 float4 per thread at 1024);
  // short rows would leave most of a large block idle.
  const int block_size = classes >= 16384 ? 1024
                         : classes >= 2048 ? 512
                         : classes >= 512  ? 256
                         : classes >= 128  ? 128
                                           : 32;
  const bool vectorise = same_alignment_16(logits, dlogits);
  with_storage_type(type, "softmax_cross_entropy_rows", [&](auto tag) {
    using T = decltype(tag);
    if (vectorise && launch_softmax_held_rows<T>(stream, static_cast<const T*>(logits), labels, rows, classes,
                                                 row_stride, gradient_scale, row_losses,
                                                 static_cast<T*>(dlogits), loss_scale, row_weights))
      return;
    softmax_cross_entropy_rows_kernel<T><<<static_cast<unsigned>(rows), block_size, 0, stream>>>(
        static_cast<const T*>(logits), labels, classes, row_stride, gradient_scale, row_losses,
        static_cast<T*>(dlogits), loss_scale, row_weights, vectorise);
  });
  DPB_CUDA_CHECK_LAUNCH(softmax_cross_entropy_rows_kernel);
}

void launch_sum_scaled(cudaStream_t stream, const float* x, size_t n, float scale, float* out) {
  sum_scaled_kernel<<<1, 1024, 0, stream>>>(x, n, scale, out);
  DPB_CUDA_CHECK_LAUNCH(sum_scaled_kernel);
}

namespace {

// Rows of `row_bytes` bytes gathered as words of Word.
template <typename Word>
void launch_row_gather(cudaStream_t stream, const void* table, const int32_t* ids, size_t n,
                       size_t row_bytes, void* y) {
  const int cols = static_cast<int>(row_bytes / sizeof(Word));
  const dim3 block = row_block(cols);
  embedding_forward_kernel<Word><<<row_grid(n, block), block, 0, stream>>>(
      static_cast<const Word*>(table), ids, n, cols, static_cast<Word*>(y));
}

// The scatter-adds' launch shape: calls launch(T{}, kVec, packs, block, grid) with T dy's storage
// type and rows of `packs` packs of kVec elements: 4 where every 4 dy elements land on one float4
// of the fp32 table (a row length and both pointers allowing), 1 otherwise. kVec comes as a
// std::integral_constant, so the launch can name it as a template argument.
template <typename Launch>
void with_embedding_rows(DataType dy_type, size_t n, int dim, const void* dy, const float* dtable,
                         Launch launch) {
  with_storage_type(dy_type, "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    const bool four = dim % 4 == 0 && aligned_to({dy}, 4 * sizeof(T)) && aligned_to({dtable}, 16);
    const int packs = four ? dim / 4 : dim;
    const dim3 block = row_block(packs);
    const unsigned grid = row_grid(n, block);
    if (four) {
      launch(tag, std::integral_constant<int, 4>{}, packs, block, grid);
    } else {
      launch(tag, std::integral_constant<int, 1>{}, packs, block, grid);
    }
  });
}

}  // namespace

void launch_embedding_forward(cudaStream_t stream, DataType type, const void* table,
                              const int32_t* ids, size_t n, int dim, void* y) {
  if (n == 0 || dim <= 0) return;
  // A gather moves bytes: the widest word that divides a row and suits both pointers.
  const size_t row_bytes = static_cast<size_t>(dim) * data_type_bytes(type);
  if (row_bytes % 16 == 0 && aligned_to({table, y}, 16)) {
    launch_row_gather<uint4>(stream, table, ids, n, row_bytes, y);
  } else if (row_bytes % 4 == 0 && aligned_to({table, y}, 4)) {
    launch_row_gather<uint32_t>(stream, table, ids, n, row_bytes, y);
  } else {
    launch_row_gather<uint16_t>(stream, table, ids, n, row_bytes, y);
  }
  DPB_CUDA_CHECK_LAUNCH(embedding_forward_kernel);
}

void launch_embedding_backward(cudaStream_t stream, const int32_t* ids, DataType dy_type,
                               const void* dy, size_t n, int dim, float* dtable) {
  if (n == 0 || dim <= 0) return;
  with_embedding_rows(dy_type, n, dim, dy, dtable,
                      [&](auto tag, auto vec, int packs, dim3 block, unsigned grid) {
                        using T = decltype(tag);
                        embedding_backward_kernel<T, decltype(vec)::value>
                            <<<grid, block, 0, stream>>>(ids, static_cast<const T*>(dy), n, packs,
                                                         dtable);
                      });
  DPB_CUDA_CHECK_LAUNCH(embedding_backward_kernel);
}

size_t embedding_touched_rows_workspace_bytes(int vocab) {
  if (vocab <= 0) return 0;
  return flags_bytes(vocab) + select_scratch_bytes(vocab);
}

size_t embedding_backward_sorted_workspace_bytes(size_t n) {
  return 3 * ids_bytes(n) + sort_scratch_bytes(n);
}

void launch_embedding_backward_sorted(cudaStream_t stream, const int32_t* ids, DataType dy_type,
                                      const void* dy, size_t n, int dim, float* dtable,
                                      void* workspace) {
  if (n == 0 || dim <= 0) return;
  char* base = static_cast<char*>(workspace);
  int32_t* sorted_ids = reinterpret_cast<int32_t*>(base);
  int32_t* positions = reinterpret_cast<int32_t*>(base + ids_bytes(n));
  int32_t* sorted_positions = reinterpret_cast<int32_t*>(base + 2 * ids_bytes(n));
  void* sort_scratch = base + 3 * ids_bytes(n);
  size_t scratch_bytes = sort_scratch_bytes(n);
  iota_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(positions, n);
  DPB_CUDA_CHECK_LAUNCH(iota_kernel);
  // LSD radix sort is stable: equal ids keep their positions ascending.
  DPB_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_scratch, scratch_bytes, ids, sorted_ids,
                                                 positions, sorted_positions,
                                                 static_cast<int64_t>(n), 0, 32, stream));
  with_embedding_rows(dy_type, n, dim, dy, dtable,
                      [&](auto tag, auto vec, int packs, dim3 block, unsigned grid) {
                        using T = decltype(tag);
                        embedding_backward_sorted_kernel<T, decltype(vec)::value>
                            <<<grid, block, 0, stream>>>(sorted_ids, sorted_positions,
                                                         static_cast<const T*>(dy), n, packs,
                                                         dtable);
                      });
  DPB_CUDA_CHECK_LAUNCH(embedding_backward_sorted_kernel);
}

void launch_embedding_touched_rows(cudaStream_t stream, const int32_t* ids, size_t n, int vocab,
                                   int32_t* rows, int32_t* count, void* workspace) {
  if (vocab <= 0) {
    DPB_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(int32_t), stream));
    return;
  }
  // Workspace: flags (vocab bytes, padded to 256), then CUB's scratch. CUB's launches come back
  // as its return value, which DPB_CUDA_CHECK checks.
  uint8_t* flags = static_cast<uint8_t*>(workspace);
  void* select_scratch = static_cast<char*>(workspace) + flags_bytes(vocab);
  size_t scratch_bytes = select_scratch_bytes(vocab);
  DPB_CUDA_CHECK(cudaMemsetAsync(flags, 0, static_cast<size_t>(vocab), stream));
  if (n > 0) {
    flag_ids_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(ids, n, vocab, flags);
    DPB_CUDA_CHECK_LAUNCH(flag_ids_kernel);
  }
  // The flagged row numbers 0, 1, ..., vocab - 1, kept in order: ascending by construction.
  DPB_CUDA_CHECK(cub::DeviceSelect::Flagged(select_scratch, scratch_bytes,
                                            thrust::counting_iterator<int32_t>(0),
                                            static_cast<const uint8_t*>(flags), rows, count,
                                            static_cast<int64_t>(vocab), stream));
}

void launch_gather_rows(cudaStream_t stream, const float* table, int dim, const int32_t* rows,
                        const int32_t* count, size_t capacity, int32_t* rows_out, float* values_out) {
  if (capacity == 0) return;
  const int columns = std::max(dim, 0);
  if (columns % 4 == 0 && columns > 0 && aligned_to({table, values_out}, 16)) {
    const int cols = columns / 4;
    const dim3 block = row_block(cols);
    gather_rows_kernel<float4><<<row_grid(capacity, block), block, 0, stream>>>(
        reinterpret_cast<const float4*>(table), cols, rows, count, capacity, rows_out,
        reinterpret_cast<float4*>(values_out));
  } else {
    const dim3 block = row_block(columns);
    gather_rows_kernel<float><<<row_grid(capacity, block), block, 0, stream>>>(
        table, columns, rows, count, capacity, rows_out, values_out);
  }
  DPB_CUDA_CHECK_LAUNCH(gather_rows_kernel);
}

}  // namespace dpbench::cuda_kernels
