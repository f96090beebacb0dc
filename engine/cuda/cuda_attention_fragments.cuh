// Device helpers of the mma.sync attention kernels (cuda_attention_flash.cuh): a CTA's tiles in
// shared memory, filled by cp.async, the fragment loads of each kind of operand, the tensor-core
// product itself and the two tile products every kernel is made of, a row's statistics across
// its quad, and the accumulators' stores.
//
// Note [register attention]: a CTA of 4 warps owns 64 rows (queries; keys in the dK/dV kernel),
// 16 per warp, and walks tiles of 64 columns (the other side). A product's result stays in the
// accumulators of mma.sync (m16n8k8 TF32 for fp32 data, m16n8k16 for 16-bit), whose element
// positions PTX specifies: lane (g = lane / 4, t = lane % 4) holds rows g and g + 8 of each block
// of 8 columns at columns 2t and 2t + 1. So a row's maximum and sum are a lane's own values and
// two shuffles within its quad, and the probabilities (or score gradients) become the left operand
// of the next product register to register: in 16 bits an m16n8k16 operand is exactly two
// adjacent column blocks of accumulators, packed in pairs; in TF32 the m16n8k8 operand wants
// columns t and t + 4 where the accumulator holds 2t and 2t + 1, so that product takes its depth
// in the order 0, 2, 4, 6, 1, 3, 5, 7 (lane t's k and k + 4 are columns 2t and 2t + 1) and reads
// its right operand's rows in the same order. Each thread copies its share of a tile from global
// memory with cp.async into one of two buffers while the warps multiply the other; fp32 tiles are
// then rounded to TF32 in place, once, by the thread that copied them (as the WMMA kernels round
// on entry). Tile rows are padded by 16 bytes, which makes each kind of fragment load
// conflict-free: 32-bit loads of fp32 tiles (rows 4 banks apart: lane (g, t) reads bank 4g + t,
// or 8t + g for the reordered depth), ldmatrix for 16-bit tiles (eight rows in eight different
// bank quads). Causal tiles past the diagonal are never visited; masks are applied only where a
// warp's rows see part of a tile. Probabilities and score gradients are rounded once to the
// input type before they multiply; every sum is fp32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "engine/cuda/cuda_attention_mma.cuh"
#include "engine/cuda/cuda_attention_tiles.cuh"
#include "engine/cuda/cuda_packs.cuh"

namespace dpbench::cuda_kernels {
namespace {

constexpr int kFlashTile = 64;      // rows of a CTA and columns of a tile (Note [register attention])
constexpr int kFlashWarpRows = 16;  // rows of a warp
constexpr int kFlashThreads = 128;  // 4 warps
static_assert(kFlashThreads == kAttentionThreads, "the launch helper launches kAttentionThreads");
constexpr int kColumnBlocks = kFlashTile / 8;  // blocks of 8 columns in a tile's accumulators
constexpr int kFlashMaxHead = 64;              // the widest padded head these kernels take

// The depth of one mma.sync: 8 for TF32, 16 for 16-bit types.
template <typename T>
constexpr int kMmaDepth = std::is_same_v<T, float> ? 8 : 16;

// Shared-memory geometry of one tile: 64 rows of kD elements plus 16 bytes.
template <typename T, int kD>
struct FlashLayout {
  static constexpr int kRow = kD + static_cast<int>(16 / sizeof(T));
  static constexpr int kTile = kFlashTile * kRow;  // elements
  static constexpr size_t kTileBytes = sizeof(T) * kTile;
  static constexpr size_t kForwardBytes = 5 * kTileBytes;  // queries, keys and values twice
  static constexpr size_t kDqBytes = 6 * kTileBytes;       // queries, d_o, keys and values twice
  // Keys, values, queries and d_o twice, each query tile's lse and D_i twice.
  static constexpr size_t kDkdvBytes = 6 * kTileBytes + 4 * sizeof(float) * kFlashTile;
  static_assert(kTileBytes % 128 == 0, "tiles keep 128-byte alignment");
  static_assert(kD % 16 == 0 && kD <= kFlashMaxHead, "heads of 32 or 64");
};

// d += a b on the tensor cores: a 16 x depth (4 registers), b depth x 8 (2 registers), d 16 x 8.
template <typename T>
__device__ __forceinline__ void mma_accumulate(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (std::is_same_v<T, float>) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8 x 8 matrices of 16-bit elements (lanes 8m .. 8m + 7 name matrix m's rows), as fragments;
// `transposed` hands each lane a column pair instead of a row pair.
template <bool kTransposed>
__device__ __forceinline__ void load_matrices(uint32_t (&r)[4], const void* row) {
  if constexpr (kTransposed) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row)));
  }
}

// 16 bytes from global to shared memory without passing through registers; zeros where !valid.
__device__ __forceinline__ void copy_async_16(void* to, const void* from, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(to)), "l"(from),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void copy_async_4(void* to, const void* from, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(to)), "l"(from),
               "r"(valid ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Every copy this thread started has landed (visible to this thread; a barrier shows them to all).
__device__ __forceinline__ void copy_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Rows [first, first + count) of head h (tokens of sentence b) into tile rows 0 .. 64 as stored,
// asynchronously; rows past count and columns past head_dim are zeros. Needs the vectorised case.
template <typename T, int kD>
__device__ __forceinline__ void stage_tile_async(T* tile, const T* base, int64_t stride, const AttentionArgs& a,
                                                 int b, int h, int first, int count) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  constexpr int kPacks = kD / kVec;
  const T* head = base + static_cast<int64_t>(h) * a.head_dim;
#pragma unroll
  for (int item = threadIdx.x; item < kFlashTile * kPacks; item += kFlashThreads) {
    const int row = item / kPacks, column = item % kPacks * kVec;
    const bool valid = row < count && column < a.head_dim;
    const T* from = valid ? head + (static_cast<int64_t>(first + row) * a.batch + b) * stride + column : base;
    copy_async_16(tile + row * FlashLayout<T, kD>::kRow + column, from, valid);
  }
}

// fp32: the thread's share of a staged tile (what it copied, landed) rounded to TF32 in place.
template <typename T, int kD>
__device__ __forceinline__ void round_staged_tile(T* tile) {
  if constexpr (std::is_same_v<T, float>) {
    constexpr int kPacks = kD / 4;
#pragma unroll
    for (int item = threadIdx.x; item < kFlashTile * kPacks; item += kFlashThreads) {
      float4* at = reinterpret_cast<float4*>(tile + item / kPacks * FlashLayout<T, kD>::kRow + item % kPacks * 4);
      float4 value = *at;
      value = make_float4(round_to<float>(value.x), round_to<float>(value.y), round_to<float>(value.z),
                          round_to<float>(value.w));
      *at = value;
    }
  }
}

// Row statistics of a query tile (lse, D_i: 64 floats each from `at`) into shared memory,
// asynchronously, one float per thread; zeros past `count`.
__device__ __forceinline__ void stage_row_statistics_async(float* lse_tile, float* dot_tile, const float* lse,
                                                           const float* row_dots, int64_t at, int count) {
  const int t = threadIdx.x % kFlashTile;
  const bool valid = t < count;
  if (threadIdx.x < kFlashTile) {
    copy_async_4(lse_tile + t, valid ? lse + at + t : lse, valid);
  } else {
    copy_async_4(dot_tile + t, valid ? row_dots + at + t : row_dots, valid);
  }
  static_assert(kFlashThreads == 2 * kFlashTile, "one statistic per thread");
}

// Fragment loads of a tile in shared memory (Note [register attention]); `lane` is threadIdx.x % 32.
//
// The left operand: rows row0 .. row0 + 16, depth k0 .. k0 + kMmaDepth, of a row-major tile.
template <typename T, int kD>
__device__ __forceinline__ void load_left(uint32_t (&a)[4], const T* tile, int row0, int k0, int lane) {
  constexpr int kRow = FlashLayout<T, kD>::kRow;
  if constexpr (std::is_same_v<T, float>) {
    const float* at = tile + (row0 + lane / 4) * kRow + k0 + lane % 4;
    a[0] = __float_as_uint(at[0]);
    a[1] = __float_as_uint(at[8 * kRow]);
    a[2] = __float_as_uint(at[4]);
    a[3] = __float_as_uint(at[8 * kRow + 4]);
  } else {
    load_matrices<false>(a, tile + (row0 + lane % 16) * kRow + k0 + lane / 16 * 8);
  }
}

// Right operands for column blocks n0 and n0 + 8 where the tile holds them as rows (b[x] is
// rows n0 + 8x .. + 8 of the tile, depth k0 .. k0 + kMmaDepth): the keys of q k^T.
template <typename T, int kD>
__device__ __forceinline__ void load_right_of_rows(uint32_t (&b)[2][2], const T* tile, int n0, int k0, int lane) {
  constexpr int kRow = FlashLayout<T, kD>::kRow;
  if constexpr (std::is_same_v<T, float>) {
    const float* at = tile + (n0 + lane / 4) * kRow + k0 + lane % 4;
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      b[x][0] = __float_as_uint(at[8 * x * kRow]);
      b[x][1] = __float_as_uint(at[8 * x * kRow + 4]);
    }
  } else {
    uint32_t r[4];
    load_matrices<false>(r, tile + (n0 + lane % 8 + lane / 16 * 8) * kRow + k0 + lane / 8 % 2 * 8);
    b[0][0] = r[0];
    b[0][1] = r[1];
    b[1][0] = r[2];
    b[1][1] = r[3];
  }
}

// Right operands for column blocks n0 and n0 + 8 (head columns) where the tile's rows are the
// depth k0 .. k0 + kMmaDepth: the values of p v. In TF32 the depth is taken in the order of
// Note [register attention] (lane t's two registers are rows k0 + 2t and k0 + 2t + 1).
template <typename T, int kD>
__device__ __forceinline__ void load_right_of_columns(uint32_t (&b)[2][2], const T* tile, int k0, int n0, int lane) {
  constexpr int kRow = FlashLayout<T, kD>::kRow;
  if constexpr (std::is_same_v<T, float>) {
    const float* at = tile + (k0 + 2 * (lane % 4)) * kRow + n0 + lane / 4;
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      b[x][0] = __float_as_uint(at[8 * x]);
      b[x][1] = __float_as_uint(at[kRow + 8 * x]);
    }
  } else {
    uint32_t r[4];
    load_matrices<true>(r, tile + (k0 + lane % 8 + lane / 8 % 2 * 8) * kRow + n0 + lane / 16 * 8);
    b[0][0] = r[0];
    b[0][1] = r[1];
    b[1][0] = r[2];
    b[1][1] = r[3];
  }
}

// The left operand of depth step kk made of accumulators w (a 16 x 64 tile of weights: p, p' or
// ds), rounded to the input type (Note [register attention]).
template <typename T>
__device__ __forceinline__ void weights_as_left(uint32_t (&a)[4], const float (&w)[kColumnBlocks][4], int kk) {
  if constexpr (std::is_same_v<T, float>) {
    a[0] = __float_as_uint(round_to<float>(w[kk][0]));
    a[1] = __float_as_uint(round_to<float>(w[kk][2]));
    a[2] = __float_as_uint(round_to<float>(w[kk][1]));
    a[3] = __float_as_uint(round_to<float>(w[kk][3]));
  } else {
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const float low[2] = {w[2 * kk + x][0], w[2 * kk + x][1]};
      const float high[2] = {w[2 * kk + x][2], w[2 * kk + x][3]};
      a[2 * x] = round_pack<T, 2>(low).w[0];
      a[2 * x + 1] = round_pack<T, 2>(high).w[0];
    }
  }
}

// acc (16 x 64) = the warp's 16 rows of `left` times the 64 rows of `right`, transposed, over the head.
template <typename T, int kD>
__device__ __forceinline__ void tile_scores(float (&acc)[kColumnBlocks][4], const T* left, int row0, const T* right,
                                            int lane) {
#pragma unroll
  for (int n = 0; n < kColumnBlocks; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
  }
#pragma unroll
  for (int k0 = 0; k0 < kD; k0 += kMmaDepth<T>) {
    uint32_t a[4];
    load_left<T, kD>(a, left, row0, k0, lane);
#pragma unroll
    for (int n = 0; n < kColumnBlocks; n += 2) {
      uint32_t b[2][2];
      load_right_of_rows<T, kD>(b, right, 8 * n, k0, lane);
      mma_accumulate<T>(acc[n], a, b[0]);
      mma_accumulate<T>(acc[n + 1], a, b[1]);
    }
  }
}

// acc (16 x kD) += w (16 x 64 weights in accumulators) times the 64 rows of `right` (x kD).
template <typename T, int kD>
__device__ __forceinline__ void tile_weighted_sum(float (&acc)[kD / 8][4], const float (&w)[kColumnBlocks][4],
                                                  const T* right, int lane) {
#pragma unroll
  for (int kk = 0; kk < kFlashTile / kMmaDepth<T>; ++kk) {
    uint32_t a[4];
    weights_as_left<T>(a, w, kk);
#pragma unroll
    for (int n = 0; n < kD / 8; n += 2) {
      uint32_t b[2][2];
      load_right_of_columns<T, kD>(b, right, kk * kMmaDepth<T>, 8 * n, lane);
      mma_accumulate<T>(acc[n], a, b[0]);
      mma_accumulate<T>(acc[n + 1], a, b[1]);
    }
  }
}

// A row's value across its quad (the four lanes that hold it): every lane gets the same bits.
__device__ __forceinline__ float quad_max(float value) {
  value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 1));
  return fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 2));
}
__device__ __forceinline__ float quad_sum(float value) {
  value += __shfl_xor_sync(0xffffffffu, value, 1);
  return value + __shfl_xor_sync(0xffffffffu, value, 2);
}

// The lane's accumulators of rows g and g + 8 (acc: 16 x kD head columns) stored as rows row0 + g
// and row0 + g + 8 of a sequence-major tensor, times `multiplier[r]`, for rows below `limit` and
// columns below head_dim (whole pairs: head_dim is even on this path).
template <typename T, int kD>
__device__ __forceinline__ void store_accumulator_rows(const float (&acc)[kD / 8][4], T* base, int64_t stride,
                                                       const AttentionArgs& a, int b, int h, int row0, int limit,
                                                       const float (&multiplier)[2], int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int token = row0 + g + 8 * r;
    if (token >= limit) continue;
    T* row = base + (static_cast<int64_t>(token) * a.batch + b) * stride + static_cast<int64_t>(h) * a.head_dim;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      const int column = 8 * n + 2 * t;
      if (column >= a.head_dim) break;
      const float pair[2] = {acc[n][2 * r] * multiplier[r], acc[n][2 * r + 1] * multiplier[r]};
      store_pack<2>(row + column, round_pack<T, 2>(pair));
    }
  }
}

}  // namespace
}  // namespace dpbench::cuda_kernels
