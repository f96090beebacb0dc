// Kernels of the sequence ops: row-wise softmax cross-entropy over vocabulary-sized rows, a
// reproducible scaled sum, the embedding gather and scatter-add (by atomics, or in a fixed order
// for --deterministic), the rows a batch of ids touched
// and their packing for a sparse exchange, one LSTM time step forward and backward, and the
// repacking of LSTM weights between the canonical layout and cuDNN's (used only where the two
// differ). Kernels first, launchers after.
// All are memory-bound: rows move as float4 where their alignment allows, element by element
// otherwise, and nothing allocates or synchronises, so every launcher can be captured in a graph.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"

namespace dpbench::cuda_kernels {
namespace {

bool aligned_16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

// Two pointers whose distance is a multiple of 16 bytes reach 16-byte boundaries at the same
// element, so one float4 split of a row serves both.
bool same_alignment_16(const void* a, const void* b) {
  return (reinterpret_cast<uintptr_t>(a) - reinterpret_cast<uintptr_t>(b)) % 16 == 0;
}

// ---- softmax cross-entropy over rows ---------------------------------------------------------

// A row of n floats as `head` floats up to the first 16-byte boundary, `quads` float4s from there
// and a tail of the rest. With vectorise off everything is head (element by element).
struct RowSplit {
  int head;
  int quads;
  // The t-th element outside the float4 body, t in [0, n - 4 * quads): head, then tail.
  __device__ int scalar_index(int t) const { return t < head ? t : head + 4 * quads + (t - head); }
};

__device__ __forceinline__ RowSplit split_row(const float* row, int n, bool vectorise) {
  if (!vectorise) return {n, 0};
  const int misaligned = static_cast<int>((reinterpret_cast<uintptr_t>(row) / sizeof(float)) % 4);
  const int head = min((4 - misaligned) % 4, n);
  return {head, (n - head) / 4};
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

// One block per row. logits, dlogits (rows, classes), may alias (each element is read, then
// written, by one thread; everything else is read before the barrier in block_merge); labels,
// row_losses (rows). The row is read twice (stats, then gradient) and never held on chip, so
// rows of any length fit. loss_scale is read on the device (a replayed graph sees each step's).
__global__ void softmax_cross_entropy_rows_kernel(const float* logits, const int32_t* labels,
                                                  int classes, float gradient_scale,
                                                  float* row_losses, float* dlogits,
                                                  const float* loss_scale,
                                                  const float* row_weights, bool vectorise) {
  __shared__ SoftmaxStats shared[32];
  const size_t row = blockIdx.x;
  const float* x = logits + row * classes;  // (classes)
  float* dx = dlogits + row * classes;      // (classes)
  const int label = labels[row];
  // A bad label cannot throw from a kernel; a NaN loss makes it impossible to miss.
  const bool label_valid = label >= 0 && label < classes;
  const RowSplit split = split_row(x, classes, vectorise);
  const int singles = classes - 4 * split.quads;
  const float4* x4 = reinterpret_cast<const float4*>(x + split.head);

  SoftmaxStats stats{-INFINITY, 0.0f};
  for (int q = threadIdx.x; q < split.quads; q += blockDim.x) {
    const float4 v = x4[q];
    absorb(stats, v.x);
    absorb(stats, v.y);
    absorb(stats, v.z);
    absorb(stats, v.w);
  }
  for (int t = threadIdx.x; t < singles; t += blockDim.x) absorb(stats, x[split.scalar_index(t)]);
  const float label_logit = (threadIdx.x == 0 && label_valid) ? x[label] : 0.0f;
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
  float4* dx4 = reinterpret_cast<float4*>(dx + split.head);
  for (int q = threadIdx.x; q < split.quads; q += blockDim.x) {
    const float4 v = x4[q];
    const int j = split.head + 4 * q;
    dx4[q] = make_float4(gradient(j, v.x), gradient(j + 1, v.y), gradient(j + 2, v.z),
                         gradient(j + 3, v.w));
  }
  for (int t = threadIdx.x; t < singles; t += blockDim.x) {
    const int j = split.scalar_index(t);
    dx[j] = gradient(j, x[j]);
  }
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
// Rows of `cols` elements of T (float, or float4 when rows allow): threadIdx.y picks a row,
// threadIdx.x strides over its columns, the grid strides over rows.

template <typename T>
__global__ void embedding_forward_kernel(const T* table, const int32_t* ids, size_t n, int cols,
                                         T* y) {
  for (size_t r = static_cast<size_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < n;
       r += static_cast<size_t>(gridDim.x) * blockDim.y) {
    const T* source = table + static_cast<size_t>(ids[r]) * cols;  // (cols) of the id's row
    T* target = y + r * cols;                                        // (cols)
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

template <typename T>
__global__ void embedding_backward_kernel(const int32_t* ids, const T* dy, size_t n, int cols,
                                          T* dtable) {
  for (size_t r = static_cast<size_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < n;
       r += static_cast<size_t>(gridDim.x) * blockDim.y) {
    T* target = dtable + static_cast<size_t>(ids[r]) * cols;  // (cols), shared by repeated ids
    const T* source = dy + r * cols;                            // (cols)
    for (int c = threadIdx.x; c < cols; c += blockDim.x) atomic_add(target + c, source[c]);
  }
}

__global__ void iota_kernel(int32_t* values, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    values[i] = static_cast<int32_t>(i);
}

__device__ __forceinline__ float4 operator+(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
__device__ __forceinline__ void add_to(float* target, float value) { *target += value; }
__device__ __forceinline__ void add_to(float4* target, float4 value) { *target = *target + value; }

// ids sorted stably (sorted_ids, with each one's original position in `positions`): the thread of
// the first entry of each run of equal ids sums that run's dy rows in position order and adds the
// sum to the table row once, so every row gets the same bits on every run.
template <typename T>
__global__ void embedding_backward_sorted_kernel(const int32_t* sorted_ids, const int32_t* positions,
                                                 const T* dy, size_t n, int cols, T* dtable) {
  for (size_t r = static_cast<size_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < n;
       r += static_cast<size_t>(gridDim.x) * blockDim.y) {
    const int32_t id = sorted_ids[r];
    if (r > 0 && sorted_ids[r - 1] == id) continue;  // not the first of its run
    T* target = dtable + static_cast<size_t>(id) * cols;  // (cols)
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      T sum = dy[static_cast<size_t>(positions[r]) * cols + c];
      for (size_t k = r + 1; k < n && sorted_ids[k] == id; ++k)
        sum = sum + dy[static_cast<size_t>(positions[k]) * cols + c];
      add_to(target + c, sum);
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

// ---- LSTM cell -------------------------------------------------------------------------------
// W consecutive hidden units of one sample: 1, or 4 moved as one float4.
template <int W>
struct Lanes {
  float v[W];
};

template <int W>
__device__ __forceinline__ Lanes<W> load_lanes(const float* p) {
  Lanes<W> out;
  if constexpr (W == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    out.v[0] = q.x;
    out.v[1] = q.y;
    out.v[2] = q.z;
    out.v[3] = q.w;
  } else {
    for (int e = 0; e < W; ++e) out.v[e] = p[e];
  }
  return out;
}

template <int W>
__device__ __forceinline__ Lanes<W> load_lanes_or_zero(const float* p) {
  if (p != nullptr) return load_lanes<W>(p);
  Lanes<W> zero;
  for (int e = 0; e < W; ++e) zero.v[e] = 0.0f;
  return zero;
}

template <int W>
__device__ __forceinline__ void store_lanes(float* p, const Lanes<W>& in) {
  if constexpr (W == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(in.v[0], in.v[1], in.v[2], in.v[3]);
  } else {
    for (int e = 0; e < W; ++e) p[e] = in.v[e];
  }
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// gates (B, 4H): pre-activations in, activations out (gate order i, f, g, o); bias_input,
// bias_recurrent (4H); c_prev (B, H) or nullptr; c, h (B, H). One thread per (b, W hidden units).
template <int W>
__global__ void lstm_cell_forward_kernel(int batch, int hidden, float* gates,
                                         const float* bias_input, const float* bias_recurrent,
                                         const float* c_prev, float* c, float* h) {
  const int groups = hidden / W;
  DPB_GRID_STRIDE_LOOP(item, static_cast<size_t>(batch) * groups) {
    const size_t b = item / groups;
    const int j = static_cast<int>(item % groups) * W;
    float* row = gates + b * 4 * hidden;  // (4H) of sample b
    const size_t state = b * hidden + j;
    Lanes<W> gate[4];
    for (int k = 0; k < 4; ++k) {
      gate[k] = load_lanes<W>(row + k * hidden + j);
      const Lanes<W> bw = load_lanes<W>(bias_input + k * hidden + j);
      const Lanes<W> br = load_lanes<W>(bias_recurrent + k * hidden + j);
      for (int e = 0; e < W; ++e) gate[k].v[e] = (gate[k].v[e] + bw.v[e]) + br.v[e];
    }
    const Lanes<W> cp = load_lanes_or_zero<W>(c_prev != nullptr ? c_prev + state : nullptr);
    Lanes<W> c_new, h_new;
    for (int e = 0; e < W; ++e) {
      const float i = sigmoid(gate[0].v[e]);
      const float f = sigmoid(gate[1].v[e]);
      const float g = tanhf(gate[2].v[e]);
      const float o = sigmoid(gate[3].v[e]);
      gate[0].v[e] = i;
      gate[1].v[e] = f;
      gate[2].v[e] = g;
      gate[3].v[e] = o;
      c_new.v[e] = f * cp.v[e] + i * g;
      h_new.v[e] = o * tanhf(c_new.v[e]);
    }
    for (int k = 0; k < 4; ++k) store_lanes<W>(row + k * hidden + j, gate[k]);
    store_lanes<W>(c + state, c_new);
    store_lanes<W>(h + state, h_new);
  }
}

// From the activations in gates (B, 4H), c_prev (or nullptr), c, dh and dc (or nullptr), all
// (B, H): dgates (B, 4H; may alias gates) and dc_prev (B, H; may alias dc; or nullptr). Every
// thread loads all it needs before it stores, so the aliases are safe.
template <int W>
__global__ void lstm_cell_backward_kernel(int batch, int hidden, const float* gates,
                                          const float* c_prev, const float* c, const float* dh,
                                          const float* dc, float* dgates, float* dc_prev) {
  const int groups = hidden / W;
  DPB_GRID_STRIDE_LOOP(item, static_cast<size_t>(batch) * groups) {
    const size_t b = item / groups;
    const int j = static_cast<int>(item % groups) * W;
    const float* row = gates + b * 4 * hidden;  // (4H) activations of sample b
    float* drow = dgates + b * 4 * hidden;      // (4H)
    const size_t state = b * hidden + j;
    Lanes<W> gate[4];
    for (int k = 0; k < 4; ++k) gate[k] = load_lanes<W>(row + k * hidden + j);
    const Lanes<W> cp = load_lanes_or_zero<W>(c_prev != nullptr ? c_prev + state : nullptr);
    const Lanes<W> cc = load_lanes<W>(c + state);
    const Lanes<W> dhh = load_lanes<W>(dh + state);
    const Lanes<W> dcc = load_lanes_or_zero<W>(dc != nullptr ? dc + state : nullptr);
    Lanes<W> dgate[4], dcp;
    for (int e = 0; e < W; ++e) {
      const float i = gate[0].v[e], f = gate[1].v[e], g = gate[2].v[e], o = gate[3].v[e];
      const float tanh_c = tanhf(cc.v[e]);
      // h = o tanh(c): the cell's gradient is the carried dc plus what flows back through h.
      const float dc_total = dcc.v[e] + dhh.v[e] * o * (1.0f - tanh_c * tanh_c);
      dgate[0].v[e] = dc_total * g * i * (1.0f - i);      // sigmoid' = s (1 - s)
      dgate[1].v[e] = dc_total * cp.v[e] * f * (1.0f - f);
      dgate[2].v[e] = dc_total * i * (1.0f - g * g);      // tanh' = 1 - t^2
      dgate[3].v[e] = dhh.v[e] * tanh_c * o * (1.0f - o);
      dcp.v[e] = dc_total * f;
    }
    for (int k = 0; k < 4; ++k) store_lanes<W>(drow + k * hidden + j, dgate[k]);
    if (dc_prev != nullptr) store_lanes<W>(dc_prev + state, dcp);
  }
}

// ---- LSTM weight repacking (only where cuDNN's layout differs from the canonical one) --------
// blockIdx.y picks a block of the table, blockIdx.x and the threads stride over its floats.
__global__ void copy_weight_blocks_kernel(const WeightBlock* blocks, const float* from, float* to,
                                          bool to_packed, bool accumulate) {
  const WeightBlock block = blocks[blockIdx.y];
  const size_t source = to_packed ? block.canonical : block.packed;
  const size_t target = to_packed ? block.packed : block.canonical;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < block.count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if (accumulate) {
      to[target + i] += from[source + i];
    } else {
      to[target + i] = from[source + i];
    }
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

void launch_softmax_cross_entropy_rows(cudaStream_t stream, const float* logits,
                                       const int32_t* labels, int rows, int classes,
                                       float gradient_scale, float* row_losses, float* dlogits,
                                       const float* loss_scale, const float* row_weights) {
  if (rows <= 0 || classes <= 0) return;
  // Long rows get the largest blocks (a 50000-class row is ~12 float4 per thread at 1024);
  // short rows would leave most of a large block idle.
  const int block_size = classes >= 16384 ? 1024
                         : classes >= 2048 ? 512
                         : classes >= 512  ? 256
                         : classes >= 128  ? 128
                                           : 32;
  const bool vectorise = same_alignment_16(logits, dlogits);
  softmax_cross_entropy_rows_kernel<<<static_cast<unsigned>(rows), block_size, 0, stream>>>(
      logits, labels, classes, gradient_scale, row_losses, dlogits, loss_scale, row_weights, vectorise);
  DPB_CUDA_CHECK_LAUNCH(softmax_cross_entropy_rows_kernel);
}

void launch_sum_scaled(cudaStream_t stream, const float* x, size_t n, float scale, float* out) {
  sum_scaled_kernel<<<1, 1024, 0, stream>>>(x, n, scale, out);
  DPB_CUDA_CHECK_LAUNCH(sum_scaled_kernel);
}

void launch_embedding_forward(cudaStream_t stream, const float* table, const int32_t* ids,
                              size_t n, int dim, float* y) {
  if (n == 0 || dim <= 0) return;
  if (dim % 4 == 0 && aligned_16(table) && aligned_16(y)) {
    const int cols = dim / 4;
    const dim3 block = row_block(cols);
    embedding_forward_kernel<float4><<<row_grid(n, block), block, 0, stream>>>(
        reinterpret_cast<const float4*>(table), ids, n, cols, reinterpret_cast<float4*>(y));
  } else {
    const dim3 block = row_block(dim);
    embedding_forward_kernel<float><<<row_grid(n, block), block, 0, stream>>>(table, ids, n, dim,
                                                                              y);
  }
  DPB_CUDA_CHECK_LAUNCH(embedding_forward_kernel);
}

void launch_embedding_backward(cudaStream_t stream, const int32_t* ids, const float* dy, size_t n,
                               int dim, float* dtable) {
  if (n == 0 || dim <= 0) return;
  if (dim % 4 == 0 && aligned_16(dy) && aligned_16(dtable)) {
    const int cols = dim / 4;
    const dim3 block = row_block(cols);
    embedding_backward_kernel<float4><<<row_grid(n, block), block, 0, stream>>>(
        ids, reinterpret_cast<const float4*>(dy), n, cols, reinterpret_cast<float4*>(dtable));
  } else {
    const dim3 block = row_block(dim);
    embedding_backward_kernel<float><<<row_grid(n, block), block, 0, stream>>>(ids, dy, n, dim,
                                                                               dtable);
  }
  DPB_CUDA_CHECK_LAUNCH(embedding_backward_kernel);
}

size_t embedding_touched_rows_workspace_bytes(int vocab) {
  if (vocab <= 0) return 0;
  return flags_bytes(vocab) + select_scratch_bytes(vocab);
}

size_t embedding_backward_sorted_workspace_bytes(size_t n) {
  return 3 * ids_bytes(n) + sort_scratch_bytes(n);
}

void launch_embedding_backward_sorted(cudaStream_t stream, const int32_t* ids, const float* dy,
                                      size_t n, int dim, float* dtable, void* workspace) {
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
  if (dim % 4 == 0 && aligned_16(dy) && aligned_16(dtable)) {
    const int cols = dim / 4;
    const dim3 block = row_block(cols);
    embedding_backward_sorted_kernel<float4><<<row_grid(n, block), block, 0, stream>>>(
        sorted_ids, sorted_positions, reinterpret_cast<const float4*>(dy), n, cols,
        reinterpret_cast<float4*>(dtable));
  } else {
    const dim3 block = row_block(dim);
    embedding_backward_sorted_kernel<float><<<row_grid(n, block), block, 0, stream>>>(
        sorted_ids, sorted_positions, dy, n, dim, dtable);
  }
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
  if (columns % 4 == 0 && columns > 0 && aligned_16(table) && aligned_16(values_out)) {
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

void launch_lstm_cell_forward(cudaStream_t stream, int batch, int hidden, float* gates,
                              const float* bias_input, const float* bias_recurrent,
                              const float* c_prev, float* c, float* h) {
  if (batch <= 0 || hidden <= 0) return;
  // nullptr (c_prev) counts as aligned: it is never dereferenced.
  const bool vectorise = hidden % 4 == 0 && aligned_16(gates) && aligned_16(bias_input) &&
                         aligned_16(bias_recurrent) && aligned_16(c_prev) && aligned_16(c) &&
                         aligned_16(h);
  const size_t items = static_cast<size_t>(batch) * hidden / (vectorise ? 4 : 1);
  if (vectorise) {
    lstm_cell_forward_kernel<4><<<grid_for(items), kBlockSize, 0, stream>>>(
        batch, hidden, gates, bias_input, bias_recurrent, c_prev, c, h);
  } else {
    lstm_cell_forward_kernel<1><<<grid_for(items), kBlockSize, 0, stream>>>(
        batch, hidden, gates, bias_input, bias_recurrent, c_prev, c, h);
  }
  DPB_CUDA_CHECK_LAUNCH(lstm_cell_forward_kernel);
}

void launch_lstm_cell_backward(cudaStream_t stream, int batch, int hidden, const float* gates,
                               const float* c_prev, const float* c, const float* dh,
                               const float* dc, float* dgates, float* dc_prev) {
  if (batch <= 0 || hidden <= 0) return;
  // nullptr counts as aligned: it is never dereferenced.
  const bool vectorise = hidden % 4 == 0 && aligned_16(gates) && aligned_16(c_prev) &&
                         aligned_16(c) && aligned_16(dh) && aligned_16(dc) &&
                         aligned_16(dgates) && aligned_16(dc_prev);
  const size_t items = static_cast<size_t>(batch) * hidden / (vectorise ? 4 : 1);
  if (vectorise) {
    lstm_cell_backward_kernel<4><<<grid_for(items), kBlockSize, 0, stream>>>(
        batch, hidden, gates, c_prev, c, dh, dc, dgates, dc_prev);
  } else {
    lstm_cell_backward_kernel<1><<<grid_for(items), kBlockSize, 0, stream>>>(
        batch, hidden, gates, c_prev, c, dh, dc, dgates, dc_prev);
  }
  DPB_CUDA_CHECK_LAUNCH(lstm_cell_backward_kernel);
}

namespace {

void launch_copy_weight_blocks(cudaStream_t stream, const WeightBlock* blocks, int block_count,
                               size_t max_count, const float* from, float* to, bool to_packed,
                               bool accumulate) {
  if (block_count <= 0 || max_count == 0) return;
  // A few blocks per weight block is plenty: this path runs only where layouts differ.
  const dim3 grid(std::min<unsigned>(grid_for(max_count), 64u), static_cast<unsigned>(block_count));
  copy_weight_blocks_kernel<<<grid, kBlockSize, 0, stream>>>(blocks, from, to, to_packed,
                                                             accumulate);
  DPB_CUDA_CHECK_LAUNCH(copy_weight_blocks_kernel);
}

}  // namespace

void launch_pack_weights(cudaStream_t stream, const WeightBlock* blocks, int block_count,
                         size_t max_count, const float* canonical, float* packed) {
  launch_copy_weight_blocks(stream, blocks, block_count, max_count, canonical, packed, true,
                            false);
}

void launch_add_unpacked_weights(cudaStream_t stream, const WeightBlock* blocks, int block_count,
                                 size_t max_count, const float* packed, float* canonical) {
  launch_copy_weight_blocks(stream, blocks, block_count, max_count, packed, canonical, false,
                            true);
}

}  // namespace dpbench::cuda_kernels
