// Layer normalisation over rows (the Transformer's): forward, and backward with its
// deterministic dgamma and dbeta. Kernels first, launchers after. Rows hold fp32, fp16 or bf16
// (cuda_packs.cuh); the arithmetic and every statistic are fp32, a 16-bit result is rounded once
// as it is stored. All are bound by memory: rows move in 16-byte packs where the row length and
// the pointers allow, and rows that fit are held in registers (up to 512 columns, the Transformer's
// d_model; 1024 of 16 bits forward), so they are read from memory once (row-resident kernels;
// longer rows stream through L1). dgamma and dbeta
// are column sums over the rows, in two stages (Note [column sums in parts] in
// cuda_kernels_reduce.cu); nothing allocates, synchronises or uses atomics, so every launcher can
// be captured in a graph and gives the same bits on every run.
#include <cuda_runtime.h>

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

constexpr int kRowsPerBlock = 8;  // warps per block of the row kernels: one row per warp
constexpr int kRowThreads = 32 * kRowsPerBlock;

// Rows of layer_norm_backward's dgamma/dbeta partial sums (Note [column sums in parts] in
// cuda_kernels_reduce.cu): the partition depends on the shape alone, so the final sums add the
// same partials in the same order on every GPU and run. About kTargetParts parts, of at least
// kMinRowsPerPart rows: a block each, so one wave of the row-resident backward on an H100 or H200
// (its registers let two blocks share an SM).
constexpr int kTargetParts = 256;
constexpr int kMinRowsPerPart = 32;
constexpr int kPartColumns = 32;  // columns per block of the unfused partial sums: a warp reads them
constexpr int kPartLanes = 8;     // rows of a part summed in parallel there

// Row-resident kernels: a warp holds its row in registers, lane l the packs l, l + 32, ... (up
// to kPacks of them), so the row is read from memory once. Elements a lane may hold: the forward
// keeps only the row; the backward also keeps gamma and two sums per element.
constexpr int kForwardLaneElements = 32;
constexpr int kBackwardLaneElements = 16;
constexpr int kForwardRowsPerWarp = 4;  // the forward's rows a warp, which share one load of gamma and beta

// Sum over a warp by butterfly: every lane ends with the same bits (each step adds the same two
// values, in either order), so lanes may branch on the result alike.
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// One warp per row (blockDim (32, kRowsPerBlock)). Statistics by two passes, mean then the mean
// of squared deviations: no cancellation, unlike E[x^2] - E[x]^2. A lane adds its elements in
// the order of its packs (l, l + 32, ...) and of the elements in each, then the warp adds the
// lanes by butterfly; the row-resident and the streaming kernels share that order and every
// formula. kVec divides cols and the rows are aligned for it (the launcher checks); which kernel
// runs depends on the shape and that alignment only.

// Pack j of lane `lane` of a row held in registers: pack lane + 32 j of the row, if the row has it.
template <int kPacks, int kVec, typename T>
__device__ __forceinline__ void load_lane_packs(const T* row, int packs, int lane,
                                                Pack<T, kVec> (&out)[kPacks]) {
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int q = lane + 32 * j;
    if (q < packs) out[j] = load_pack<kVec>(row, q);
  }
}

template <int kPacks, int kVec>
__device__ __forceinline__ void load_lane_floats(const float* values, int packs, int lane,
                                                 float (&out)[kPacks][kVec]) {
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int q = lane + 32 * j;
#pragma unroll
    for (int k = 0; k < kVec; ++k) out[j][k] = q < packs ? values[q * kVec + k] : 0.0f;
  }
}

// Calls f(j, k) for element k of every pack j the lane holds (pack lane + 32 j of the row, if the
// row has it), in the order of its packs and of the elements in each: the order of a lane's sums.
template <int kPacks, int kVec, typename F>
__device__ __forceinline__ void for_lane_elements(int packs, int lane, F f) {
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    if (lane + 32 * j < packs) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) f(j, k);
    }
  }
}

// Stores the lane's packs of a row: element k of pack j is value(j, k), rounded to T.
template <int kPacks, int kVec, typename T, typename Value>
__device__ __forceinline__ void store_lane_packs(T* row, int packs, int lane, Value value) {
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int q = lane + 32 * j;
    if (q < packs) {
      float result[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) result[k] = value(j, k);
      store_pack<kVec>(row, q, round_pack<T, kVec>(result));
    }
  }
}

// The formulas the kernels share: xhat = (x - mean) * inv_std; a row's 1 / std from its lanes'
// sums of squared deviations; dx from g = dy * gamma, xhat and the row's means of g and g * xhat.
__device__ __forceinline__ float normalized(float x, float mean, float inv_std) { return (x - mean) * inv_std; }
__device__ __forceinline__ float row_inv_std(float squares, int cols, float epsilon) {
  return 1.0f / sqrtf(warp_sum(squares) / static_cast<float>(cols) + epsilon);
}
__device__ __forceinline__ float input_gradient(float g, float xhat, float g_mean, float gx_mean, float inv_std) {
  return inv_std * (g - g_mean - xhat * gx_mean);
}

// Row-resident forward: warp (blockIdx.x, threadIdx.y) takes rows blockIdx.x * kRowsPerBlock +
// threadIdx.y, + gridDim.x * kRowsPerBlock, ..., loading the next row before working on this one.
template <typename T, int kVec, int kPacks>
__global__ void __launch_bounds__(kRowThreads) layer_norm_forward_resident_kernel(
    const T* x, const float* gamma, const float* beta, int rows, int cols, float epsilon, T* y,
    float* saved_mean, float* saved_inv_std) {
  const int packs = cols / kVec;
  const int lane = threadIdx.x;
  const int stride = gridDim.x * kRowsPerBlock;
  float gammas[kPacks][kVec], betas[kPacks][kVec];
  load_lane_floats(gamma, packs, lane, gammas);
  load_lane_floats(beta, packs, lane, betas);
  int row = blockIdx.x * kRowsPerBlock + threadIdx.y;
  Pack<T, kVec> current[kPacks] = {};
  if (row < rows) load_lane_packs(x + static_cast<size_t>(row) * cols, packs, lane, current);
  for (; row < rows; row += stride) {
    Pack<T, kVec> next[kPacks] = {};
    if (row + stride < rows) load_lane_packs(x + static_cast<size_t>(row + stride) * cols, packs, lane, next);
    float sum = 0.0f;
    for_lane_elements<kPacks, kVec>(packs, lane, [&](int j, int k) { sum += element(current[j], k); });
    const float mean = warp_sum(sum) / static_cast<float>(cols);
    float squares = 0.0f;
    for_lane_elements<kPacks, kVec>(packs, lane, [&](int j, int k) {
      const float deviation = element(current[j], k) - mean;
      squares += deviation * deviation;
    });
    const float inv_std = row_inv_std(squares, cols, epsilon);
    store_lane_packs<kPacks, kVec>(y + static_cast<size_t>(row) * cols, packs, lane, [&](int j, int k) {
      return gammas[j][k] * normalized(element(current[j], k), mean, inv_std) + betas[j][k];
    });
    if (lane == 0) {
      saved_mean[row] = mean;
      saved_inv_std[row] = inv_std;
    }
#pragma unroll
    for (int j = 0; j < kPacks; ++j) current[j] = next[j];
  }
}

// Streaming forward, for rows too long to hold: the row is read from global memory in every pass
// (it stays in L1/L2 between passes, and nothing caps its length).
template <typename T, int kVec>
__global__ void layer_norm_forward_kernel(const T* x, const float* gamma, const float* beta, int rows,
                                          int cols, float epsilon, T* y, float* saved_mean,
                                          float* saved_inv_std) {
  const int packs = cols / kVec;
  for (int row = blockIdx.x * kRowsPerBlock + threadIdx.y; row < rows; row += gridDim.x * kRowsPerBlock) {
    const T* in = x + static_cast<size_t>(row) * cols;  // (cols)
    T* out = y + static_cast<size_t>(row) * cols;       // (cols)
    float sum = 0.0f;
    for (int q = threadIdx.x; q < packs; q += 32) {
      const Pack<T, kVec> v = load_pack<kVec>(in, q);
#pragma unroll
      for (int k = 0; k < kVec; ++k) sum += element(v, k);
    }
    const float mean = warp_sum(sum) / static_cast<float>(cols);
    float squares = 0.0f;
    for (int q = threadIdx.x; q < packs; q += 32) {
      const Pack<T, kVec> v = load_pack<kVec>(in, q);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float deviation = element(v, k) - mean;
        squares += deviation * deviation;
      }
    }
    const float inv_std = row_inv_std(squares, cols, epsilon);
    for (int q = threadIdx.x; q < packs; q += 32) {
      const Pack<T, kVec> v = load_pack<kVec>(in, q);
      float result[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const int c = q * kVec + k;
        result[k] = gamma[c] * normalized(element(v, k), mean, inv_std) + beta[c];
      }
      store_pack<kVec>(out, q, round_pack<T, kVec>(result));
    }
    if (threadIdx.x == 0) {
      saved_mean[row] = mean;
      saved_inv_std[row] = inv_std;
    }
  }
}

// Backward: dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma,
// xhat = (x - mean) * inv_std; dgamma = sum over rows of dy * xhat, dbeta = sum of dy. dx may
// alias dy: every element is read and written by one lane only, and its last read comes before
// its write.

// Row-resident backward with dgamma and dbeta fused: block p = blockIdx.x takes part p's rows
// [p * rows_per_part, ...) (Note [column sums in parts]), warp w the rows first + w, first + w +
// kRowsPerBlock, ... in order, loading the next before working on this one. Each lane adds dy *
// xhat and dy of its columns over its warp's rows, in row order; then the warps add up in a fixed
// tree (w + 4 into w, w + 2 into w, 1 into 0) and warp 0 writes the part's sums to
// partial_dgamma, partial_dbeta (parts, cols).
template <typename T, int kVec, int kPacks, bool kAccumulate>
__global__ void __launch_bounds__(kRowThreads, 2) layer_norm_backward_resident_kernel(
    const T* x, const T* dy, const float* gamma, const float* saved_mean, const float* saved_inv_std,
    int rows, int cols, int rows_per_part, T* dx, float* partial_dgamma, float* partial_dbeta) {
  constexpr int kElements = kPacks * kVec;
  __shared__ float exchange[kRowsPerBlock / 2][2][kElements][32];  // [warp][dgamma, dbeta][element][lane]
  const int packs = cols / kVec;
  const int lane = threadIdx.x;
  const int warp = threadIdx.y;
  const int part = blockIdx.x;
  const int last = min(rows, (part + 1) * rows_per_part);
  float gammas[kPacks][kVec];
  load_lane_floats(gamma, packs, lane, gammas);
  float dgamma[kPacks][kVec] = {}, dbeta[kPacks][kVec] = {};

  int row = part * rows_per_part + warp;
  Pack<T, kVec> xs[kPacks] = {}, ds[kPacks] = {};
  float mean = 0.0f, inv_std = 0.0f;
  if (row < last) {
    load_lane_packs(x + static_cast<size_t>(row) * cols, packs, lane, xs);
    load_lane_packs(dy + static_cast<size_t>(row) * cols, packs, lane, ds);
    mean = saved_mean[row];
    inv_std = saved_inv_std[row];
  }
  for (; row < last; row += kRowsPerBlock) {
    const int next = row + kRowsPerBlock;
    Pack<T, kVec> next_xs[kPacks] = {}, next_ds[kPacks] = {};
    float next_mean = 0.0f, next_inv_std = 0.0f;
    if (next < last) {
      load_lane_packs(x + static_cast<size_t>(next) * cols, packs, lane, next_xs);
      load_lane_packs(dy + static_cast<size_t>(next) * cols, packs, lane, next_ds);
      next_mean = saved_mean[next];
      next_inv_std = saved_inv_std[next];
    }
    float g_sum = 0.0f, gx_sum = 0.0f;
    for_lane_elements<kPacks, kVec>(packs, lane, [&](int j, int k) {
      const float d = element(ds[j], k);
      const float xhat = normalized(element(xs[j], k), mean, inv_std);
      const float g = d * gammas[j][k];
      g_sum += g;
      gx_sum += g * xhat;
      dgamma[j][k] += d * xhat;
      dbeta[j][k] += d;
    });
    const float g_mean = warp_sum(g_sum) / static_cast<float>(cols);
    const float gx_mean = warp_sum(gx_sum) / static_cast<float>(cols);
    Pack<T, kVec> before[kPacks] = {};  // with kAccumulate, what dx held (a residual's gradient)
    if constexpr (kAccumulate) load_lane_packs(dx + static_cast<size_t>(row) * cols, packs, lane, before);
    store_lane_packs<kPacks, kVec>(dx + static_cast<size_t>(row) * cols, packs, lane, [&](int j, int k) {
      const float g = element(ds[j], k) * gammas[j][k];
      const float gradient = input_gradient(g, normalized(element(xs[j], k), mean, inv_std), g_mean, gx_mean, inv_std);
      return kAccumulate ? element(before[j], k) + gradient : gradient;
    });
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      xs[j] = next_xs[j];
      ds[j] = next_ds[j];
    }
    mean = next_mean;
    inv_std = next_inv_std;
  }

  // Warps [half, 2 half) hand their sums to warps [0, half), which add them to their own.
  for (int half = kRowsPerBlock / 2; half >= 1; half /= 2) {
    if (warp >= half && warp < 2 * half) {
#pragma unroll
      for (int j = 0; j < kPacks; ++j) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          exchange[warp - half][0][j * kVec + k][lane] = dgamma[j][k];
          exchange[warp - half][1][j * kVec + k][lane] = dbeta[j][k];
        }
      }
    }
    __syncthreads();
    if (warp < half) {
#pragma unroll
      for (int j = 0; j < kPacks; ++j) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          dgamma[j][k] += exchange[warp][0][j * kVec + k][lane];
          dbeta[j][k] += exchange[warp][1][j * kVec + k][lane];
        }
      }
    }
    __syncthreads();
  }
  if (warp == 0) {
    const size_t part_start = static_cast<size_t>(part) * cols;
    for_lane_elements<kPacks, kVec>(packs, lane, [&](int j, int k) {
      const int q = lane + 32 * j;
      partial_dgamma[part_start + q * kVec + k] = dgamma[j][k];
      partial_dbeta[part_start + q * kVec + k] = dbeta[j][k];
    });
  }
}

// Streaming dx, for rows too long to hold (the dgamma/dbeta partial sums come from
// layer_norm_partials_kernel).
template <typename T, int kVec, bool kAccumulate>
__global__ void layer_norm_backward_dx_kernel(const T* x, const T* dy, const float* gamma,
                                              const float* saved_mean, const float* saved_inv_std,
                                              int rows, int cols, T* dx) {
  const int packs = cols / kVec;
  for (int row = blockIdx.x * kRowsPerBlock + threadIdx.y; row < rows; row += gridDim.x * kRowsPerBlock) {
    const size_t offset = static_cast<size_t>(row) * cols;
    const float mean = saved_mean[row];
    const float inv_std = saved_inv_std[row];
    float g_sum = 0.0f, gx_sum = 0.0f;
    for (int q = threadIdx.x; q < packs; q += 32) {
      const Pack<T, kVec> xs = load_pack<kVec>(x + offset, q);
      const Pack<T, kVec> ds = load_pack<kVec>(dy + offset, q);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float g = element(ds, k) * gamma[q * kVec + k];
        g_sum += g;
        gx_sum += g * normalized(element(xs, k), mean, inv_std);
      }
    }
    const float g_mean = warp_sum(g_sum) / static_cast<float>(cols);
    const float gx_mean = warp_sum(gx_sum) / static_cast<float>(cols);
    for (int q = threadIdx.x; q < packs; q += 32) {
      const Pack<T, kVec> xs = load_pack<kVec>(x + offset, q);
      const Pack<T, kVec> ds = load_pack<kVec>(dy + offset, q);
      float result[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float g = element(ds, k) * gamma[q * kVec + k];
        result[k] = input_gradient(g, normalized(element(xs, k), mean, inv_std), g_mean, gx_mean, inv_std);
      }
      if constexpr (kAccumulate) {
        const Pack<T, kVec> before = load_pack<kVec>(dx + offset, q);
#pragma unroll
        for (int k = 0; k < kVec; ++k) result[k] += element(before, k);
      }
      store_pack<kVec>(dx + offset, q, round_pack<T, kVec>(result));
    }
  }
}

// Block (kPartColumns, kPartLanes) of part p = blockIdx.y: thread (c, y) sums dy * xhat and dy of
// column c over the part's rows y, y + kPartLanes, ... in order, then thread (c, 0) adds the
// lanes in order. partial_dgamma, partial_dbeta: (parts, cols).
template <typename T>
__global__ void layer_norm_partials_kernel(const T* x, const T* dy, const float* saved_mean,
                                           const float* saved_inv_std, int rows, int cols, int rows_per_part,
                                           float* partial_dgamma, float* partial_dbeta) {
  __shared__ float lanes_dgamma[kPartLanes][kPartColumns + 1];
  __shared__ float lanes_dbeta[kPartLanes][kPartColumns + 1];
  const int c = blockIdx.x * kPartColumns + threadIdx.x;
  const int first = blockIdx.y * rows_per_part;
  const int last = min(rows, first + rows_per_part);
  float dgamma = 0.0f, dbeta = 0.0f;
  if (c < cols) {
    for (int row = first + threadIdx.y; row < last; row += kPartLanes) {
      const size_t at = static_cast<size_t>(row) * cols + c;
      const float d = load_widened(dy + at);
      dgamma += d * normalized(load_widened(x + at), saved_mean[row], saved_inv_std[row]);
      dbeta += d;
    }
  }
  lanes_dgamma[threadIdx.y][threadIdx.x] = dgamma;
  lanes_dbeta[threadIdx.y][threadIdx.x] = dbeta;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total_dgamma = 0.0f, total_dbeta = 0.0f;
    for (int lane = 0; lane < kPartLanes; ++lane) {
      total_dgamma += lanes_dgamma[lane][threadIdx.x];
      total_dbeta += lanes_dbeta[lane][threadIdx.x];
    }
    partial_dgamma[static_cast<size_t>(blockIdx.y) * cols + c] = total_dgamma;
    partial_dbeta[static_cast<size_t>(blockIdx.y) * cols + c] = total_dbeta;
  }
}

// ---- launch helpers --------------------------------------------------------------------------

// Calls run(std::integral_constant<int, kPacks>) with the fewest packs a lane, 1, 2 or 4, that
// hold a row of `packs` packs of kVec elements, within kMaxElements elements a lane; returns false
// (running nothing) where the row is longer. Only kVec > 1 rows are held.
template <int kVec, int kMaxElements, typename Run>
bool with_lane_packs(int packs, Run run) {
  if constexpr (kVec > 1) {
    const int per_lane = (packs + 31) / 32;
    if constexpr (kVec <= kMaxElements) {
      if (per_lane <= 1) return run(std::integral_constant<int, 1>{}), true;
    }
    if constexpr (2 * kVec <= kMaxElements) {
      if (per_lane <= 2) return run(std::integral_constant<int, 2>{}), true;
    }
    if constexpr (4 * kVec <= kMaxElements) {
      if (per_lane <= 4) return run(std::integral_constant<int, 4>{}), true;
    }
  }
  return false;
}

unsigned row_blocks(int rows, int rows_per_warp = 1) {
  const size_t per_block = static_cast<size_t>(kRowsPerBlock) * rows_per_warp;
  const size_t blocks = (static_cast<size_t>(rows) + per_block - 1) / per_block;
  return static_cast<unsigned>(std::max<size_t>(1, std::min(blocks, kMaxGridBlocks)));
}

// The dgamma/dbeta partition (Note [column sums in parts]): rows_per_part from the row count alone.
int layer_norm_rows_per_part(int rows) {
  return std::max(kMinRowsPerPart, (rows + kTargetParts - 1) / kTargetParts);
}

int layer_norm_parts(int rows) {
  const int per_part = layer_norm_rows_per_part(rows);
  return (rows + per_part - 1) / per_part;
}

}  // namespace

void launch_layer_norm_forward(cudaStream_t stream, DataType type, const void* x, const float* gamma,
                               const float* beta, int rows, int cols, float epsilon, void* y,
                               float* saved_mean, float* saved_inv_std) {
  if (rows <= 0 || cols <= 0) return;
  with_storage_type(type, "layer_norm_forward", [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    with_row_packs<T>(cols, {x, y}, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const bool resident = with_lane_packs<kVec, kForwardLaneElements>(cols / kVec, [&](auto lane_packs) {
        constexpr int kPacks = decltype(lane_packs)::value;
        layer_norm_forward_resident_kernel<T, kVec, kPacks>
            <<<row_blocks(rows, kForwardRowsPerWarp), dim3(32, kRowsPerBlock), 0, stream>>>(
                xs, gamma, beta, rows, cols, epsilon, ys, saved_mean, saved_inv_std);
      });
      if (!resident) {
        layer_norm_forward_kernel<T, kVec><<<row_blocks(rows), dim3(32, kRowsPerBlock), 0, stream>>>(
            xs, gamma, beta, rows, cols, epsilon, ys, saved_mean, saved_inv_std);
      }
    });
  });
  DPB_CUDA_CHECK_LAUNCH(layer_norm_forward_kernel);
}

size_t layer_norm_workspace_bytes(int rows, int cols) {
  if (rows <= 0 || cols <= 0) return 0;
  return 2 * static_cast<size_t>(layer_norm_parts(rows)) * cols * sizeof(float);
}

void launch_layer_norm_backward(cudaStream_t stream, DataType type, const void* x, const void* dy,
                                const float* gamma, const float* saved_mean, const float* saved_inv_std,
                                int rows, int cols, void* dx, float* dgamma, float* dbeta,
                                void* workspace, bool accumulate) {
  if (cols <= 0) return;
  if (rows <= 0) {
    DPB_CUDA_CHECK(cudaMemsetAsync(dgamma, 0, sizeof(float) * cols, stream));
    DPB_CUDA_CHECK(cudaMemsetAsync(dbeta, 0, sizeof(float) * cols, stream));
    return;
  }
  const int rows_per_part = layer_norm_rows_per_part(rows);
  const int parts = layer_norm_parts(rows);
  float* partial_dgamma = static_cast<float*>(workspace);  // (parts, cols)
  float* partial_dbeta = partial_dgamma + static_cast<size_t>(parts) * cols;
  with_storage_type(type, "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x);
    const T* dys = static_cast<const T*>(dy);
    T* dxs = static_cast<T*>(dx);
    with_row_packs<T>(cols, {x, dy, dx}, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      // Rows that fit in registers: one pass makes dx and the partial sums together.
      const bool resident = with_lane_packs<kVec, kBackwardLaneElements>(cols / kVec, [&](auto lane_packs) {
        constexpr int kPacks = decltype(lane_packs)::value;
        const dim3 grid(static_cast<unsigned>(parts)), block(32, kRowsPerBlock);
        if (accumulate)
          layer_norm_backward_resident_kernel<T, kVec, kPacks, true><<<grid, block, 0, stream>>>(
              xs, dys, gamma, saved_mean, saved_inv_std, rows, cols, rows_per_part, dxs, partial_dgamma,
              partial_dbeta);
        else
          layer_norm_backward_resident_kernel<T, kVec, kPacks, false><<<grid, block, 0, stream>>>(
              xs, dys, gamma, saved_mean, saved_inv_std, rows, cols, rows_per_part, dxs, partial_dgamma,
              partial_dbeta);
      });
      if (resident) return;
      // The partial sums first: they read dy, which dx may overwrite.
      const dim3 part_grid(static_cast<unsigned>((cols + kPartColumns - 1) / kPartColumns),
                           static_cast<unsigned>(parts));
      layer_norm_partials_kernel<T><<<part_grid, dim3(kPartColumns, kPartLanes), 0, stream>>>(
          xs, dys, saved_mean, saved_inv_std, rows, cols, rows_per_part, partial_dgamma, partial_dbeta);
      DPB_CUDA_CHECK_LAUNCH(layer_norm_partials_kernel);
      if (accumulate)
        layer_norm_backward_dx_kernel<T, kVec, true><<<row_blocks(rows), dim3(32, kRowsPerBlock), 0, stream>>>(
            xs, dys, gamma, saved_mean, saved_inv_std, rows, cols, dxs);
      else
        layer_norm_backward_dx_kernel<T, kVec, false><<<row_blocks(rows), dim3(32, kRowsPerBlock), 0, stream>>>(
            xs, dys, gamma, saved_mean, saved_inv_std, rows, cols, dxs);
    });
  });
  DPB_CUDA_CHECK_LAUNCH(layer_norm_backward);
  const ColumnParts sums[2] = {{partial_dgamma, dgamma}, {partial_dbeta, dbeta}};
  launch_sum_column_parts(stream, sums, 2, static_cast<size_t>(parts), cols, /*in_double=*/false);
}

}  // namespace dpbench::cuda_kernels
