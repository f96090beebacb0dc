// Multi-head scaled-dot-product attention (engine/backend/attention_geometry.h) as flash attention: the
// (batch, heads, query_len, key_len) scores never reach global memory. The forward pass streams
// key/value tiles past a tile of queries with an online softmax and keeps each row's log-sum-exp;
// the backward pass rebuilds the probabilities from it, once per key tile (dK, dV) and once per
// query tile (dQ), so every gradient is summed by one thread in a fixed order: no atomics, the
// same bits on every run. Kernels first, launchers after; the tiles they share are in
// cuda_attention_tiles.cuh (Note [attention tiles]).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "engine/cuda/cuda_attention_flash.cuh"
#include "engine/cuda/cuda_attention_mma.cuh"
#include "engine/cuda/cuda_attention_tiles.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"
#include "engine/cuda/cuda_packs.cuh"

namespace dpbench::cuda_kernels {
namespace {

// Forward (Note [attention tiles]): CTA (query tile, h, b) with rows = kBr queries, columns = kBc
// keys. Online softmax: m the running maximum of a row's scores, l the thread's share of the sum
// of exp(s - m), both rescaled when m grows; the accumulated p' v rescale with them.
template <typename T, int kD, int kBr, int kBc>
__global__ void __launch_bounds__(kAttentionThreads)
    attention_forward_kernel(AttentionArgs a, const T* q, const T* k, const T* v, T* o, float* lse) {
  using Columns = HeadColumns<kD>;
  constexpr int kPad = Columns::kPad;
  constexpr int kR = kBr / kRowGroups;
  constexpr int kC = kBc / kGroupLanes;
  extern __shared__ float4 shared_words[];
  float* q_tile = reinterpret_cast<float*>(shared_words);  // (kBr, kPad)
  float* k_tile = q_tile + kBr * kPad;                     // (kBc, kPad)
  float* v_tile = k_tile + kBc * kPad;                     // (kBc, kPad)
  float* p_tile = v_tile + kBc * kPad;                     // (kBr, kBc + 4)
  const int i0 = blockIdx.x * kBr, h = blockIdx.y, b = blockIdx.z;
  const int rg = threadIdx.x / kGroupLanes, kg = threadIdx.x % kGroupLanes;
  const int keys = visible_keys(a, b);
  const int key_end = tile_key_end<kBr>(a, keys, i0);
  const DropoutMask dropout(a, b, h);

  load_tile<T, kD, kBr>(q_tile, q, a.q_stride, a, b, h, i0, min(kBr, a.query_len - i0));
  float m[kR], l[kR], acc[kR][Columns::kCount];
#pragma unroll
  for (int x = 0; x < kR; ++x) {
    m[x] = -INFINITY;
    l[x] = 0.0f;
#pragma unroll
    for (int c = 0; c < Columns::kCount; ++c) acc[x][c] = 0.0f;
  }
  for (int j0 = 0; j0 < key_end; j0 += kBc) {
    __syncthreads();  // the previous tile's keys and values are read
    load_tile<T, kD, kBc>(k_tile, k, a.k_stride, a, b, h, j0, min(kBc, key_end - j0));
    load_tile<T, kD, kBc>(v_tile, v, a.v_stride, a, b, h, j0, min(kBc, key_end - j0));
    __syncthreads();
    float s[kR][kC];
    tile_dots<kD, kR, kC>(q_tile, k_tile, rg, kg, s);
#pragma unroll
    for (int x = 0; x < kR; ++x) {
      const int i = i0 + rg + kRowGroups * x;
      float tile_max = -INFINITY;
#pragma unroll
      for (int y = 0; y < kC; ++y) {
        const int j = j0 + kg + kGroupLanes * y;
        const bool visible = j < keys && (!a.causal || j <= i);
        s[x][y] = visible ? s[x][y] * a.scale : -INFINITY;
        tile_max = fmaxf(tile_max, s[x][y]);
      }
      const float m_new = fmaxf(m[x], group_max(tile_max));
      // m_new is -inf only while the row has seen no key: nothing to rescale, nothing to add.
      const float alpha = m_new == -INFINITY ? 1.0f : expf(m[x] - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int y = 0; y < kC; ++y) {
        const int j = j0 + kg + kGroupLanes * y;
        const float p = s[x][y] == -INFINITY ? 0.0f : expf(s[x][y] - m_new);
        sum += p;
        p_tile[(rg + kRowGroups * x) * (kBc + 4) + kg + kGroupLanes * y] =
            p == 0.0f ? 0.0f : p * dropout.factor(i, j, a.key_len);
      }
      l[x] = l[x] * alpha + sum;
      m[x] = m_new;
#pragma unroll
      for (int c = 0; c < Columns::kCount; ++c) acc[x][c] *= alpha;
    }
    __syncwarp();  // a row group reads back only the probabilities it wrote
    tile_accumulate<kD, kR, kBc>(p_tile, v_tile, rg, kg, acc);
  }
#pragma unroll
  for (int x = 0; x < kR; ++x) {
    const float row_sum = group_sum(l[x]);  // outside the branch: all lanes shuffle
    const int i = i0 + rg + kRowGroups * x;
    if (i < a.query_len) {
      // A row that saw no key has acc = 0 and row_sum = 0: o = 0 and lse = -inf (log 0).
      const float inverse = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
      store_head_row<T, kD>(o, a.o_stride, a, b, h, i, kg, acc[x], inverse);
      if (kg == 0) {
        lse[row_statistic(a, b, h, i)] =
            row_sum > 0.0f ? m[x] + logf(row_sum) : -INFINITY;
      }
    }
  }
}

// row_dots[(b * heads + h) * query_len + i] = d_o_i . o_i over the head (the D_i of the backward
// pass: sum_j p_ij dp_ij, since o_i = sum_j p'_ij v_j). One warp per row, lanes over columns.
template <typename T>
__global__ void attention_row_dots_kernel(AttentionArgs a, const T* o, const T* d_o, float* row_dots) {
  const size_t rows = static_cast<size_t>(a.batch) * a.heads * a.query_len;
  const size_t warps = static_cast<size_t>(gridDim.x) * (blockDim.x / 32);
  for (size_t item = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; item < rows;
       item += warps) {
    const int i = static_cast<int>(item % a.query_len);
    const size_t bh = item / a.query_len;
    const int h = static_cast<int>(bh % a.heads);
    const int b = static_cast<int>(bh / a.heads);
    const int64_t offset =
        (static_cast<int64_t>(i) * a.batch + b) * a.o_stride + static_cast<int64_t>(h) * a.head_dim;
    float sum = 0.0f;
    for (int c = threadIdx.x % 32; c < a.head_dim; c += 32) {
      sum += load_widened(o + offset + c) * load_widened(d_o + offset + c);
    }
#pragma unroll
    for (int lane_offset = 16; lane_offset > 0; lane_offset /= 2) {
      sum += __shfl_xor_sync(0xffffffffu, sum, lane_offset);
    }
    if (threadIdx.x % 32 == 0) row_dots[item] = sum;
  }
}

// dQ: CTA (query tile, h, b), rows = kBr queries, columns = kBc keys; dq_i = scale * sum_j ds_ij k_j.
template <typename T, int kD, int kBr, int kBc>
__global__ void __launch_bounds__(kAttentionThreads)
    attention_backward_dq_kernel(AttentionArgs a, const T* q, const T* k, const T* v, const T* d_o,
                                 const float* lse, const float* row_dots, T* dq) {
  using Columns = HeadColumns<kD>;
  constexpr int kPad = Columns::kPad;
  constexpr int kR = kBr / kRowGroups;
  constexpr int kC = kBc / kGroupLanes;
  extern __shared__ float4 shared_words[];
  float* q_tile = reinterpret_cast<float*>(shared_words);  // (kBr, kPad)
  float* do_tile = q_tile + kBr * kPad;                    // (kBr, kPad)
  float* k_tile = do_tile + kBr * kPad;                    // (kBc, kPad)
  float* v_tile = k_tile + kBc * kPad;                     // (kBc, kPad)
  float* ds_tile = v_tile + kBc * kPad;                    // (kBr, kBc + 4)
  const int i0 = blockIdx.x * kBr, h = blockIdx.y, b = blockIdx.z;
  const int rg = threadIdx.x / kGroupLanes, kg = threadIdx.x % kGroupLanes;
  const int keys = visible_keys(a, b);
  const int key_end = tile_key_end<kBr>(a, keys, i0);
  const DropoutMask dropout(a, b, h);
  const int query_count = min(kBr, a.query_len - i0);

  load_tile<T, kD, kBr>(q_tile, q, a.q_stride, a, b, h, i0, query_count);
  load_tile<T, kD, kBr>(do_tile, d_o, a.o_stride, a, b, h, i0, query_count);
  float row_lse[kR], row_dot[kR], acc[kR][Columns::kCount];
#pragma unroll
  for (int x = 0; x < kR; ++x) {
    const int i = i0 + rg + kRowGroups * x;
    const int64_t at = row_statistic(a, b, h, i);
    row_lse[x] = i < a.query_len ? lse[at] : 0.0f;
    row_dot[x] = i < a.query_len ? row_dots[at] : 0.0f;
#pragma unroll
    for (int c = 0; c < Columns::kCount; ++c) acc[x][c] = 0.0f;
  }
  for (int j0 = 0; j0 < key_end; j0 += kBc) {
    __syncthreads();
    load_tile<T, kD, kBc>(k_tile, k, a.k_stride, a, b, h, j0, min(kBc, key_end - j0));
    load_tile<T, kD, kBc>(v_tile, v, a.v_stride, a, b, h, j0, min(kBc, key_end - j0));
    __syncthreads();
    float s[kR][kC], dp[kR][kC];
    tile_dots<kD, kR, kC>(q_tile, k_tile, rg, kg, s);
    tile_dots<kD, kR, kC>(do_tile, v_tile, rg, kg, dp);
#pragma unroll
    for (int x = 0; x < kR; ++x) {
      const int i = i0 + rg + kRowGroups * x;
#pragma unroll
      for (int y = 0; y < kC; ++y) {
        const int j = j0 + kg + kGroupLanes * y;
        float ds = 0.0f;
        if (i < a.query_len && j < keys && (!a.causal || j <= i)) {
          const float p = expf(s[x][y] * a.scale - row_lse[x]);
          ds = score_gradient(p, dropout.factor(i, j, a.key_len), dp[x][y], row_dot[x]);
        }
        ds_tile[(rg + kRowGroups * x) * (kBc + 4) + kg + kGroupLanes * y] = ds;
      }
    }
    __syncwarp();
    tile_accumulate<kD, kR, kBc>(ds_tile, k_tile, rg, kg, acc);
  }
#pragma unroll
  for (int x = 0; x < kR; ++x) {
    const int i = i0 + rg + kRowGroups * x;
    if (i < a.query_len) store_head_row<T, kD>(dq, a.q_stride, a, b, h, i, kg, acc[x], a.scale);
  }
}

// dK, dV: CTA (key tile, h, b), rows = kBc keys, columns = kBr queries, walking every query tile
// that sees a key of the tile: dv_j = sum_i p'_ij d_o_i, dk_j = scale * sum_i ds_ij q_i. Keys
// past the sentence's length get zeros.
template <typename T, int kD, int kBc, int kBr>
__global__ void __launch_bounds__(kAttentionThreads)
    attention_backward_dkdv_kernel(AttentionArgs a, const T* q, const T* k, const T* v, const T* d_o,
                                   const float* lse, const float* row_dots, T* dk, T* dv) {
  using Columns = HeadColumns<kD>;
  constexpr int kPad = Columns::kPad;
  constexpr int kR = kBc / kRowGroups;
  constexpr int kC = kBr / kGroupLanes;
  extern __shared__ float4 shared_words[];
  float* k_tile = reinterpret_cast<float*>(shared_words);  // (kBc, kPad)
  float* v_tile = k_tile + kBc * kPad;                     // (kBc, kPad)
  float* q_tile = v_tile + kBc * kPad;                     // (kBr, kPad)
  float* do_tile = q_tile + kBr * kPad;                    // (kBr, kPad)
  float* p_tile = do_tile + kBr * kPad;                    // (kBc, kBr + 4): p', the weights of d_o in dv
  float* ds_tile = p_tile + kBc * (kBr + 4);               // (kBc, kBr + 4)
  float* lse_tile = ds_tile + kBc * (kBr + 4);             // (kBr)
  float* dot_tile = lse_tile + kBr;                        // (kBr)
  const int j0 = blockIdx.x * kBc, h = blockIdx.y, b = blockIdx.z;
  const int rg = threadIdx.x / kGroupLanes, kg = threadIdx.x % kGroupLanes;
  const int keys = visible_keys(a, b);
  const DropoutMask dropout(a, b, h);
  float dk_acc[kR][Columns::kCount], dv_acc[kR][Columns::kCount];
#pragma unroll
  for (int x = 0; x < kR; ++x) {
#pragma unroll
    for (int c = 0; c < Columns::kCount; ++c) dk_acc[x][c] = dv_acc[x][c] = 0.0f;
  }
  if (j0 < keys) {  // the same for the whole CTA
    load_tile<T, kD, kBc>(k_tile, k, a.k_stride, a, b, h, j0, min(kBc, keys - j0));
    load_tile<T, kD, kBc>(v_tile, v, a.v_stride, a, b, h, j0, min(kBc, keys - j0));
    // Causal: queries before j0 see none of the tile's keys.
    const int first_query = a.causal ? j0 / kBr * kBr : 0;
    for (int i0 = first_query; i0 < a.query_len; i0 += kBr) {
      __syncthreads();  // the previous query tile is read (and, the first time, nothing is)
      const int query_count = min(kBr, a.query_len - i0);
      load_tile<T, kD, kBr>(q_tile, q, a.q_stride, a, b, h, i0, query_count);
      load_tile<T, kD, kBr>(do_tile, d_o, a.o_stride, a, b, h, i0, query_count);
      for (int t = threadIdx.x; t < kBr; t += kAttentionThreads) {
        const int64_t at = row_statistic(a, b, h, i0) + t;
        lse_tile[t] = t < query_count ? lse[at] : 0.0f;
        dot_tile[t] = t < query_count ? row_dots[at] : 0.0f;
      }
      __syncthreads();
      float s[kR][kC], dp[kR][kC];
      tile_dots<kD, kR, kC>(k_tile, q_tile, rg, kg, s);
      tile_dots<kD, kR, kC>(v_tile, do_tile, rg, kg, dp);
#pragma unroll
      for (int x = 0; x < kR; ++x) {
        const int j = j0 + rg + kRowGroups * x;
#pragma unroll
        for (int y = 0; y < kC; ++y) {
          const int t = kg + kGroupLanes * y;
          const int i = i0 + t;
          float p_dropped = 0.0f, ds = 0.0f;
          if (i < a.query_len && j < keys && (!a.causal || j <= i)) {
            const float p = expf(s[x][y] * a.scale - lse_tile[t]);
            const float z = dropout.factor(i, j, a.key_len);
            p_dropped = p * z;
            ds = score_gradient(p, z, dp[x][y], dot_tile[t]);
          }
          p_tile[(rg + kRowGroups * x) * (kBr + 4) + t] = p_dropped;
          ds_tile[(rg + kRowGroups * x) * (kBr + 4) + t] = ds;
        }
      }
      __syncwarp();
      tile_accumulate<kD, kR, kBr>(p_tile, do_tile, rg, kg, dv_acc);
      tile_accumulate<kD, kR, kBr>(ds_tile, q_tile, rg, kg, dk_acc);
    }
  }
#pragma unroll
  for (int x = 0; x < kR; ++x) {
    const int j = j0 + rg + kRowGroups * x;
    if (j < a.key_len) {
      store_head_row<T, kD>(dk, a.k_stride, a, b, h, j, kg, dk_acc[x], a.scale);
      store_head_row<T, kD>(dv, a.v_stride, a, b, h, j, kg, dv_acc[x], 1.0f);
    }
  }
}

// ---- launch helpers --------------------------------------------------------------------------

// Tile shapes per padded head size (Note [attention tiles]): rows and columns multiples of 16;
// shared memory kept near 70 KB or below, so that two or three CTAs share an SM, and
// accumulators near 64 registers a thread.
template <int kD>
struct AttentionTiles;
template <>
struct AttentionTiles<32> {
  static constexpr int kForwardRows = 64, kForwardColumns = 64;
  static constexpr int kDqRows = 64, kDqColumns = 64;
  static constexpr int kDkdvRows = 64, kDkdvColumns = 32;
};
template <>
struct AttentionTiles<64> {
  static constexpr int kForwardRows = 64, kForwardColumns = 64;
  static constexpr int kDqRows = 64, kDqColumns = 32;
  static constexpr int kDkdvRows = 64, kDkdvColumns = 32;
};
template <>
struct AttentionTiles<128> {
  static constexpr int kForwardRows = 64, kForwardColumns = 32;
  static constexpr int kDqRows = 32, kDqColumns = 32;
  static constexpr int kDkdvRows = 32, kDkdvColumns = 32;
};

constexpr size_t tile_floats(int kD, int rows) { return static_cast<size_t>(rows) * (kD + 4); }
constexpr size_t weight_floats(int rows, int columns) { return static_cast<size_t>(rows) * (columns + 4); }

AttentionArgs attention_args(const AttentionGeometry& g, const int32_t* key_lengths, const int32_t* step,
                             bool vectorised) {
  AttentionArgs a;
  a.batch = g.batch;
  a.heads = g.heads;
  a.query_len = g.query_len;
  a.key_len = g.key_len;
  a.head_dim = g.head_dim;
  a.causal = g.causal;
  a.scale = g.scale;
  a.q_stride = g.q_stride;
  a.k_stride = g.k_stride;
  a.v_stride = g.v_stride;
  a.o_stride = g.o_stride;
  a.dropout_rate = g.dropout_rate;
  // Rounded once, as dropout_forward rounds it; only read where rate > 0.
  a.keep_scale = g.dropout_rate > 0.0f ? dropout_keep_scale(g.dropout_rate) : 1.0f;
  a.dropout_seed = g.dropout_seed;
  a.first_sample = g.first_sample;
  a.key_lengths = key_lengths;
  a.step = step;
  a.vectorised = vectorised;
  return a;
}

// 16-byte packs of T for every row of every tensor: head_dim and the strides in whole packs, and
// every pointer 16-byte aligned (head offsets then are too).
template <typename T>
bool attention_vectorised(const AttentionGeometry& g, std::initializer_list<const void*> pointers) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  return g.head_dim % kVec == 0 && g.q_stride % kVec == 0 && g.k_stride % kVec == 0 && g.v_stride % kVec == 0 &&
         g.o_stride % kVec == 0 && aligned_to(pointers, 16);
}

// Calls run(std::integral_constant<int, kD>) with the padded head size.
template <typename Run>
void with_head_size(int head_dim, Run run) {
  if (head_dim <= 32) return run(std::integral_constant<int, 32>{});
  if (head_dim <= 64) return run(std::integral_constant<int, 64>{});
  return run(std::integral_constant<int, 128>{});
}

// Launches `kernel` with `shared_bytes` of dynamic shared memory, opting in past 48 KB (legal
// inside a graph capture; repeated on every launch, since the setting is per device).
template <typename Kernel, typename... Args>
void launch_tiled(Kernel kernel, dim3 grid, size_t shared_bytes, cudaStream_t stream, Args... args) {
  DPB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(shared_bytes)));
  kernel<<<grid, kAttentionThreads, shared_bytes, stream>>>(args...);
}

dim3 attention_grid(int tiles, const AttentionGeometry& g) {
  return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(g.heads), static_cast<unsigned>(g.batch));
}

int tiles_of(int length, int tile) { return (length + tile - 1) / tile; }

// Whether the tensor-core kernels take this call: 16-bit data, or fp32 data under TF32, moved in
// 16-byte packs, on compute capability 8.0 or above (bf16 and TF32 on tensor cores). Heads of up
// to 64 go to the mma.sync kernels (Note [register attention]), except that keys short enough for
// dQ beside dK and dV take the WMMA backward (Note [dQ beside dK and dV]); heads of 128 go to the
// WMMA kernels (Note [tensor-core attention]). The fp32 kernels take the rest: exact fp32, and odd
// head sizes or strides.
bool attention_on_tensor_cores(const AttentionGeometry& g, bool tf32, bool vectorised) {
  if (!vectorised || (g.type == DataType::f32 && !tf32)) return false;
  int device = 0, major = 0;
  DPB_CUDA_CHECK(cudaGetDevice(&device));
  DPB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 8;
}

}  // namespace

void launch_attention_forward(cudaStream_t stream, const AttentionGeometry& g, bool tf32, const void* q,
                              const void* k, const void* v, const int32_t* key_lengths, const int32_t* step,
                              void* o, float* lse) {
  if (g.batch <= 0 || g.heads <= 0 || g.query_len <= 0) return;
  with_storage_type(g.type, "attention_forward", [&](auto tag) {
    using T = decltype(tag);
    const bool vectorised = attention_vectorised<T>(g, {q, k, v, o});
    const AttentionArgs a = attention_args(g, key_lengths, step, vectorised);
    const bool tensor_cores = attention_on_tensor_cores(g, tf32, vectorised);
    with_head_size(g.head_dim, [&](auto head_size) {
      constexpr int kD = decltype(head_size)::value;
      if (tensor_cores) {
        if constexpr (kD <= kFlashMaxHead) {
          launch_tiled(attention_forward_flash_kernel<T, kD>, attention_grid(tiles_of(g.query_len, kFlashTile), g),
                       FlashLayout<T, kD>::kForwardBytes, stream, a, static_cast<const T*>(q),
                       static_cast<const T*>(k), static_cast<const T*>(v), static_cast<T*>(o), lse);
        } else {
          launch_tiled(attention_forward_mma_kernel<T, kD>, attention_grid(tiles_of(g.query_len, kMmaTile), g),
                       MmaLayout<T, kD>::kForwardBytes, stream, a, static_cast<const T*>(q),
                       static_cast<const T*>(k), static_cast<const T*>(v), static_cast<T*>(o), lse);
        }
        return;
      }
      using Tiles = AttentionTiles<kD>;
      constexpr int kBr = Tiles::kForwardRows, kBc = Tiles::kForwardColumns;
      const size_t bytes =
          sizeof(float) * (tile_floats(kD, kBr) + 2 * tile_floats(kD, kBc) + weight_floats(kBr, kBc));
      launch_tiled(attention_forward_kernel<T, kD, kBr, kBc>, attention_grid(tiles_of(g.query_len, kBr), g),
                   bytes, stream, a, static_cast<const T*>(q), static_cast<const T*>(k),
                   static_cast<const T*>(v), static_cast<T*>(o), lse);
    });
  });
  DPB_CUDA_CHECK_LAUNCH(attention_forward_kernel);
}

namespace {

// Keys in at most this many tiles take dQ in the dK/dV kernel (Note [dQ beside dK and dV]): the
// shares cost a write and a read of key tiles x the queries' fp32 gradients, which beats
// recomputing every score in a dQ kernel while the tiles are few (measured at 100 keys, 2 tiles).
constexpr int kDqBesideKeyTiles = 2;

bool dq_beside_dkdv(const AttentionGeometry& g) { return tiles_of(g.key_len, kMmaTile) <= kDqBesideKeyTiles; }

int padded_head_size(int head_dim) { return head_dim <= 32 ? 32 : head_dim <= 64 ? 64 : 128; }

// The backward's workspace: D_i (one float per query row), then, 256-byte aligned, the dQ shares.
size_t row_dots_bytes(const AttentionGeometry& g) { return (g.lse_count() * sizeof(float) + 255) / 256 * 256; }

size_t dq_share_bytes(const AttentionGeometry& g) {
  return sizeof(float) * static_cast<size_t>(tiles_of(g.key_len, kMmaTile)) * static_cast<size_t>(g.batch) *
         static_cast<size_t>(g.heads) * static_cast<size_t>(padded_rows(g.query_len)) *
         static_cast<size_t>(padded_head_size(g.head_dim));
}

}  // namespace

size_t attention_workspace_bytes(const AttentionGeometry& g) {
  // The forward pass needs nothing. The shares only where the tensor-core path may take them.
  return row_dots_bytes(g) + (dq_beside_dkdv(g) ? dq_share_bytes(g) : 0);
}

void launch_attention_backward(cudaStream_t stream, const AttentionGeometry& g, bool tf32, const void* q,
                               const void* k, const void* v, const void* o, const void* d_o, const float* lse,
                               const int32_t* key_lengths, const int32_t* step, void* dq, void* dk, void* dv,
                               void* workspace) {
  if (g.batch <= 0 || g.heads <= 0) return;
  float* row_dots = static_cast<float*>(workspace);  // (batch, heads, query_len)
  float* dq_shares = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + row_dots_bytes(g));
  with_storage_type(g.type, "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    const bool vectorised = attention_vectorised<T>(g, {q, k, v, o, d_o, dq, dk, dv});
    const AttentionArgs a = attention_args(g, key_lengths, step, vectorised);
    const bool tensor_cores = attention_on_tensor_cores(g, tf32, vectorised);
    const bool dq_beside = tensor_cores && dq_beside_dkdv(g);
    const T* qs = static_cast<const T*>(q);
    const T* ks = static_cast<const T*>(k);
    const T* vs = static_cast<const T*>(v);
    const T* dos = static_cast<const T*>(d_o);
    if (g.query_len > 0 && (!tensor_cores || dq_beside)) {  // the tensor-core dQ kernel makes its own
      const size_t rows = g.lse_count();
      const size_t warps_per_block = kBlockSize / 32;
      const unsigned blocks = static_cast<unsigned>(
          std::min<size_t>((rows + warps_per_block - 1) / warps_per_block, kMaxGridBlocks));
      attention_row_dots_kernel<T>
          <<<blocks, kBlockSize, 0, stream>>>(a, static_cast<const T*>(o), dos, row_dots);
      DPB_CUDA_CHECK_LAUNCH(attention_row_dots_kernel);
    }
    with_head_size(g.head_dim, [&](auto head_size) {
      constexpr int kD = decltype(head_size)::value;
      using Tiles = AttentionTiles<kD>;
      if (dq_beside) {
        using Layout = MmaLayout<T, kD>;
        if (g.key_len > 0) {
          launch_tiled(attention_backward_dkdv_mma_kernel<T, kD, true>,
                       attention_grid(tiles_of(g.key_len, kMmaTile), g), Layout::kDkdvDqBytes, stream, a, qs, ks,
                       vs, dos, lse, static_cast<const float*>(row_dots), static_cast<T*>(dk), static_cast<T*>(dv),
                       dq_shares);
          DPB_CUDA_CHECK_LAUNCH(attention_backward_dkdv_mma_kernel);
        }
        const size_t items = g.lse_count() * static_cast<size_t>(g.head_dim / 4);
        attention_dq_from_partials_kernel<T><<<grid_for(items), kBlockSize, 0, stream>>>(
            a, kD, static_cast<const float*>(dq_shares), static_cast<T*>(dq));
        DPB_CUDA_CHECK_LAUNCH(attention_dq_from_partials_kernel);
        return;
      }
      if (tensor_cores) {
        if constexpr (kD <= kFlashMaxHead) {
          using Layout = FlashLayout<T, kD>;
          if (g.query_len > 0) {
            launch_tiled(attention_backward_dq_flash_kernel<T, kD>,
                         attention_grid(tiles_of(g.query_len, kFlashTile), g), Layout::kDqBytes, stream, a, qs, ks,
                         vs, static_cast<const T*>(o), dos, lse, row_dots, static_cast<T*>(dq));
            DPB_CUDA_CHECK_LAUNCH(attention_backward_dq_flash_kernel);
          }
          if (g.key_len > 0) {
            launch_tiled(attention_backward_dkdv_flash_kernel<T, kD>,
                         attention_grid(tiles_of(g.key_len, kFlashTile), g), Layout::kDkdvBytes, stream, a, qs, ks,
                         vs, dos, lse, static_cast<const float*>(row_dots), static_cast<T*>(dk),
                         static_cast<T*>(dv));
            DPB_CUDA_CHECK_LAUNCH(attention_backward_dkdv_flash_kernel);
          }
        } else {
          using Layout = MmaLayout<T, kD>;
          if (g.query_len > 0) {
            launch_tiled(attention_backward_dq_mma_kernel<T, kD>,
                         attention_grid(tiles_of(g.query_len, kMmaTile), g), Layout::kDqBytes, stream, a, qs, ks, vs,
                         static_cast<const T*>(o), dos, lse, row_dots, static_cast<T*>(dq));
            DPB_CUDA_CHECK_LAUNCH(attention_backward_dq_mma_kernel);
          }
          if (g.key_len > 0) {
            launch_tiled(attention_backward_dkdv_mma_kernel<T, kD, false>,
                         attention_grid(tiles_of(g.key_len, kMmaTile), g), Layout::kDkdvBytes, stream, a, qs, ks, vs,
                         dos, lse, static_cast<const float*>(row_dots), static_cast<T*>(dk), static_cast<T*>(dv),
                         nullptr);
            DPB_CUDA_CHECK_LAUNCH(attention_backward_dkdv_mma_kernel);
          }
        }
        return;
      }
      if (g.query_len > 0) {
        constexpr int kBr = Tiles::kDqRows, kBc = Tiles::kDqColumns;
        const size_t bytes =
            sizeof(float) * (2 * tile_floats(kD, kBr) + 2 * tile_floats(kD, kBc) + weight_floats(kBr, kBc));
        launch_tiled(attention_backward_dq_kernel<T, kD, kBr, kBc>,
                     attention_grid(tiles_of(g.query_len, kBr), g), bytes, stream, a, qs, ks, vs, dos, lse,
                     static_cast<const float*>(row_dots), static_cast<T*>(dq));
        DPB_CUDA_CHECK_LAUNCH(attention_backward_dq_kernel);
      }
      if (g.key_len > 0) {
        constexpr int kBc = Tiles::kDkdvRows, kBr = Tiles::kDkdvColumns;
        const size_t bytes = sizeof(float) * (2 * tile_floats(kD, kBc) + 2 * tile_floats(kD, kBr) +
                                              2 * weight_floats(kBc, kBr) + 2 * static_cast<size_t>(kBr));
        launch_tiled(attention_backward_dkdv_kernel<T, kD, kBc, kBr>,
                     attention_grid(tiles_of(g.key_len, kBc), g), bytes, stream, a, qs, ks, vs, dos, lse,
                     static_cast<const float*>(row_dots), static_cast<T*>(dk), static_cast<T*>(dv));
        DPB_CUDA_CHECK_LAUNCH(attention_backward_dkdv_kernel);
      }
    });
  });
}

}  // namespace dpbench::cuda_kernels
