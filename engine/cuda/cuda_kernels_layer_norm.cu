// Layer normalisation over rows (the Transformer's): forward, and backward with its
// deterministic dgamma and dbeta. Kernels first, launchers after. Rows hold fp32, fp16 or bf16
// (cuda_packs.cuh); the arithmetic and every statistic are fp32, a 16-bit result is rounded once
// as it is stored. All are bound by memory: rows move in 16-byte packs where the row length and
// the pointers allow, and rows that fit are held in registers (forward up to 1024 columns of 16
// bits, 512 of fp32; backward up to 1600, GPT-2 1558m's width), so they are read from memory
// once (row-resident kernels; longer rows stream through L1). dgamma and dbeta
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
// to kPacks of them), so the row is read from memory once. Elements a lane may hold in the
// forward, which keeps only the row; the backward holds the widths of kBackwardWidths (Note
// [held backward rows]).
constexpr int kForwardLaneElements = 32;
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

// Note [held backward rows]
// The row-resident backward keeps in registers only what a row brings: x and dy (and with
// `accumulate`, what dx held) as their 16-byte packs, for the row being worked on and, where
// registers allow, the warp's next row, loaded before this one is worked on so that its latency
// hides behind the work. What stays for the whole part lives in shared memory, lane-major
// ([element][lane], so a warp's 32 lanes touch 32 banks): gamma, and each warp's running sums
// of dy * xhat and dy, which the warps' tree then adds in place. Kept in registers instead (as
// this kernel once did, up to 512 columns), those sums and gamma cost three more registers an
// element: 72 at 768 columns (24 elements a lane), past what two blocks an SM leave beside the
// rows. Held this way a lane keeps 4 words a pack of each row it has in flight, and 768 to 1600
// columns (the GPT-2 family, 124m to 1558m) fit in every type without spilling; two blocks share
// an SM (128 registers a thread) up to kHeldWordsTwoBlocks words of rows in flight, one block
// (255) past that. gpt 124m's 16384 x 768 bf16 rows, accumulating, on an H200: 30.6 us a call
// (121 registers, the next row prefetched), where the streaming kernels took 58.
constexpr int kHeldWordsTwoBlocks = 88;  // of 128 registers, the rest for the work
constexpr int kHeldWordsOneBlock = 200;  // of 255

// Registers (words) a lane's packs of one row take: x and dy, and dx when accumulating.
__host__ __device__ constexpr int held_row_words(int packs, bool accumulate) {
  return packs * 4 * (accumulate ? 3 : 2);
}
// Whether the next row is loaded while this one is worked on: where two rows fit two blocks'
// budget, or where one block an SM is needed all the same and two rows fit its budget.
__host__ __device__ constexpr bool prefetch_backward_rows(int packs, bool accumulate) {
  const int words = held_row_words(packs, accumulate);
  return 2 * words <= kHeldWordsTwoBlocks || (words > kHeldWordsTwoBlocks && 2 * words <= kHeldWordsOneBlock);
}
__host__ __device__ constexpr int backward_blocks_per_sm(int packs, bool accumulate) {
  const int words = held_row_words(packs, accumulate);
  return (prefetch_backward_rows(packs, accumulate) ? 2 * words : words) <= kHeldWordsTwoBlocks ? 2 : 1;
}

// Shared memory of the row-resident backward (Note [held backward rows]): gamma and the
// kRowsPerBlock warps' two sums, kElements a lane each.
template <int kElements>
constexpr size_t backward_shared_bytes() {
  return sizeof(float) * kElements * 32 * (1 + 2 * kRowsPerBlock);
}

// A lane's share of one row of the backward: its packs of x and dy (and of what dx held, when
// accumulating), and the row's saved statistics.
template <typename T, int kVec, int kPacks, bool kAccumulate>
struct BackwardRow {
  Pack<T, kVec> xs[kPacks], ds[kPacks], before[kAccumulate ? kPacks : 1];
  float mean, inv_std;

  __device__ __forceinline__ void load(const T* x, const T* dy, const T* dx, const float* saved_mean,
                                       const float* saved_inv_std, int row, int cols, int packs, int lane) {
    const size_t offset = static_cast<size_t>(row) * cols;
    load_lane_packs(x + offset, packs, lane, xs);
    load_lane_packs(dy + offset, packs, lane, ds);
    if constexpr (kAccumulate) load_lane_packs(dx + offset, packs, lane, before);
    mean = saved_mean[row];
    inv_std = saved_inv_std[row];
  }
};

// Row-resident backward with dgamma and dbeta fused: block p = blockIdx.x takes part p's rows
// [p * rows_per_part, ...) (Note [column sums in parts]), warp w the rows first + w, first + w +
// kRowsPerBlock, ... in order. Each lane adds dy * xhat and dy of its columns over its warp's
// rows, in row order; then the warps add up in a fixed tree (w + 4 into w, w + 2 into w, 1 into
// 0) and warp 0's sums are the part's, written to partial_dgamma, partial_dbeta (parts, cols).
// Note [held backward rows] says what lives where.
template <typename T, int kVec, int kPacks, bool kAccumulate>
__global__ void __launch_bounds__(kRowThreads, backward_blocks_per_sm(kPacks, kAccumulate))
    layer_norm_backward_resident_kernel(const T* x, const T* dy, const float* gamma, const float* saved_mean,
                                        const float* saved_inv_std, int rows, int cols, int rows_per_part, T* dx,
                                        float* partial_dgamma, float* partial_dbeta) {
  constexpr int kElements = kPacks * kVec;
  constexpr int kWarpSums = 2 * kElements * 32;  // a warp's dgamma then dbeta sums, [element][lane]
  constexpr bool kPrefetch = prefetch_backward_rows(kPacks, kAccumulate);
  extern __shared__ float lane_major[];
  float* gammas = lane_major;                // (kElements, 32): gamma as the lanes hold it
  float* sums = lane_major + kElements * 32;  // (kRowsPerBlock, kWarpSums)
  const int packs = cols / kVec;
  const int lane = threadIdx.x;
  const int warp = threadIdx.y;
  const int thread = warp * 32 + lane;
  const int part = blockIdx.x;
  const int last = min(rows, (part + 1) * rows_per_part);
  for (int i = thread; i < kElements * 32; i += kRowThreads) {
    const int e = i / 32, q = i % 32 + 32 * (e / kVec);  // element e of lane i % 32
    gammas[i] = q < packs ? gamma[q * kVec + e % kVec] : 0.0f;
  }
  for (int i = thread; i < kRowsPerBlock * kWarpSums; i += kRowThreads) sums[i] = 0.0f;
  __syncthreads();
  const float* lane_gamma = gammas + lane;              // element e at [32 e]
  float* lane_dgamma = sums + warp * kWarpSums + lane;  // element e at [32 e]
  float* lane_dbeta = lane_dgamma + kElements * 32;

  int row = part * rows_per_part + warp;
  BackwardRow<T, kVec, kPacks, kAccumulate> current{};
  if (row < last) current.load(x, dy, dx, saved_mean, saved_inv_std, row, cols, packs, lane);
  for (; row < last; row += kRowsPerBlock) {
    const int next = row + kRowsPerBlock;
    BackwardRow<T, kVec, kPacks, kAccumulate> ahead{};
    if (kPrefetch && next < last)
      ahead.load(x, dy, dx, saved_mean, saved_inv_std, next, cols, packs, lane);
    const float mean = current.mean, inv_std = current.inv_std;
    float g_sum = 0.0f, gx_sum = 0.0f;
    for_lane_elements<kPacks, kVec>(packs, lane, [&](int j, int k) {
      const int e = j * kVec + k;
      const float d = element(current.ds[j], k);
      const float xhat = normalized(element(current.xs[j], k), mean, inv_std);
      const float g = d * lane_gamma[32 * e];
      g_sum += g;
      gx_sum += g * xhat;
      lane_dgamma[32 * e] += d * xhat;
      lane_dbeta[32 * e] += d;
    });
    const float g_mean = warp_sum(g_sum) / static_cast<float>(cols);
    const float gx_mean = warp_sum(gx_sum) / static_cast<float>(cols);
    store_lane_packs<kPacks, kVec>(dx + static_cast<size_t>(row) * cols, packs, lane, [&](int j, int k) {
      const float g = element(current.ds[j], k) * lane_gamma[32 * (j * kVec + k)];
      const float gradient = input_gradient(g, normalized(element(current.xs[j], k), mean, inv_std), g_mean, gx_mean, inv_std);
      if constexpr (kAccumulate) {
        return element(current.before[j], k) + gradient;
      } else {
        return gradient;
      }
    });
    if (kPrefetch) {
      current = ahead;
    } else if (next < last) {
      current.load(x, dy, dx, saved_mean, saved_inv_std, next, cols, packs, lane);
    }
  }

  // Warps [half, 2 half) add their sums into warps [0, half)'s, element by element.
  __syncthreads();
  for (int half = kRowsPerBlock / 2; half >= 1; half /= 2) {
    for (int i = thread; i < half * kWarpSums; i += kRowThreads) sums[i] += sums[i + half * kWarpSums];
    __syncthreads();
  }
  const size_t part_start = static_cast<size_t>(part) * cols;
  for (int c = thread; c < cols; c += kRowThreads) {
    const int q = c / kVec;
    const int at = 32 * ((q / 32) * kVec + c % kVec) + q % 32;  // column c's element of lane q % 32
    partial_dgamma[part_start + c] = sums[at];
    partial_dbeta[part_start + c] = sums[kElements * 32 + at];
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

// The row widths the row-resident backward is built for, narrowest first: the GPT-2 family's
// (768 to 1600) and the narrower ones of the other models. Each gives the packs a lane holds, the
// fewest that hold that width.
constexpr int kBackwardWidths[] = {128, 256, 512, 768, 1024, 1280, 1600};
constexpr int kBackwardWidthCount = static_cast<int>(sizeof(kBackwardWidths) / sizeof(kBackwardWidths[0]));

// Calls run(std::integral_constant<int, kPacks>) with the packs a lane holds for the narrowest
// width of kBackwardWidths (from kFrom on) that holds a row of `packs` packs of kVec elements;
// returns false (running nothing) where none does. Only kVec > 1 rows are held.
template <int kVec, int kFrom = 0, typename Run>
bool with_backward_lane_packs(int packs, Run run) {
  if constexpr (kVec > 1 && kFrom < kBackwardWidthCount) {
    constexpr int kPacks = (kBackwardWidths[kFrom] / kVec + 31) / 32;
    if ((packs + 31) / 32 <= kPacks) return run(std::integral_constant<int, kPacks>{}), true;
    return with_backward_lane_packs<kVec, kFrom + 1>(packs, run);
  }
  return false;
}

// Launches the row-resident backward where its shared memory fits the device, opting in past 48
// KB (legal inside a graph capture; repeated on every launch, since the setting is per device);
// returns false (running nothing) where it does not fit.
template <typename T, int kVec, int kPacks, bool kAccumulate>
bool launch_backward_resident(cudaStream_t stream, const T* x, const T* dy, const float* gamma,
                              const float* saved_mean, const float* saved_inv_std, int rows, int cols,
                              int rows_per_part, int parts, T* dx, float* partial_dgamma, float* partial_dbeta) {
  constexpr size_t bytes = backward_shared_bytes<kPacks * kVec>();
  auto kernel = layer_norm_backward_resident_kernel<T, kVec, kPacks, kAccumulate>;
  if (!allow_dynamic_shared_memory(kernel, bytes)) return false;
  kernel<<<static_cast<unsigned>(parts), dim3(32, kRowsPerBlock), bytes, stream>>>(
      x, dy, gamma, saved_mean, saved_inv_std, rows, cols, rows_per_part, dx, partial_dgamma, partial_dbeta);
  return true;
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
      bool resident = false;
      with_backward_lane_packs<kVec>(cols / kVec, [&](auto lane_packs) {
        constexpr int kPacks = decltype(lane_packs)::value;
        resident = accumulate ? launch_backward_resident<T, kVec, kPacks, true>(
                                    stream, xs, dys, gamma, saved_mean, saved_inv_std, rows, cols, rows_per_part,
                                    parts, dxs, partial_dgamma, partial_dbeta)
                              : launch_backward_resident<T, kVec, kPacks, false>(
                                    stream, xs, dys, gamma, saved_mean, saved_inv_std, rows, cols, rows_per_part,
                                    parts, dxs, partial_dgamma, partial_dbeta);
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
