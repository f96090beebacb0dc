// Multi-head scaled-dot-product attention (engine/attention_geometry.h) as flash attention: the
// (batch, heads, query_len, key_len) scores never reach global memory. The forward pass streams
// key/value tiles past a tile of queries with an online softmax and keeps each row's log-sum-exp;
// the backward pass rebuilds the probabilities from it, once per key tile (dK, dV) and once per
// query tile (dQ), so every gradient is summed by one thread in a fixed order: no atomics, the
// same bits on every run. Kernels first, launchers after.
//
// Note [attention tiles]: a CTA of 128 threads owns a tile of "rows" (queries in the forward and
// dQ kernels, keys in the dK/dV kernel) and walks tiles of "columns" (the other side). Thread t is
// lane kg = t % 16 of row group rg = t / 16 (a half warp): it computes the scores of rows
// rg + 8x against columns kg + 16y, and accumulates rows rg + 8x of its output over head
// columns [(kg + 16c) * kChunk, +kChunk). A row's statistics are reduced over the 16 lanes of its
// group by shuffles, and the probabilities a group writes to shared memory are read back by the
// same group only (__syncwarp, not a block barrier). Tiles sit in shared memory as fp32 rows of
// kD + 4 floats: 16-byte aligned for float4 reads, and eight lanes reading eight consecutive rows
// hit eight different bank quads. Arithmetic is fp32 whatever the storage type (widened on load,
// rounded once on store); head_dim up to 128, zero-padded to kD (32, 64 or 128).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "engine/counter_random.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"
#include "engine/cuda/cuda_packs.cuh"

namespace dpbench::cuda_kernels {
namespace {

constexpr int kThreads = 128;  // 8 row groups of 16 lanes (Note [attention tiles])
constexpr int kRowGroups = 8;
constexpr int kGroupLanes = 16;

// What every kernel needs of the geometry and the call, passed by value.
struct AttentionArgs {
  int batch, heads, query_len, key_len, head_dim;
  bool causal;
  float scale;
  int64_t q_stride, k_stride, v_stride, o_stride;
  float dropout_rate;
  float keep_scale;  // 1 / (1 - rate), applied to kept probabilities
  uint64_t dropout_seed, first_sample;
  const int32_t* key_lengths;  // device, or nullptr: every key real
  const int32_t* step;         // device; read only with dropout
  bool vectorised;  // 16-byte packs: head_dim, strides and pointers allow them
};

// Keys [0, visible) of sentence b are real.
__device__ __forceinline__ int visible_keys(const AttentionArgs& a, int b) {
  if (a.key_lengths == nullptr) return a.key_len;
  return min(max(a.key_lengths[b], 0), a.key_len);
}

// Dropout of probability (i, j) of sentence b, head h, as attention_geometry.h places it; the
// stream's part of the hash is computed once per thread.
struct DropoutMask {
  bool active;
  float rate;
  float keep_scale;
  uint64_t stream_key;
  uint64_t head_base;  // ((first_sample + b) * heads + h) * query_len

  __device__ DropoutMask(const AttentionArgs& a, int b, int h)
      : active(a.dropout_rate > 0.0f), rate(a.dropout_rate), keep_scale(a.keep_scale), stream_key(0),
        head_base(((a.first_sample + static_cast<uint64_t>(b)) * a.heads + h) * a.query_len) {
    if (active) {
      stream_key = counter_stream_key(a.dropout_seed, kRandomStreamDropout + static_cast<uint64_t>(*a.step));
    }
  }
  // The factor of a probability: 1 without dropout, else 0 or 1 / (1 - rate).
  __device__ __forceinline__ float factor(int i, int j, int key_len) const {
    if (!active) return 1.0f;
    const uint64_t index = (head_base + static_cast<uint64_t>(i)) * key_len + static_cast<uint64_t>(j);
    return counter_uniform_keyed(stream_key, index) >= rate ? keep_scale : 0.0f;
  }
};

__device__ __forceinline__ float group_max(float value) {
#pragma unroll
  for (int offset = kGroupLanes / 2; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// Butterfly sum over the 16 lanes of a row group: every lane ends with the same bits.
__device__ __forceinline__ float group_sum(float value) {
#pragma unroll
  for (int offset = kGroupLanes / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// Head columns of a thread's accumulators (Note [attention tiles]): kChunks chunks of kChunk
// adjacent columns; chunk c starts at column (kg + 16c) * kChunk, so eight lanes read 128
// consecutive bytes of a value row.
template <int kD>
struct HeadColumns {
  static constexpr int kPad = kD + 4;  // floats per tile row in shared memory
  static constexpr int kChunk = kD >= 64 ? 4 : kD / kGroupLanes;
  static constexpr int kChunks = kD / (kGroupLanes * kChunk);
  static constexpr int kCount = kChunk * kChunks;
  static_assert(kD % 32 == 0 && kD <= 128, "kD is 32, 64 or 128");
};

// Rows [first, first + count) (tokens of sentence b) of head h of a sequence-major tensor into
// tile rows 0 .. kRows, widened to fp32; rows past count and columns past head_dim are 0.
template <typename T, int kD, int kRows>
__device__ void load_tile(float* tile, const T* base, int64_t stride, const AttentionArgs& a, int b,
                          int h, int first, int count) {
  constexpr int kPad = HeadColumns<kD>::kPad;
  const T* head = base + static_cast<int64_t>(h) * a.head_dim;
  auto row_at = [&](int r) { return head + (static_cast<int64_t>(first + r) * a.batch + b) * stride; };
  if (a.vectorised) {
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    constexpr int kPacksPerRow = kD / kVec;
    for (int item = threadIdx.x; item < kRows * kPacksPerRow; item += kThreads) {
      const int r = item / kPacksPerRow;
      const int c = item % kPacksPerRow * kVec;
      float values[kVec];
      if (r < count && c < a.head_dim) {
        const Pack<T, kVec> pack = load_pack<kVec>(row_at(r) + c);
#pragma unroll
        for (int k = 0; k < kVec; ++k) values[k] = element(pack, k);
      } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) values[k] = 0.0f;
      }
      float4* target = reinterpret_cast<float4*>(tile + r * kPad + c);
#pragma unroll
      for (int k = 0; k < kVec; k += 4) {
        target[k / 4] = make_float4(values[k], values[k + 1], values[k + 2], values[k + 3]);
      }
    }
  } else {
    for (int item = threadIdx.x; item < kRows * kD; item += kThreads) {
      const int r = item / kD;
      const int c = item % kD;
      tile[r * kPad + c] = r < count && c < a.head_dim ? load_widened(row_at(r) + c) : 0.0f;
    }
  }
}

// s[x][y] = dot(a row rg + 8x, b row kg + 16y) over kD, in d order.
template <int kD, int kR, int kC>
__device__ __forceinline__ void tile_dots(const float* a, const float* b, int rg, int kg,
                                          float (&s)[kR][kC]) {
  constexpr int kPad = HeadColumns<kD>::kPad;
#pragma unroll
  for (int x = 0; x < kR; ++x) {
#pragma unroll
    for (int y = 0; y < kC; ++y) s[x][y] = 0.0f;
  }
#pragma unroll 2
  for (int d = 0; d < kD; d += 4) {
    float4 av[kR], bv[kC];
#pragma unroll
    for (int x = 0; x < kR; ++x) av[x] = *reinterpret_cast<const float4*>(a + (rg + kRowGroups * x) * kPad + d);
#pragma unroll
    for (int y = 0; y < kC; ++y) bv[y] = *reinterpret_cast<const float4*>(b + (kg + kGroupLanes * y) * kPad + d);
#pragma unroll
    for (int x = 0; x < kR; ++x) {
#pragma unroll
      for (int y = 0; y < kC; ++y) {
        float sum = s[x][y];
        sum = fmaf(av[x].x, bv[y].x, sum);
        sum = fmaf(av[x].y, bv[y].y, sum);
        sum = fmaf(av[x].z, bv[y].z, sum);
        sum = fmaf(av[x].w, bv[y].w, sum);
        s[x][y] = sum;
      }
    }
  }
}

// kN adjacent floats of shared memory (8- or 16-byte aligned).
template <int kN>
__device__ __forceinline__ void load_chunk(const float* p, float* out) {
  if constexpr (kN == 4) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
  } else {
    static_assert(kN == 2, "chunks of 2 or 4 floats");
    const float2 v = *reinterpret_cast<const float2*>(p);
    out[0] = v.x;
    out[1] = v.y;
  }
}

// acc[x][c] += sum over j < kJ of p[rg + 8x][j] * v[j][column c], in j order: p rows are kJ + 4
// floats apart, v rows kD + 4.
template <int kD, int kR, int kJ>
__device__ __forceinline__ void tile_accumulate(const float* p, const float* v, int rg, int kg,
                                                float (&acc)[kR][HeadColumns<kD>::kCount]) {
  using Columns = HeadColumns<kD>;
#pragma unroll 2
  for (int j = 0; j < kJ; j += 4) {
    float4 pv[kR];
#pragma unroll
    for (int x = 0; x < kR; ++x) pv[x] = *reinterpret_cast<const float4*>(p + (rg + kRowGroups * x) * (kJ + 4) + j);
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const float* v_row = v + (j + jj) * Columns::kPad;
      float vv[Columns::kCount];
#pragma unroll
      for (int c = 0; c < Columns::kChunks; ++c) {
        load_chunk<Columns::kChunk>(v_row + (kg + kGroupLanes * c) * Columns::kChunk, vv + c * Columns::kChunk);
      }
#pragma unroll
      for (int x = 0; x < kR; ++x) {
        const float weight = jj == 0 ? pv[x].x : jj == 1 ? pv[x].y : jj == 2 ? pv[x].z : pv[x].w;
#pragma unroll
        for (int c = 0; c < Columns::kCount; ++c) acc[x][c] = fmaf(weight, vv[c], acc[x][c]);
      }
    }
  }
}

// Row `token` of sentence b, head h: values[c] * multiplier for the thread's head columns
// (those below head_dim), rounded to T.
template <typename T, int kD>
__device__ __forceinline__ void store_head_row(T* base, int64_t stride, const AttentionArgs& a, int b,
                                               int h, int token, int kg, const float* values,
                                               float multiplier) {
  using Columns = HeadColumns<kD>;
  T* row = base + (static_cast<int64_t>(token) * a.batch + b) * stride + static_cast<int64_t>(h) * a.head_dim;
#pragma unroll
  for (int c = 0; c < Columns::kChunks; ++c) {
    const int column = (kg + kGroupLanes * c) * Columns::kChunk;
    float chunk[Columns::kChunk];
#pragma unroll
    for (int e = 0; e < Columns::kChunk; ++e) chunk[e] = values[c * Columns::kChunk + e] * multiplier;
    if (a.vectorised) {
      // head_dim is a multiple of a 16-byte pack, so a chunk lies wholly inside or outside it.
      if (column < a.head_dim) store_pack<Columns::kChunk>(row + column, round_pack<T, Columns::kChunk>(chunk));
    } else {
#pragma unroll
      for (int e = 0; e < Columns::kChunk; ++e) {
        if (column + e < a.head_dim) store_rounded(row + column + e, chunk[e]);
      }
    }
  }
}

// Forward (Note [attention tiles]): CTA (query tile, h, b) with rows = kBr queries, columns = kBc
// keys. Online softmax: m the running maximum of a row's scores, l the thread's share of the sum
// of exp(s - m), both rescaled when m grows; the accumulated p' v rescale with them.
template <typename T, int kD, int kBr, int kBc>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(AttentionArgs a, const T* q, const T* k,
                                                                     const T* v, T* o, float* lse) {
  using Columns = HeadColumns<kD>;
  constexpr int kPad = Columns::kPad;
  constexpr int kR = kBr / kRowGroups;
  constexpr int kC = kBc / kGroupLanes;
  extern __shared__ float4 shared_words[];
  float* q_tile = reinterpret_cast<float*>(shared_words);  // (kBr, kPad)
  float* k_tile = q_tile + kBr * kPad;                      // (kBc, kPad)
  float* v_tile = k_tile + kBc * kPad;                      // (kBc, kPad)
  float* p_tile = v_tile + kBc * kPad;                      // (kBr, kBc + 4)
  const int i0 = blockIdx.x * kBr, h = blockIdx.y, b = blockIdx.z;
  const int rg = threadIdx.x / kGroupLanes, kg = threadIdx.x % kGroupLanes;
  const int keys = visible_keys(a, b);
  // Causal: no query of the tile sees a key at or past its end.
  const int key_end = a.causal ? min(keys, i0 + kBr) : keys;
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
        lse[(static_cast<int64_t>(b) * a.heads + h) * a.query_len + i] =
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
    const int64_t offset = (static_cast<int64_t>(i) * a.batch + b) * a.o_stride + static_cast<int64_t>(h) * a.head_dim;
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

// The gradient of a score given its probability p (rebuilt as exp(s - lse)), the dropout factor
// z, dp' = d_o_i . v_j and D_i: ds = p (z dp' - D_i) (dp = z dp' is the gradient of p).
__device__ __forceinline__ float score_gradient(float p, float z, float dp_dropped, float row_dot) {
  return p * (z * dp_dropped - row_dot);
}

// dQ: CTA (query tile, h, b), rows = kBr queries, columns = kBc keys; dq_i = scale * sum_j ds_ij k_j.
template <typename T, int kD, int kBr, int kBc>
__global__ void __launch_bounds__(kThreads) attention_backward_dq_kernel(AttentionArgs a, const T* q, const T* k,
                                                                         const T* v, const T* d_o,
                                                                         const float* lse,
                                                                         const float* row_dots, T* dq) {
  using Columns = HeadColumns<kD>;
  constexpr int kPad = Columns::kPad;
  constexpr int kR = kBr / kRowGroups;
  constexpr int kC = kBc / kGroupLanes;
  extern __shared__ float4 shared_words[];
  float* q_tile = reinterpret_cast<float*>(shared_words);  // (kBr, kPad)
  float* do_tile = q_tile + kBr * kPad;                     // (kBr, kPad)
  float* k_tile = do_tile + kBr * kPad;                     // (kBc, kPad)
  float* v_tile = k_tile + kBc * kPad;                      // (kBc, kPad)
  float* ds_tile = v_tile + kBc * kPad;                     // (kBr, kBc + 4)
  const int i0 = blockIdx.x * kBr, h = blockIdx.y, b = blockIdx.z;
  const int rg = threadIdx.x / kGroupLanes, kg = threadIdx.x % kGroupLanes;
  const int keys = visible_keys(a, b);
  const int key_end = a.causal ? min(keys, i0 + kBr) : keys;
  const DropoutMask dropout(a, b, h);
  const int query_count = min(kBr, a.query_len - i0);

  load_tile<T, kD, kBr>(q_tile, q, a.q_stride, a, b, h, i0, query_count);
  load_tile<T, kD, kBr>(do_tile, d_o, a.o_stride, a, b, h, i0, query_count);
  float row_lse[kR], row_dot[kR], acc[kR][Columns::kCount];
#pragma unroll
  for (int x = 0; x < kR; ++x) {
    const int i = i0 + rg + kRowGroups * x;
    const int64_t at = (static_cast<int64_t>(b) * a.heads + h) * a.query_len + i;
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
__global__ void __launch_bounds__(kThreads) attention_backward_dkdv_kernel(AttentionArgs a, const T* q, const T* k,
                                                                           const T* v, const T* d_o,
                                                                           const float* lse,
                                                                           const float* row_dots, T* dk,
                                                                           T* dv) {
  using Columns = HeadColumns<kD>;
  constexpr int kPad = Columns::kPad;
  constexpr int kR = kBc / kRowGroups;
  constexpr int kC = kBr / kGroupLanes;
  extern __shared__ float4 shared_words[];
  float* k_tile = reinterpret_cast<float*>(shared_words);  // (kBc, kPad)
  float* v_tile = k_tile + kBc * kPad;                      // (kBc, kPad)
  float* q_tile = v_tile + kBc * kPad;                      // (kBr, kPad)
  float* do_tile = q_tile + kBr * kPad;                     // (kBr, kPad)
  float* p_tile = do_tile + kBr * kPad;                     // (kBc, kBr + 4): p', then d_o's weights
  float* ds_tile = p_tile + kBc * (kBr + 4);                // (kBc, kBr + 4)
  float* lse_tile = ds_tile + kBc * (kBr + 4);              // (kBr)
  float* dot_tile = lse_tile + kBr;                         // (kBr)
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
      for (int t = threadIdx.x; t < kBr; t += kThreads) {
        const int64_t at = (static_cast<int64_t>(b) * a.heads + h) * a.query_len + i0 + t;
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
  a.keep_scale = g.dropout_rate > 0.0f ? 1.0f / (1.0f - g.dropout_rate) : 1.0f;
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
  return g.head_dim % kVec == 0 && g.q_stride % kVec == 0 && g.k_stride % kVec == 0 &&
         g.v_stride % kVec == 0 && g.o_stride % kVec == 0 && aligned_to(pointers, 16);
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
  kernel<<<grid, kThreads, shared_bytes, stream>>>(args...);
}

dim3 attention_grid(int tiles, const AttentionGeometry& g) {
  return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(g.heads), static_cast<unsigned>(g.batch));
}

int tiles_of(int length, int tile) { return (length + tile - 1) / tile; }

}  // namespace

void launch_attention_forward(cudaStream_t stream, const AttentionGeometry& g, const void* q, const void* k,
                              const void* v, const int32_t* key_lengths, const int32_t* step, void* o,
                              float* lse) {
  if (g.batch <= 0 || g.heads <= 0 || g.query_len <= 0) return;
  with_storage_type(g.type, "attention_forward", [&](auto tag) {
    using T = decltype(tag);
    const AttentionArgs a = attention_args(g, key_lengths, step, attention_vectorised<T>(g, {q, k, v, o}));
    with_head_size(g.head_dim, [&](auto head_size) {
      constexpr int kD = decltype(head_size)::value;
      using Tiles = AttentionTiles<kD>;
      constexpr int kBr = Tiles::kForwardRows, kBc = Tiles::kForwardColumns;
      const size_t bytes = sizeof(float) * (tile_floats(kD, kBr) + 2 * tile_floats(kD, kBc) + weight_floats(kBr, kBc));
      launch_tiled(attention_forward_kernel<T, kD, kBr, kBc>, attention_grid(tiles_of(g.query_len, kBr), g),
                   bytes, stream, a, static_cast<const T*>(q), static_cast<const T*>(k),
                   static_cast<const T*>(v), static_cast<T*>(o), lse);
    });
  });
  DPB_CUDA_CHECK_LAUNCH(attention_forward_kernel);
}

size_t attention_workspace_bytes(const AttentionGeometry& g) {
  // The backward pass's D_i, one float per query row (the forward pass needs nothing).
  return g.lse_count() * sizeof(float);
}

void launch_attention_backward(cudaStream_t stream, const AttentionGeometry& g, const void* q, const void* k,
                               const void* v, const void* o, const void* d_o, const float* lse,
                               const int32_t* key_lengths, const int32_t* step, void* dq, void* dk, void* dv,
                               void* workspace) {
  if (g.batch <= 0 || g.heads <= 0) return;
  float* row_dots = static_cast<float*>(workspace);  // (batch, heads, query_len)
  with_storage_type(g.type, "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    const AttentionArgs a =
        attention_args(g, key_lengths, step, attention_vectorised<T>(g, {q, k, v, o, d_o, dq, dk, dv}));
    const T* qs = static_cast<const T*>(q);
    const T* ks = static_cast<const T*>(k);
    const T* vs = static_cast<const T*>(v);
    const T* dos = static_cast<const T*>(d_o);
    if (g.query_len > 0) {
      const size_t rows = g.lse_count();
      const size_t warps_per_block = kBlockSize / 32;
      const unsigned blocks =
          static_cast<unsigned>(std::min<size_t>((rows + warps_per_block - 1) / warps_per_block, kMaxGridBlocks));
      attention_row_dots_kernel<T><<<blocks, kBlockSize, 0, stream>>>(a, static_cast<const T*>(o), dos, row_dots);
      DPB_CUDA_CHECK_LAUNCH(attention_row_dots_kernel);
    }
    with_head_size(g.head_dim, [&](auto head_size) {
      constexpr int kD = decltype(head_size)::value;
      using Tiles = AttentionTiles<kD>;
      if (g.query_len > 0) {
        constexpr int kBr = Tiles::kDqRows, kBc = Tiles::kDqColumns;
        const size_t bytes =
            sizeof(float) * (2 * tile_floats(kD, kBr) + 2 * tile_floats(kD, kBc) + weight_floats(kBr, kBc));
        launch_tiled(attention_backward_dq_kernel<T, kD, kBr, kBc>, attention_grid(tiles_of(g.query_len, kBr), g),
                     bytes, stream, a, qs, ks, vs, dos, lse, static_cast<const float*>(row_dots),
                     static_cast<T*>(dq));
        DPB_CUDA_CHECK_LAUNCH(attention_backward_dq_kernel);
      }
      if (g.key_len > 0) {
        constexpr int kBc = Tiles::kDkdvRows, kBr = Tiles::kDkdvColumns;
        const size_t bytes = sizeof(float) * (2 * tile_floats(kD, kBc) + 2 * tile_floats(kD, kBr) +
                                              2 * weight_floats(kBc, kBr) + 2 * static_cast<size_t>(kBr));
        launch_tiled(attention_backward_dkdv_kernel<T, kD, kBc, kBr>, attention_grid(tiles_of(g.key_len, kBc), g),
                     bytes, stream, a, qs, ks, vs, dos, lse, static_cast<const float*>(row_dots),
                     static_cast<T*>(dk), static_cast<T*>(dv));
        DPB_CUDA_CHECK_LAUNCH(attention_backward_dkdv_kernel);
      }
    });
  });
}

}  // namespace dpbench::cuda_kernels
