// Multi-head attention (engine/backend/attention_geometry.h) on tensor cores through mma.sync, as
// FlashAttention-2 does it, for heads of up to 64 columns in 16-bit data or in fp32 data under
// TF32: the scheme of cuda_kernels_attention.cu (an online softmax forward that keeps each row's
// log-sum-exp; a dQ kernel and a dK/dV kernel that rebuild the probabilities, every gradient
// summed by one warp in a fixed order, no atomics, the same bits on every run) with scores,
// probabilities and sums kept in registers. Included by cuda_kernels_attention.cu alone, whose
// launchers send these kernels the calls they cover and the WMMA kernels (cuda_attention_mma.cuh)
// the rest: heads of 128, and keys short enough for dQ beside dK and dV. At gpt's shape (batch
// 16, 12 heads of 64, 1024 tokens, causal) a layer's forward and backward take 1.80 ms in TF32
// and 0.86 ms in bf16 on an H200, where the WMMA kernels took 3.9 and 1.7 (docs/BENCHMARKS.md).
//
// Note [register attention] (cuda_attention_fragments.cuh) says how the work is split and where
// each value lives.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>

#include "engine/cuda/cuda_attention_fragments.cuh"
#include "engine/cuda/cuda_attention_mma.cuh"
#include "engine/cuda/cuda_attention_tiles.cuh"

namespace dpbench::cuda_kernels {
namespace {

// Forward (Note [register attention]): CTA (query tile, h, b), the heaviest causal tiles first.
template <typename T, int kD>
__global__ void __launch_bounds__(kFlashThreads, 2)
    attention_forward_flash_kernel(AttentionArgs a, const T* q, const T* k, const T* v, T* o, float* lse) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // the launcher sends these kernels only to compute capability 8.0 and above
#else
  using Layout = FlashLayout<T, kD>;
  extern __shared__ __align__(128) unsigned char flash_shared[];
  T* q_tile = reinterpret_cast<T*>(flash_shared);
  T* k_tiles = q_tile + Layout::kTile;      // two buffers
  T* v_tiles = k_tiles + 2 * Layout::kTile;  // two buffers
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int i0 = (gridDim.x - 1 - blockIdx.x) * kFlashTile, h = blockIdx.y, b = blockIdx.z;
  const int warp_row = warp * kFlashWarpRows;
  const int keys = visible_keys(a, b);
  const int tiles = (tile_key_end<kFlashTile>(a, keys, i0) + kFlashTile - 1) / kFlashTile;
  // Row i0 + warp_row + g + 8r sees keys j < limit[r]; the warp's first row sees the fewest.
  int limit[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) limit[r] = a.causal ? min(keys, i0 + warp_row + g + 8 * r + 1) : keys;
  const int warp_limit = a.causal ? min(keys, i0 + warp_row + 1) : keys;
  const float scale_log2 = a.scale * kLog2e;
  const DropoutMask dropout(a, b, h);

  stage_tile_async<T, kD>(q_tile, q, a.q_stride, a, b, h, i0, min(kFlashTile, a.query_len - i0));
  if (tiles > 0) {
    stage_tile_async<T, kD>(k_tiles, k, a.k_stride, a, b, h, 0, min(kFlashTile, keys));
    stage_tile_async<T, kD>(v_tiles, v, a.v_stride, a, b, h, 0, min(kFlashTile, keys));
  }
  copy_async_commit();
  float out[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) out[n][e] = 0.0f;
  }
  // Per row r: the running maximum of the scores in log2 units (s scale log2(e)), and the lane's
  // share of the sum of exp2(score - maximum).
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  for (int tile = 0; tile < tiles; ++tile) {
    const int j0 = tile * kFlashTile;
    T* k_tile = k_tiles + tile % 2 * Layout::kTile;
    T* v_tile = v_tiles + tile % 2 * Layout::kTile;
    copy_async_wait_all();
    if (tile == 0) round_staged_tile<T, kD>(q_tile);
    round_staged_tile<T, kD>(k_tile);
    round_staged_tile<T, kD>(v_tile);
    __syncthreads();  // the tile is in place, and every warp is done with the other buffer
    if (tile + 1 < tiles) {
      const int next = j0 + kFlashTile, count = min(kFlashTile, keys - next);
      stage_tile_async<T, kD>(k_tiles + (tile + 1) % 2 * Layout::kTile, k, a.k_stride, a, b, h, next, count);
      stage_tile_async<T, kD>(v_tiles + (tile + 1) % 2 * Layout::kTile, v, a.v_stride, a, b, h, next, count);
    }
    copy_async_commit();

    float s[kColumnBlocks][4];
    tile_scores<T, kD>(s, q_tile, warp_row, k_tile, lane);
    // Scores in log2 units; where some of the warp's are invisible, those -inf.
    const bool all_visible = j0 + kFlashTile <= warp_limit;
#pragma unroll
    for (int n = 0; n < kColumnBlocks; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool visible = all_visible || j0 + 8 * n + 2 * t + e % 2 < limit[e / 2];
        s[n][e] = visible ? s[n][e] * scale_log2 : -INFINITY;
      }
    }
    float alpha[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int n = 0; n < kColumnBlocks; ++n) tile_max = fmaxf(tile_max, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      const float m_new = fmaxf(m[r], quad_max(tile_max));
      // m_new is -inf only while the row has seen no key: nothing to rescale, nothing to add.
      alpha[r] = m_new == -INFINITY ? 1.0f : exp2f(m[r] - m_new);
      m[r] = m_new;
    }
#pragma unroll
    for (int n = 0; n < kColumnBlocks; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = s[n][e] == -INFINITY ? 0.0f : exp2f(s[n][e] - m[e / 2]);
        sum[e / 2] += s[n][e];
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + sum[r];
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) out[n][e] *= alpha[e / 2];
    }
    if (dropout.active) {
      // Where a probability is visible (an invisible key's stays 0 either way).
#pragma unroll
      for (int n = 0; n < kColumnBlocks; ++n) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int j = j0 + 8 * n + 2 * t;
          if (j < limit[r]) {
            const float2 z = dropout.factors(i0 + warp_row + g + 8 * r, j, a.key_len);
            s[n][2 * r] *= z.x;
            s[n][2 * r + 1] *= z.y;
          }
        }
      }
    }
    tile_weighted_sum<T, kD>(out, s, v_tile, lane);
  }
  copy_async_wait_all();  // with no key tile, the queries' copy
  float inverse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float row_sum = quad_sum(l[r]);
    // A row that saw no key has o = 0 and row_sum = 0: o = 0 and lse = -inf (log 0).
    inverse[r] = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
    const int i = i0 + warp_row + g + 8 * r;
    if (t == 0 && i < a.query_len) {
      lse[row_statistic(a, b, h, i)] = row_sum > 0.0f ? (m[r] + log2f(row_sum)) * kLn2 : -INFINITY;
    }
  }
  store_accumulator_rows<T, kD>(out, o, a.o_stride, a, b, h, i0 + warp_row, a.query_len, inverse, lane);
#endif
}

// D_i = d_o_i . o_i of row i (0 past the sequence), by the lane pair that holds the row: each
// lane takes half the head in 16-byte packs, and both end with the same bits.
template <typename T>
__device__ __forceinline__ float pair_row_dot(const AttentionArgs& a, const T* o, const T* d_o, int b, int h, int i,
                                              int half) {
  float sum = 0.0f;
  if (i < a.query_len) {
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    const int64_t offset = (static_cast<int64_t>(i) * a.batch + b) * a.o_stride + static_cast<int64_t>(h) * a.head_dim;
    for (int c = half * kVec; c < a.head_dim; c += 2 * kVec) {
      const Pack<T, kVec> o_pack = load_pack<kVec>(o + offset + c);
      const Pack<T, kVec> do_pack = load_pack<kVec>(d_o + offset + c);
#pragma unroll
      for (int e = 0; e < kVec; ++e) sum = fmaf(element(o_pack, e), element(do_pack, e), sum);
    }
  }
  return sum + __shfl_xor_sync(0xffffffffu, sum, 1);
}

// dQ: CTA (query tile, h, b), the heaviest causal tiles first; dq_i = scale * sum_j ds_ij k_j over
// the key tiles the tile sees. It first makes its rows' D_i = d_o_i . o_i and stores them in
// row_dots for the dK/dV kernel, which the launcher starts after it.
template <typename T, int kD>
__global__ void __launch_bounds__(kFlashThreads, 2)
    attention_backward_dq_flash_kernel(AttentionArgs a, const T* q, const T* k, const T* v, const T* o,
                                       const T* d_o, const float* lse, float* row_dots, T* dq) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  using Layout = FlashLayout<T, kD>;
  extern __shared__ __align__(128) unsigned char flash_shared[];
  T* q_tile = reinterpret_cast<T*>(flash_shared);
  T* do_tile = q_tile + Layout::kTile;
  T* k_tiles = do_tile + Layout::kTile;      // two buffers
  T* v_tiles = k_tiles + 2 * Layout::kTile;  // two buffers
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int i0 = (gridDim.x - 1 - blockIdx.x) * kFlashTile, h = blockIdx.y, b = blockIdx.z;
  const int warp_row = warp * kFlashWarpRows;
  const int keys = visible_keys(a, b);
  const int tiles = (tile_key_end<kFlashTile>(a, keys, i0) + kFlashTile - 1) / kFlashTile;
  const int query_count = min(kFlashTile, a.query_len - i0);
  const float scale_log2 = a.scale * kLog2e;
  const DropoutMask dropout(a, b, h);

  stage_tile_async<T, kD>(q_tile, q, a.q_stride, a, b, h, i0, query_count);
  stage_tile_async<T, kD>(do_tile, d_o, a.o_stride, a, b, h, i0, query_count);
  if (tiles > 0) {
    stage_tile_async<T, kD>(k_tiles, k, a.k_stride, a, b, h, 0, min(kFlashTile, keys));
    stage_tile_async<T, kD>(v_tiles, v, a.v_stride, a, b, h, 0, min(kFlashTile, keys));
  }
  copy_async_commit();
  // D_i of the warp's rows while the tiles travel; lane (g, t) keeps those of its rows g and
  // g + 8, which lanes 2g and 2g + 16 made.
  const int dot_row = i0 + warp_row + lane / 2;
  const float row_dot = pair_row_dot<T>(a, o, d_o, b, h, dot_row, lane % 2);
  if (dot_row < a.query_len && lane % 2 == 0) row_dots[row_statistic(a, b, h, dot_row)] = row_dot;
  const float dot[2] = {__shfl_sync(0xffffffffu, row_dot, 2 * g), __shfl_sync(0xffffffffu, row_dot, 2 * g + 16)};
  float lse2[2];  // in log2 units
  int limit[2];   // row i0 + warp_row + g + 8r sees keys j < limit[r]
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = i0 + warp_row + g + 8 * r;
    lse2[r] = row < a.query_len ? lse[row_statistic(a, b, h, row)] * kLog2e : 0.0f;
    limit[r] = row >= a.query_len ? 0 : a.causal ? min(keys, row + 1) : keys;
  }
  // Every score of the warp is visible in the tiles that end at or before this.
  const int warp_limit =
      i0 + warp_row + kFlashWarpRows > a.query_len ? 0 : a.causal ? min(keys, i0 + warp_row + 1) : keys;
  float acc[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
  }
  for (int tile = 0; tile < tiles; ++tile) {
    const int j0 = tile * kFlashTile;
    T* k_tile = k_tiles + tile % 2 * Layout::kTile;
    T* v_tile = v_tiles + tile % 2 * Layout::kTile;
    copy_async_wait_all();
    if (tile == 0) {
      round_staged_tile<T, kD>(q_tile);
      round_staged_tile<T, kD>(do_tile);
    }
    round_staged_tile<T, kD>(k_tile);
    round_staged_tile<T, kD>(v_tile);
    __syncthreads();  // the tile is in place, and every warp is done with the other buffer
    if (tile + 1 < tiles) {
      const int next = j0 + kFlashTile, count = min(kFlashTile, keys - next);
      stage_tile_async<T, kD>(k_tiles + (tile + 1) % 2 * Layout::kTile, k, a.k_stride, a, b, h, next, count);
      stage_tile_async<T, kD>(v_tiles + (tile + 1) % 2 * Layout::kTile, v, a.v_stride, a, b, h, next, count);
    }
    copy_async_commit();

    float s[kColumnBlocks][4], dp[kColumnBlocks][4];
    tile_scores<T, kD>(s, q_tile, warp_row, k_tile, lane);
    tile_scores<T, kD>(dp, do_tile, warp_row, v_tile, lane);
    const bool all_visible = j0 + kFlashTile <= warp_limit;
#pragma unroll
    for (int n = 0; n < kColumnBlocks; ++n) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int j = j0 + 8 * n + 2 * t;
        float2 z = make_float2(1.0f, 1.0f);
        if (dropout.active && j < limit[r]) z = dropout.factors(i0 + warp_row + g + 8 * r, j, a.key_len);
        const float zs[2] = {z.x, z.y};
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& value = s[n][2 * r + e];
          const float p = exp2f(fmaf(value, scale_log2, -lse2[r]));
          const bool visible = all_visible || j + e < limit[r];
          value = visible ? score_gradient(p, zs[e], dp[n][2 * r + e], dot[r]) : 0.0f;
        }
      }
    }
    tile_weighted_sum<T, kD>(acc, s, k_tile, lane);
  }
  copy_async_wait_all();  // with no key tile, the queries' copy
  const float multiplier[2] = {a.scale, a.scale};
  store_accumulator_rows<T, kD>(acc, dq, a.q_stride, a, b, h, i0 + warp_row, a.query_len, multiplier, lane);
#endif
}

// dK, dV: CTA (key tile, h, b), walking every query tile that sees a key of the tile:
// dv_j = sum_i p'_ij d_o_i, dk_j = scale * sum_i ds_ij q_i. Keys past the sentence's length get
// zeros. The products are transposed (rows are keys): s^T = k q^T, dp^T = v d_o^T, and the
// weights p'^T and ds^T multiply d_o and q from the accumulators (Note [register attention]).
template <typename T, int kD>
__global__ void __launch_bounds__(kFlashThreads, 2)
    attention_backward_dkdv_flash_kernel(AttentionArgs a, const T* q, const T* k, const T* v, const T* d_o,
                                         const float* lse, const float* row_dots, T* dk, T* dv) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  using Layout = FlashLayout<T, kD>;
  extern __shared__ __align__(128) unsigned char flash_shared[];
  T* k_tile = reinterpret_cast<T*>(flash_shared);
  T* v_tile = k_tile + Layout::kTile;
  T* q_tiles = v_tile + Layout::kTile;        // two buffers
  T* do_tiles = q_tiles + 2 * Layout::kTile;  // two buffers
  float* lse_tiles = reinterpret_cast<float*>(do_tiles + 2 * Layout::kTile);  // two buffers of 64
  float* dot_tiles = lse_tiles + 2 * kFlashTile;                              // two buffers of 64
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int j0 = blockIdx.x * kFlashTile, h = blockIdx.y, b = blockIdx.z;
  const int warp_row = warp * kFlashWarpRows;
  const int keys = visible_keys(a, b);
  const float scale_log2 = a.scale * kLog2e;
  const DropoutMask dropout(a, b, h);
  float dk_acc[kD / 8][4], dv_acc[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk_acc[n][e] = dv_acc[n][e] = 0.0f;
  }
  if (j0 < keys) {  // the same for the whole CTA
    // Causal: queries before j0 see none of the tile's keys (query tiles start at multiples of 64).
    const int first_query = a.causal ? j0 : 0;
    const int tiles = a.query_len > first_query ? (a.query_len - first_query + kFlashTile - 1) / kFlashTile : 0;
    // Key j0 + warp_row + g + 8r is seen by queries i >= first_visible[r] (none if it is past keys).
    int first_visible[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int j = j0 + warp_row + g + 8 * r;
      first_visible[r] = j >= keys ? INT_MAX : a.causal ? j : 0;
    }
    const bool warp_keys_real = j0 + warp_row + kFlashWarpRows <= keys;
    stage_tile_async<T, kD>(k_tile, k, a.k_stride, a, b, h, j0, min(kFlashTile, keys - j0));
    stage_tile_async<T, kD>(v_tile, v, a.v_stride, a, b, h, j0, min(kFlashTile, keys - j0));
    if (tiles > 0) {
      const int count = min(kFlashTile, a.query_len - first_query);
      stage_tile_async<T, kD>(q_tiles, q, a.q_stride, a, b, h, first_query, count);
      stage_tile_async<T, kD>(do_tiles, d_o, a.o_stride, a, b, h, first_query, count);
      stage_row_statistics_async(lse_tiles, dot_tiles, lse, row_dots, row_statistic(a, b, h, first_query), count);
    }
    copy_async_commit();
    for (int tile = 0; tile < tiles; ++tile) {
      const int i0 = first_query + tile * kFlashTile;
      const int buffer = tile % 2;
      T* q_tile = q_tiles + buffer * Layout::kTile;
      T* do_tile = do_tiles + buffer * Layout::kTile;
      const float* lse_tile = lse_tiles + buffer * kFlashTile;
      const float* dot_tile = dot_tiles + buffer * kFlashTile;
      copy_async_wait_all();
      if (tile == 0) {
        round_staged_tile<T, kD>(k_tile);
        round_staged_tile<T, kD>(v_tile);
      }
      round_staged_tile<T, kD>(q_tile);
      round_staged_tile<T, kD>(do_tile);
      __syncthreads();  // the tile is in place, and every warp is done with the other buffer
      if (tile + 1 < tiles) {
        const int next = i0 + kFlashTile, count = min(kFlashTile, a.query_len - next), other = 1 - buffer;
        stage_tile_async<T, kD>(q_tiles + other * Layout::kTile, q, a.q_stride, a, b, h, next, count);
        stage_tile_async<T, kD>(do_tiles + other * Layout::kTile, d_o, a.o_stride, a, b, h, next, count);
        stage_row_statistics_async(lse_tiles + other * kFlashTile, dot_tiles + other * kFlashTile, lse, row_dots,
                                   row_statistic(a, b, h, next), count);
      }
      copy_async_commit();

      float p[kColumnBlocks][4], ds[kColumnBlocks][4];
      tile_scores<T, kD>(p, k_tile, warp_row, q_tile, lane);   // s^T
      tile_scores<T, kD>(ds, v_tile, warp_row, do_tile, lane);  // dp^T
      // Every (query, key) of the warp is visible: its keys are real, the queries are, and
      // (causal) the tile's first query comes at or after the warp's last key.
      const bool all_visible = warp_keys_real && i0 + kFlashTile <= a.query_len &&
                               (!a.causal || i0 >= j0 + warp_row + kFlashWarpRows - 1);
#pragma unroll
      for (int n = 0; n < kColumnBlocks; ++n) {
        const float2 row_lse = *reinterpret_cast<const float2*>(lse_tile + 8 * n + 2 * t);
        const float2 row_dot = *reinterpret_cast<const float2*>(dot_tile + 8 * n + 2 * t);
        const float lse_e[2] = {row_lse.x * kLog2e, row_lse.y * kLog2e}, dot_e[2] = {row_dot.x, row_dot.y};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e / 2, i = i0 + 8 * n + 2 * t + e % 2;
          const bool visible = all_visible || (i >= first_visible[r] && i < a.query_len);
          const float probability = exp2f(fmaf(p[n][e], scale_log2, -lse_e[e % 2]));
          const float z =
              dropout.active && visible ? dropout.factor(i, j0 + warp_row + g + 8 * r, a.key_len) : 1.0f;
          ds[n][e] = visible ? score_gradient(probability, z, ds[n][e], dot_e[e % 2]) : 0.0f;
          p[n][e] = visible ? probability * z : 0.0f;
        }
      }
      tile_weighted_sum<T, kD>(dv_acc, p, do_tile, lane);
      tile_weighted_sum<T, kD>(dk_acc, ds, q_tile, lane);
    }
    copy_async_wait_all();  // with no query tile, the keys' copy
  }
  const float dk_multiplier[2] = {a.scale, a.scale}, dv_multiplier[2] = {1.0f, 1.0f};
  store_accumulator_rows<T, kD>(dk_acc, dk, a.k_stride, a, b, h, j0 + warp_row, a.key_len, dk_multiplier, lane);
  store_accumulator_rows<T, kD>(dv_acc, dv, a.v_stride, a, b, h, j0 + warp_row, a.key_len, dv_multiplier, lane);
#endif
}

}  // namespace
}  // namespace dpbench::cuda_kernels
