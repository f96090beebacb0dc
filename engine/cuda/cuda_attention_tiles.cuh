// Device helpers of the flash-attention kernels (cuda_kernels_attention.cu): the work split of a
// CTA, tiles of a head moved between a sequence-major tensor and shared memory, the two tile
// products every kernel is made of, the masks and the dropout of a probability.
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
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/counter_random.h"
#include "engine/cuda/cuda_packs.cuh"

namespace dpbench::cuda_kernels {

constexpr int kAttentionThreads = 128;  // 8 row groups of 16 lanes (Note [attention tiles])
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
  bool vectorised;             // 16-byte packs: head_dim, strides and pointers allow them
};

// Keys [0, visible) of sentence b are real.
__device__ __forceinline__ int visible_keys(const AttentionArgs& a, int b) {
  if (a.key_lengths == nullptr) return a.key_len;
  return min(max(a.key_lengths[b], 0), a.key_len);
}

// The keys the query tile [i0, i0 + kRows) reads: causal, none at or past its end.
template <int kRows>
__device__ __forceinline__ int tile_key_end(const AttentionArgs& a, int keys, int i0) {
  return a.causal ? min(keys, i0 + kRows) : keys;
}

// Where query row i of head h of sentence b keeps its statistics (lse, row_dots): (batch, heads,
// query_len).
__device__ __forceinline__ int64_t row_statistic(const AttentionArgs& a, int b, int h, int i) {
  return (static_cast<int64_t>(b) * a.heads + h) * a.query_len + i;
}

// Dropout of probability (i, j) of sentence b, head h, as attention_geometry.h places it; the
// stream's part of the hash is computed once per thread.
struct DropoutMask {
  bool active;
  uint32_t threshold;  // dropout_threshold(rate)
  float keep_scale;
  uint64_t stream_key;
  uint64_t head_base;  // ((first_sample + b) * heads + h) * query_len

  __device__ DropoutMask(const AttentionArgs& a, int b, int h)
      : active(a.dropout_rate > 0.0f),
        threshold(dropout_threshold(a.dropout_rate)),
        keep_scale(a.keep_scale),
        stream_key(0),
        head_base(((a.first_sample + static_cast<uint64_t>(b)) * a.heads + h) * a.query_len) {
    if (active) {
      stream_key = dropout_stream_key(a.dropout_seed, *a.step);
    }
  }
  // The factor of a probability: 1 without dropout, else 0 or 1 / (1 - rate).
  __device__ __forceinline__ float factor(int i, int j, int key_len) const {
    if (!active) return 1.0f;
    const uint64_t index = (head_base + static_cast<uint64_t>(i)) * key_len + static_cast<uint64_t>(j);
    return dropout_keeps_keyed(stream_key, index, threshold) ? keep_scale : 0.0f;
  }
  // The factors of probabilities (i, j) and (i, j + 1): one hash when their indices form a pair
  // (engine/backend/counter_random.h), as they do for even j and an even key_len.
  __device__ __forceinline__ float2 factors(int i, int j, int key_len) const {
    if (!active) return make_float2(1.0f, 1.0f);
    const uint64_t index = (head_base + static_cast<uint64_t>(i)) * key_len + static_cast<uint64_t>(j);
    bool keeps_first, keeps_second;
    if ((index & 1) == 0) {
      dropout_keeps_pair(stream_key, index, threshold, keeps_first, keeps_second);
    } else {
      keeps_first = dropout_keeps_keyed(stream_key, index, threshold);
      keeps_second = dropout_keeps_keyed(stream_key, index + 1, threshold);
    }
    return make_float2(keeps_first ? keep_scale : 0.0f, keeps_second ? keep_scale : 0.0f);
  }
};

// The gradient of a score given its probability p (rebuilt as exp(s - lse)), the dropout factor
// z, dp' = d_o_i . v_j and D_i: ds = p (z dp' - D_i) (dp = z dp' is the gradient of p).
__device__ __forceinline__ float score_gradient(float p, float z, float dp_dropped, float row_dot) {
  return p * (z * dp_dropped - row_dot);
}

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
__device__ void load_tile(float* tile, const T* base, int64_t stride, const AttentionArgs& a, int b, int h,
                          int first, int count) {
  constexpr int kPad = HeadColumns<kD>::kPad;
  const T* head = base + static_cast<int64_t>(h) * a.head_dim;
  auto row_at = [&](int r) { return head + (static_cast<int64_t>(first + r) * a.batch + b) * stride; };
  if (a.vectorised) {
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    constexpr int kPacksPerRow = kD / kVec;
    for (int item = threadIdx.x; item < kRows * kPacksPerRow; item += kAttentionThreads) {
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
    for (int item = threadIdx.x; item < kRows * kD; item += kAttentionThreads) {
      const int r = item / kD;
      const int c = item % kD;
      tile[r * kPad + c] = r < count && c < a.head_dim ? load_widened(row_at(r) + c) : 0.0f;
    }
  }
}

// s[x][y] = dot(a row rg + 8x, b row kg + 16y) over kD, in d order.
template <int kD, int kR, int kC>
__device__ __forceinline__ void tile_dots(const float* a, const float* b, int rg, int kg, float (&s)[kR][kC]) {
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
    for (int y = 0; y < kC; ++y)
      bv[y] = *reinterpret_cast<const float4*>(b + (kg + kGroupLanes * y) * kPad + d);
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
    for (int x = 0; x < kR; ++x)
      pv[x] = *reinterpret_cast<const float4*>(p + (rg + kRowGroups * x) * (kJ + 4) + j);
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
__device__ __forceinline__ void store_head_row(T* base, int64_t stride, const AttentionArgs& a, int b, int h,
                                               int token, int kg, const float* values, float multiplier) {
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

}  // namespace dpbench::cuda_kernels
