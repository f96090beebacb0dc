// Multi-head attention (engine/backend/attention_geometry.h) on tensor cores, for 16-bit data and for fp32
// data when the backend allows TF32: the scheme of cuda_kernels_attention.cu (flash attention: an
// online softmax forward that keeps each row's log-sum-exp; a backward that rebuilds the
// probabilities once per key tile for dK/dV and once per query tile for dQ, each gradient summed
// by one warp in a fixed order, no atomics, the same bits on every run) with its four kinds of
// tile product on tensor cores through WMMA fragments. Included by cuda_kernels_attention.cu
// alone, whose launchers choose between these kernels, the mma.sync ones (cuda_attention_flash.cuh,
// Note [register attention]: faster, for heads of up to 64) and the fp32 ones; these take heads of
// 128, and keys short enough for dQ beside dK and dV.
//
// Note [tensor-core attention]: a CTA of 4 warps owns 64 rows (queries, or keys in the dK/dV
// kernel), 16 per warp, and walks tiles of 64 columns (the other side). Input tiles sit in shared
// memory in their storage type, rows padded by 16 bytes (WMMA's leading-dimension rule; eight
// consecutive rows then start in eight different bank quads). A warp's products land in its own
// fp32 score tiles; the masks, softmax and dropout then run lane by lane: lane 2r + half owns row
// r of the warp's 16 and the column pairs 4c + 2 half, 4c + 2 half + 1, each pair one 8-byte word
// (the 16 lanes of a half warp then hit 32 different banks), and the two lanes of a row share its
// statistics by one shuffle. The probabilities or score gradients then overwrite the scores in
// the input type, as the left operand of the next product. So p and ds are rounded once to 16
// bits (or TF32) before they multiply, as in FlashAttention; every sum is fp32. Exponentials are
// exp2 of scores scaled by scale * log2(e); the log-sum-exp is stored in natural units. The
// forward's running output is fp32 in shared memory, because the online softmax rescales it by
// rows and a fragment's element positions are unspecified; the backward's dK, dV and dQ stay in
// accumulator fragments (no rescaling) until they are stored. Every pointer handed to a fragment
// load or store is 32-byte aligned: region sizes and row strides are multiples of 32 bytes per 16
// rows or per k step.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "engine/cuda/cuda_attention_tiles.cuh"

namespace dpbench::cuda_kernels {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kMmaTile = 64;      // rows of a CTA and columns of a tile (Note [tensor-core attention])
constexpr int kMmaWarpRows = 16;  // rows of a warp
constexpr int kMmaThreads = 128;  // 4 warps
static_assert(kMmaThreads == kAttentionThreads, "the launch helper launches kAttentionThreads");
constexpr int kLanePairs = kMmaTile / 4;  // column pairs of one lane (Note [tensor-core attention])

// CTAs per SM each kernel aims for: what its shared memory allows (16-bit tiles are half the size),
// so the register allocation is capped to match instead of taking all 255.
template <typename T>
constexpr int kForwardBlocks = sizeof(T) == 2 ? 4 : 3;
constexpr int kDqBlocks = 3;
template <typename T>
constexpr int kDkdvBlocks = sizeof(T) == 2 ? 3 : 2;

// In fp32 a weight row is as long as its score row (kWeight == kScore), so each weight lands on
// the score it came from and a lane may write it at once; a 16-bit weight row is shorter, so a
// lane's writes reach rows that other lanes still read, and every lane holds its row's weights
// in registers (kHeldPairs of them) until the warp has read all its scores.
template <typename T>
constexpr bool kWeightsInPlace = std::is_same_v<T, float>;
template <typename T>
constexpr int kHeldPairs = kWeightsInPlace<T> ? 1 : kLanePairs;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// The fragment types of storage type T: 16-bit data multiplies as it is (k step 16); fp32 data is
// rounded to TF32 (k step 8).
template <typename T>
struct MmaTypes {
  using Element = T;
  static constexpr int kK = 16;
};
template <>
struct MmaTypes<float> {
  using Element = wmma::precision::tf32;
  static constexpr int kK = 8;
};
template <typename T, typename Layout>
using FragmentA = wmma::fragment<wmma::matrix_a, 16, 16, MmaTypes<T>::kK, typename MmaTypes<T>::Element, Layout>;
template <typename T, typename Layout>
using FragmentB = wmma::fragment<wmma::matrix_b, 16, 16, MmaTypes<T>::kK, typename MmaTypes<T>::Element, Layout>;
template <typename T>
using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, MmaTypes<T>::kK, float>;

// Row strides in shared memory (Note [tensor-core attention]).
template <typename T, int kD>
struct MmaLayout {
  static constexpr int kPad = static_cast<int>(16 / sizeof(T));  // 16 bytes of elements
  static constexpr int kInput = kD + kPad;                       // an input tile's row (T)
  static constexpr int kWeight = kMmaTile + kPad;                // a probability tile's row (T)
  static constexpr int kScore = kMmaTile + 4;                    // a score tile's row (float)
  static constexpr int kOutput = kD + 4;                         // the forward's output row (float)
  static constexpr int kOutputGroup = kD < 64 ? kD : 64;         // head columns staged at once
  static constexpr size_t kInputBytes = sizeof(T) * kMmaTile * kInput;
  static constexpr size_t kWeightBytes = sizeof(T) * kMmaTile * kWeight;
  static constexpr size_t kScoreBytes = sizeof(float) * kMmaTile * kScore;
  static constexpr size_t kOutputBytes = sizeof(float) * kMmaTile * kOutput;
  // Probabilities and score gradients overwrite the scores they come from (kWeightBytes fit); the
  // rows a CTA owns (queries; keys and values in dK/dV) go to registers once, and their tiles then
  // hold the other side's rows.
  static constexpr size_t kForwardBytes = 2 * kInputBytes + kScoreBytes + kOutputBytes;
  static constexpr size_t kDqBytes = 2 * kInputBytes + 2 * kScoreBytes;
  static constexpr size_t kDkdvBytes = 2 * kInputBytes + 2 * kScoreBytes + 2 * sizeof(float) * kMmaTile;
  // With dQ (Note [dQ beside dK and dV]) the keys keep a tile of their own, the right operand of ds k.
  static constexpr size_t kDkdvDqBytes = kDkdvBytes + kInputBytes;
  static_assert(kInputBytes % 128 == 0 && kWeightBytes % 128 == 0 && kScoreBytes % 128 == 0 &&
                    kOutputBytes % 128 == 0,
                "regions keep the 32-byte alignment of fragment pointers");
  static_assert(kOutputGroup <= kMmaTile, "a staged output group fits a score tile's row");
  static_assert(kWeightBytes <= kScoreBytes, "a weight tile fits over its score tile");
  static_assert(sizeof(T) != 4 || kWeight == kScore, "fp32 weights land on their own scores");
};

// A value in the input type of the products: fp32 is rounded to TF32 here, once, when it enters
// shared memory (so fragments load TF32 values as they are, and the tensor cores' reading of an
// fp32 register as TF32 loses nothing further).
template <typename T>
__device__ __forceinline__ T round_to(float value) {
  if constexpr (std::is_same_v<T, float>) {
    return wmma::__float_to_tf32(value);
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(value);
  } else {
    return __float2bfloat16_rn(value);
  }
}

// Column pair c of lane half in a row of fp32 scores.
__device__ __forceinline__ float2 lane_pair(const float* row, int c, int half) {
  return *reinterpret_cast<const float2*>(row + 4 * c + 2 * half);
}

// Two weights (the left operand of the next product) rounded to the input type: one register for
// 16-bit types, which is what lets a lane hold its whole row of them.
template <typename T>
__device__ __forceinline__ Pack<T, 2> weight_pair(float x, float y) {
  const float values[2] = {round_to<float>(x), round_to<float>(y)};
  if constexpr (std::is_same_v<T, float>) {
    return round_pack<float, 2>(values);  // TF32-rounded above
  } else {
    const float exact[2] = {x, y};
    return round_pack<T, 2>(exact);
  }
}

// Stores column pair c of lane half in a row of weights.
template <typename T>
__device__ __forceinline__ void store_lane_pair(T* row, int c, int half, const Pack<T, 2>& pair) {
  store_pack<2>(row + 4 * c + 2 * half, pair);
}
template <typename T>
__device__ __forceinline__ void store_lane_pair(T* row, int c, int half, float x, float y) {
  store_lane_pair(row, c, half, weight_pair<T>(x, y));
}

// Multiplies the lane's pairs of an fp32 row of kColumns by `factor`.
template <int kColumns>
__device__ __forceinline__ void scale_lane_pairs(float* row, int half, float factor) {
#pragma unroll
  for (int c = 0; c < kColumns / 4; ++c) {
    float2* at = reinterpret_cast<float2*>(row + 4 * c + 2 * half);
    float2 value = *at;
    value.x *= factor;
    value.y *= factor;
    *at = value;
  }
}

// acc += A B over kDepth: A is 16 rows of `a` (row-major, lda); B (kDepth x 16) is kDepth rows of
// `b` (b[k * ldb + n], e.g. values for p v).
template <typename T, int kDepth>
__device__ __forceinline__ void tile_product(Accumulator<T>& acc, const T* a, int lda, const T* b, int ldb) {
  constexpr int kK = MmaTypes<T>::kK;
#pragma unroll
  for (int k = 0; k < kDepth; k += kK) {
    FragmentA<T, wmma::row_major> fa;
    FragmentB<T, wmma::row_major> fb;
    wmma::load_matrix_sync(fa, a + k, lda);
    wmma::load_matrix_sync(fb, b + static_cast<size_t>(k) * ldb, ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

// A warp's 16 rows of a head tile as left operands, loaded once and kept in registers for every
// column tile the warp walks.
template <typename T, int kD>
struct RowFragments {
  FragmentA<T, wmma::row_major> f[kD / MmaTypes<T>::kK];

  __device__ __forceinline__ void load(const T* rows) {
#pragma unroll
    for (int k = 0; k < kD / MmaTypes<T>::kK; ++k) {
      wmma::load_matrix_sync(f[k], rows + k * MmaTypes<T>::kK, MmaLayout<T, kD>::kInput);
    }
  }
};

// The warp's 16 x 64 scores (or any 16 x 64 product over the head): out = rows b_rows^T in fp32,
// b_rows' 64 rows read transposed (col-major) as the right operand.
template <typename T, int kD>
__device__ __forceinline__ void warp_scores(float* out, const RowFragments<T, kD>& rows, const T* b_rows) {
  using Layout = MmaLayout<T, kD>;
  constexpr int kK = MmaTypes<T>::kK;
#pragma unroll
  for (int n = 0; n < kMmaTile / 16; ++n) {
    Accumulator<T> acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < kD / kK; ++k) {
      FragmentB<T, wmma::col_major> fb;
      wmma::load_matrix_sync(fb, b_rows + n * 16 * Layout::kInput + k * kK, Layout::kInput);
      wmma::mma_sync(acc, rows.f[k], fb, acc);
    }
    wmma::store_matrix_sync(out + n * 16, acc, Layout::kScore, wmma::mem_row_major);
  }
}

// Rows [first, first + count) of head h (tokens of sentence b) into tile rows 0 .. 64 as stored
// (fp32 rounded to TF32), 16 bytes at a time; rows past count and columns past head_dim are zeros. Needs the vectorised
// case (head_dim, strides and pointers in whole 16-byte packs).
template <typename T, int kD>
__device__ __forceinline__ void stage_rows(T* tile, const T* base, int64_t stride, const AttentionArgs& a, int b,
                                           int h, int first, int count) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  constexpr int kPacks = kD / kVec;
  constexpr int kInput = MmaLayout<T, kD>::kInput;
  const T* head = base + static_cast<int64_t>(h) * a.head_dim;
  for (int item = threadIdx.x; item < kMmaTile * kPacks; item += kMmaThreads) {
    const int row = item / kPacks;
    const int column = item % kPacks * kVec;
    uint4 value = make_uint4(0u, 0u, 0u, 0u);
    if (row < count && column < a.head_dim) {
      value = *reinterpret_cast<const uint4*>(head + (static_cast<int64_t>(first + row) * a.batch + b) * stride +
                                              column);
      if constexpr (std::is_same_v<T, float>) {
        value = make_uint4(__float_as_uint(round_to<float>(__uint_as_float(value.x))),
                           __float_as_uint(round_to<float>(__uint_as_float(value.y))),
                           __float_as_uint(round_to<float>(__uint_as_float(value.z))),
                           __float_as_uint(round_to<float>(__uint_as_float(value.w))));
      }
    }
    *reinterpret_cast<uint4*>(tile + row * kInput + column) = value;
  }
}

// The lane's half of head columns [group, group + kGroup) of row `token`: values[c - group] *
// multiplier rounded to T, for the columns below head_dim (whole packs, vectorised case).
template <typename T, int kGroup>
__device__ __forceinline__ void store_row_half(T* base, int64_t stride, const AttentionArgs& a, int b, int h,
                                               int token, int group, int half, const float* values,
                                               float multiplier) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  constexpr int kHalf = kGroup / 2;
  static_assert(kHalf % kVec == 0, "a lane's half of a group is whole packs");
  T* row = base + (static_cast<int64_t>(token) * a.batch + b) * stride + static_cast<int64_t>(h) * a.head_dim;
#pragma unroll
  for (int c = half * kHalf; c < (half + 1) * kHalf; c += kVec) {
    if (group + c >= a.head_dim) break;
    float chunk[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) chunk[e] = values[c + e] * multiplier;
    store_pack<kVec>(row + group + c, round_pack<T, kVec>(chunk));
  }
}

// The warp's accumulators (16 rows x kD head columns) stored as rows row0 + r of a sequence-major
// tensor (rows at or past `limit` skipped), through `stage` (the warp's 16 x kScore floats),
// kOutputGroup columns at a time.
template <typename T, int kD>
__device__ __forceinline__ void store_accumulators(Accumulator<T> (&acc)[kD / 16], float* stage, T* base,
                                                   int64_t stride, const AttentionArgs& a, int b, int h, int row0,
                                                   int limit, float multiplier) {
  using Layout = MmaLayout<T, kD>;
  constexpr int kGroup = Layout::kOutputGroup;
  const int lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
#pragma unroll
  for (int group = 0; group < kD; group += kGroup) {
#pragma unroll
    for (int n = 0; n < kGroup / 16; ++n) {
      wmma::store_matrix_sync(stage + n * 16, acc[group / 16 + n], Layout::kScore, wmma::mem_row_major);
    }
    __syncwarp();
    if (row0 + r < limit) {
      store_row_half<T, kGroup>(base, stride, a, b, h, row0 + r, group, half, stage + r * Layout::kScore, multiplier);
    }
    __syncwarp();  // the stage is read before the next group overwrites it
  }
}

// Forward (Note [tensor-core attention]): CTA (query tile, h, b). A warp's probabilities overwrite
// its scores in place (each lane holds its scores in registers first).
template <typename T, int kD>
__global__ void __launch_bounds__(kMmaThreads, kForwardBlocks<T>)
    attention_forward_mma_kernel(AttentionArgs a, const T* q, const T* k, const T* v, T* o, float* lse) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // the launcher sends these kernels only to compute capability 8.0 and above
#else
  using Layout = MmaLayout<T, kD>;
  extern __shared__ __align__(128) unsigned char mma_shared[];
  T* k_tile = reinterpret_cast<T*>(mma_shared);                                // (64, kInput)
  T* v_tile = k_tile + kMmaTile * Layout::kInput;                              // (64, kInput)
  T* q_tile = k_tile;  // the queries, until they are in registers
  float* s_tile = reinterpret_cast<float*>(v_tile + kMmaTile * Layout::kInput);  // (64, kScore)
  float* o_tile = s_tile + kMmaTile * Layout::kScore;                          // (64, kOutput)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
  const int i0 = blockIdx.x * kMmaTile, h = blockIdx.y, b = blockIdx.z;
  const int warp_row = warp * kMmaWarpRows;
  const int i = i0 + warp_row + r;
  float* s_warp = s_tile + warp_row * Layout::kScore;
  T* p_warp = reinterpret_cast<T*>(s_warp);  // (16, kWeight) over the scores
  float* o_warp = o_tile + warp_row * Layout::kOutput;
  const int keys = visible_keys(a, b);
  const int key_end = tile_key_end<kMmaTile>(a, keys, i0);
  const int limit = a.causal ? min(keys, i + 1) : keys;  // row i sees keys j < limit
  const float scale_log2 = a.scale * kLog2e;
  const DropoutMask dropout(a, b, h);
  float* o_row = o_warp + r * Layout::kOutput;

  stage_rows<T, kD>(q_tile, q, a.q_stride, a, b, h, i0, min(kMmaTile, a.query_len - i0));
#pragma unroll
  for (int c = 0; c < kD / 4; ++c) *reinterpret_cast<float2*>(o_row + 4 * c + 2 * half) = make_float2(0.0f, 0.0f);
  __syncthreads();
  RowFragments<T, kD> queries;
  queries.load(q_tile + warp_row * Layout::kInput);
  float m = -INFINITY, l = 0.0f;  // the row's running maximum; this lane's share of the sum
  for (int j0 = 0; j0 < key_end; j0 += kMmaTile) {
    __syncthreads();  // every warp has read the previous tile (the first time: its queries)
    stage_rows<T, kD>(k_tile, k, a.k_stride, a, b, h, j0, min(kMmaTile, key_end - j0));
    stage_rows<T, kD>(v_tile, v, a.v_stride, a, b, h, j0, min(kMmaTile, key_end - j0));
    __syncthreads();
    warp_scores<T, kD>(s_warp, queries, k_tile);
    __syncwarp();
    // Scores in log2 units; invisible ones -inf.
    float s[kLanePairs][2];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kLanePairs; ++c) {
      const int j = j0 + 4 * c + 2 * half;
      const float2 pair = lane_pair(s_warp + r * Layout::kScore, c, half);
      s[c][0] = j < limit ? pair.x * scale_log2 : -INFINITY;
      s[c][1] = j + 1 < limit ? pair.y * scale_log2 : -INFINITY;
      tile_max = fmaxf(tile_max, fmaxf(s[c][0], s[c][1]));
    }
    const float m_new = fmaxf(m, fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1)));
    // m_new is -inf only while the row has seen no key: nothing to rescale, nothing to add.
    const float alpha = m_new == -INFINITY ? 1.0f : exp2f(m - m_new);
    __syncwarp();  // every lane holds its scores before the probabilities overwrite them
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kLanePairs; ++c) {
      const int j = j0 + 4 * c + 2 * half;
      const float p0 = s[c][0] == -INFINITY ? 0.0f : exp2f(s[c][0] - m_new);
      const float p1 = s[c][1] == -INFINITY ? 0.0f : exp2f(s[c][1] - m_new);
      sum += p0 + p1;
      // Dropout where a probability is not 0 (an invisible key's stays 0 either way).
      const float2 z = j < limit ? dropout.factors(i, j, a.key_len) : make_float2(0.0f, 0.0f);
      store_lane_pair(p_warp + r * Layout::kWeight, c, half, p0 * z.x, p1 * z.y);
    }
    l = l * alpha + sum;
    m = m_new;
    scale_lane_pairs<kD>(o_row, half, alpha);
    __syncwarp();  // probabilities and rescaled rows are in place for the fragments
#pragma unroll
    for (int n = 0; n < kD / 16; ++n) {
      Accumulator<T> acc;
      wmma::load_matrix_sync(acc, o_warp + n * 16, Layout::kOutput, wmma::mem_row_major);
      tile_product<T, kMmaTile>(acc, p_warp, Layout::kWeight, v_tile + n * 16, Layout::kInput);
      wmma::store_matrix_sync(o_warp + n * 16, acc, Layout::kOutput, wmma::mem_row_major);
    }
    __syncwarp();  // the output rows are stored before lanes rescale them
  }
  const float row_sum = l + __shfl_xor_sync(0xffffffffu, l, 1);
  if (i < a.query_len) {
    // A row that saw no key has o = 0 and row_sum = 0: o = 0 and lse = -inf (log 0).
    const float inverse = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
    store_row_half<T, kD>(o, a.o_stride, a, b, h, i, 0, half, o_row, inverse);
    if (half == 0) {
      lse[row_statistic(a, b, h, i)] =
          row_sum > 0.0f ? (m + log2f(row_sum)) * kLn2 : -INFINITY;
    }
  }
#endif
}

// dQ: CTA (query tile, h, b); dq_i = scale * sum_j ds_ij k_j over the key tiles the tile sees. A
// warp's score gradients overwrite its scores in place. It first makes its rows' D_i = d_o_i . o_i
// (the two lanes of a row each take half the head, in 16-byte packs) and stores them in row_dots
// for the dK/dV kernel, which the launcher starts after it.
template <typename T, int kD>
__global__ void __launch_bounds__(kMmaThreads, kDqBlocks)
    attention_backward_dq_mma_kernel(AttentionArgs a, const T* q, const T* k, const T* v, const T* o,
                                     const T* d_o, const float* lse, float* row_dots, T* dq) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  using Layout = MmaLayout<T, kD>;
  extern __shared__ __align__(128) unsigned char mma_shared[];
  T* k_tile = reinterpret_cast<T*>(mma_shared);                                 // (64, kInput)
  T* v_tile = k_tile + kMmaTile * Layout::kInput;                               // (64, kInput)
  T* q_tile = k_tile;   // the queries and their output gradients, until they are in registers
  T* do_tile = v_tile;
  float* s_tile = reinterpret_cast<float*>(v_tile + kMmaTile * Layout::kInput);  // (64, kScore)
  float* dp_tile = s_tile + kMmaTile * Layout::kScore;                          // (64, kScore)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
  const int i0 = blockIdx.x * kMmaTile, h = blockIdx.y, b = blockIdx.z;
  const int warp_row = warp * kMmaWarpRows;
  const int i = i0 + warp_row + r;
  float* s_warp = s_tile + warp_row * Layout::kScore;
  T* ds_warp = reinterpret_cast<T*>(s_warp);  // (16, kWeight) over the scores
  float* dp_warp = dp_tile + warp_row * Layout::kScore;
  const int keys = visible_keys(a, b);
  const int key_end = tile_key_end<kMmaTile>(a, keys, i0);
  const DropoutMask dropout(a, b, h);
  const int query_count = min(kMmaTile, a.query_len - i0);

  stage_rows<T, kD>(q_tile, q, a.q_stride, a, b, h, i0, query_count);
  stage_rows<T, kD>(do_tile, d_o, a.o_stride, a, b, h, i0, query_count);
  const int64_t at = row_statistic(a, b, h, i);
  const float row_lse2 = i < a.query_len ? lse[at] * kLog2e : 0.0f;  // in log2 units
  float row_dot = 0.0f;
  if (i < a.query_len) {
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    const int64_t offset = (static_cast<int64_t>(i) * a.batch + b) * a.o_stride + static_cast<int64_t>(h) * a.head_dim;
    for (int c = half * kVec; c < a.head_dim; c += 2 * kVec) {
      const Pack<T, kVec> o_pack = load_pack<kVec>(o + offset + c);
      const Pack<T, kVec> do_pack = load_pack<kVec>(d_o + offset + c);
#pragma unroll
      for (int e = 0; e < kVec; ++e) row_dot = fmaf(element(o_pack, e), element(do_pack, e), row_dot);
    }
  }
  row_dot += __shfl_xor_sync(0xffffffffu, row_dot, 1);
  if (i < a.query_len && half == 0) row_dots[at] = row_dot;
  // Row i sees keys j < limit (none past the last query).
  const int limit = i >= a.query_len ? 0 : a.causal ? min(keys, i + 1) : keys;
  const float scale_log2 = a.scale * kLog2e;
  __syncthreads();
  RowFragments<T, kD> queries, output_gradients;
  queries.load(q_tile + warp_row * Layout::kInput);
  output_gradients.load(do_tile + warp_row * Layout::kInput);
  Accumulator<T> acc[kD / 16];
#pragma unroll
  for (int n = 0; n < kD / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
  for (int j0 = 0; j0 < key_end; j0 += kMmaTile) {
    __syncthreads();
    stage_rows<T, kD>(k_tile, k, a.k_stride, a, b, h, j0, min(kMmaTile, key_end - j0));
    stage_rows<T, kD>(v_tile, v, a.v_stride, a, b, h, j0, min(kMmaTile, key_end - j0));
    __syncthreads();
    warp_scores<T, kD>(s_warp, queries, k_tile);
    warp_scores<T, kD>(dp_warp, output_gradients, v_tile);
    __syncwarp();
    Pack<T, 2> ds[kHeldPairs<T>];
#pragma unroll
    for (int c = 0; c < kLanePairs; ++c) {
      const int j = j0 + 4 * c + 2 * half;
      float ds0 = 0.0f, ds1 = 0.0f;
      if (j < limit) {
        const float2 score = lane_pair(s_warp + r * Layout::kScore, c, half);
        const float2 dp = lane_pair(dp_warp + r * Layout::kScore, c, half);
        const float2 z = dropout.factors(i, j, a.key_len);
        ds0 = score_gradient(exp2f(score.x * scale_log2 - row_lse2), z.x, dp.x, row_dot);
        if (j + 1 < limit) ds1 = score_gradient(exp2f(score.y * scale_log2 - row_lse2), z.y, dp.y, row_dot);
      }
      if constexpr (kWeightsInPlace<T>) {
        store_lane_pair(ds_warp + r * Layout::kWeight, c, half, ds0, ds1);
      } else {
        ds[c] = weight_pair<T>(ds0, ds1);
      }
    }
    if constexpr (!kWeightsInPlace<T>) {
      __syncwarp();  // every lane has read its scores before the gradients overwrite them
#pragma unroll
      for (int c = 0; c < kLanePairs; ++c) store_lane_pair(ds_warp + r * Layout::kWeight, c, half, ds[c]);
    }
    __syncwarp();
#pragma unroll
    for (int n = 0; n < kD / 16; ++n) {
      tile_product<T, kMmaTile>(acc[n], ds_warp, Layout::kWeight, k_tile + n * 16, Layout::kInput);
    }
  }
  __syncwarp();  // the last tile's products have read ds before the stage reuses its rows
  store_accumulators<T, kD>(acc, s_warp, dq, a.q_stride, a, b, h, i0 + warp_row, a.query_len, a.scale);
#endif
}

// Query rows padded to whole tiles: the rows of a head in dq_partials (Note [dQ beside dK and dV]).
__host__ __device__ __forceinline__ int padded_rows(int query_len) {
  return (query_len + kMmaTile - 1) / kMmaTile * kMmaTile;
}

// Warp's share of dQ in the dK/dV kernel (Note [dQ beside dK and dV]): for the tile's query rows
// warp_row .. warp_row + 16, sum over the tile's 64 keys of ds_ij k_j, stored in fp32 to `out`
// (16 rows of kD). ds^T lies in the score-gradient tile by key rows, 16 to a warp's region
// (regions kScore floats apart per row, rows kWeight elements of T apart within one), so a k step
// of kK <= 16 keys stays inside one region and reads it column-major.
template <typename T, int kD>
__device__ __forceinline__ void warp_query_share(const float* dpt_tile, const T* k_tile, int warp_row, float* out) {
  using Layout = MmaLayout<T, kD>;
  constexpr int kK = MmaTypes<T>::kK;
  static_assert(kMmaWarpRows % kK == 0, "a k step stays inside one warp's rows of ds^T");
  Accumulator<T> acc[kD / 16];
#pragma unroll
  for (int n = 0; n < kD / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
  for (int key = 0; key < kMmaTile; key += kK) {
    const T* region = reinterpret_cast<const T*>(dpt_tile + (key / kMmaWarpRows) * kMmaWarpRows * Layout::kScore);
    FragmentA<T, wmma::col_major> fa;
    wmma::load_matrix_sync(fa, region + (key % kMmaWarpRows) * Layout::kWeight + warp_row, Layout::kWeight);
#pragma unroll
    for (int n = 0; n < kD / 16; ++n) {
      FragmentB<T, wmma::row_major> fb;
      wmma::load_matrix_sync(fb, k_tile + key * Layout::kInput + n * 16, Layout::kInput);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
#pragma unroll
  for (int n = 0; n < kD / 16; ++n) wmma::store_matrix_sync(out + n * 16, acc[n], kD, wmma::mem_row_major);
}

// dq = scale * the sum of the key tiles' shares (Note [dQ beside dK and dV]), in key-tile order,
// over the tiles that hold keys the row sees: one thread per (row, 4 head columns).
template <typename T>
__global__ void attention_dq_from_partials_kernel(AttentionArgs a, int kd, const float* dq_partials, T* dq) {
  const int groups = a.head_dim / 4;  // head_dim is whole 16-byte packs on this path
  const int64_t items = static_cast<int64_t>(a.batch) * a.heads * a.query_len * groups;
  const int rows = padded_rows(a.query_len);
  const int64_t tile_stride = static_cast<int64_t>(a.batch) * a.heads * rows * kd;
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; item < items;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(item % groups) * 4;
    const int64_t row_item = item / groups;
    const int i = static_cast<int>(row_item % a.query_len);
    const int64_t bh = row_item / a.query_len;
    const int b = static_cast<int>(bh / a.heads), h = static_cast<int>(bh % a.heads);
    const int keys = visible_keys(a, b);
    const int seen = a.causal ? min(keys, i + 1) : keys;  // keys j < seen
    const int tiles = (seen + kMmaTile - 1) / kMmaTile;
    const float* share = dq_partials + (bh * rows + i) * kd + c;
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int t = 0; t < tiles; ++t) {
      const float4 part = *reinterpret_cast<const float4*>(share + t * tile_stride);
      sum[0] += part.x;
      sum[1] += part.y;
      sum[2] += part.z;
      sum[3] += part.w;
    }
    float scaled[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) scaled[e] = sum[e] * a.scale;
    T* row = dq + (static_cast<int64_t>(i) * a.batch + b) * a.q_stride + static_cast<int64_t>(h) * a.head_dim + c;
    store_pack<4>(row, round_pack<T, 4>(scaled));
  }
}

// dK, dV: CTA (key tile, h, b), walking every query tile that sees a key of the tile:
// dv_j = sum_i p'_ij d_o_i, dk_j = scale * sum_i ds_ij q_i. Keys past the sentence's length get
// zeros. The products are transposed (rows are keys): s^T = k q^T, dp^T = v d_o^T; p'^T overwrites
// s^T and ds^T overwrites dp^T in place.
//
// Note [dQ beside dK and dV]: with kDq the kernel also makes dQ, for keys short enough that a
// query sees at most a few key tiles (the launcher's kDqBesideKeyTiles), instead of a dQ kernel
// that would recompute every score, probability, mask and dp: once a query tile's ds^T is in
// place, the CTA synchronises and warp w multiplies ds for query rows 16w .. 16w + 16 (the
// columns of every warp's ds^T, read column-major) by the tile's keys, which keep a tile of their
// own for it. The fp32 product, this key tile's share of those queries' dq / scale, goes to
// dq_partials (key tile, b * heads + h, query row padded to whole tiles, kD), and
// attention_dq_from_partials_kernel adds the shares in key-tile order, a fixed order, so dQ stays
// reproducible without atomics. Shares a CTA never wrote (causal tiles before the key tile, key
// tiles past the sentence) are never read.
template <typename T, int kD, bool kDq>
__global__ void __launch_bounds__(kMmaThreads, kDkdvBlocks<T>)
    attention_backward_dkdv_mma_kernel(AttentionArgs a, const T* q, const T* k, const T* v, const T* d_o,
                                       const float* lse, const float* row_dots, T* dk, T* dv, float* dq_partials) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  using Layout = MmaLayout<T, kD>;
  extern __shared__ __align__(128) unsigned char mma_shared[];
  T* q_tile = reinterpret_cast<T*>(mma_shared);                                   // (64, kInput)
  T* do_tile = q_tile + kMmaTile * Layout::kInput;                                // (64, kInput)
  float* st_tile = reinterpret_cast<float*>(do_tile + kMmaTile * Layout::kInput);  // (64, kScore)
  float* dpt_tile = st_tile + kMmaTile * Layout::kScore;                          // (64, kScore)
  float* lse_tile = dpt_tile + kMmaTile * Layout::kScore;                         // (64)
  float* dot_tile = lse_tile + kMmaTile;                                          // (64)
  // The keys and values, until they are in registers; with kDq the keys stay in a tile of their own.
  T* k_tile = kDq ? reinterpret_cast<T*>(dot_tile + kMmaTile) : q_tile;
  T* v_tile = do_tile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
  const int j0 = blockIdx.x * kMmaTile, h = blockIdx.y, b = blockIdx.z;
  const int warp_row = warp * kMmaWarpRows;
  const int j = j0 + warp_row + r;
  float* st_warp = st_tile + warp_row * Layout::kScore;
  float* dpt_warp = dpt_tile + warp_row * Layout::kScore;
  T* pt_warp = reinterpret_cast<T*>(st_warp);   // (16, kWeight): p'^T over s^T
  T* dst_warp = reinterpret_cast<T*>(dpt_warp);  // (16, kWeight): ds^T over dp^T
  const int keys = visible_keys(a, b);
  // Key j is seen by queries i >= first_visible (all of them unless causal); none if j >= keys.
  const int first_visible = j >= keys ? INT_MAX : a.causal ? j : 0;
  const float scale_log2 = a.scale * kLog2e;
  const DropoutMask dropout(a, b, h);
  Accumulator<T> dk_acc[kD / 16], dv_acc[kD / 16];
#pragma unroll
  for (int n = 0; n < kD / 16; ++n) {
    wmma::fill_fragment(dk_acc[n], 0.0f);
    wmma::fill_fragment(dv_acc[n], 0.0f);
  }
  if (j0 < keys) {  // the same for the whole CTA
    stage_rows<T, kD>(k_tile, k, a.k_stride, a, b, h, j0, min(kMmaTile, keys - j0));
    stage_rows<T, kD>(v_tile, v, a.v_stride, a, b, h, j0, min(kMmaTile, keys - j0));
    __syncthreads();
    RowFragments<T, kD> tile_keys, tile_values;
    tile_keys.load(k_tile + warp_row * Layout::kInput);
    tile_values.load(v_tile + warp_row * Layout::kInput);
    // Causal: queries before j0 see none of the tile's keys (query tiles start at multiples of 64).
    const int first_query = a.causal ? j0 : 0;
    for (int i0 = first_query; i0 < a.query_len; i0 += kMmaTile) {
      __syncthreads();  // the previous query tile is read (the first time: the keys and values)
      const int query_count = min(kMmaTile, a.query_len - i0);
      stage_rows<T, kD>(q_tile, q, a.q_stride, a, b, h, i0, query_count);
      stage_rows<T, kD>(do_tile, d_o, a.o_stride, a, b, h, i0, query_count);
      for (int t = threadIdx.x; t < kMmaTile; t += kMmaThreads) {
        const int64_t at = row_statistic(a, b, h, i0) + t;
        lse_tile[t] = t < query_count ? lse[at] * kLog2e : 0.0f;  // in log2 units
        dot_tile[t] = t < query_count ? row_dots[at] : 0.0f;
      }
      __syncthreads();
      warp_scores<T, kD>(st_warp, tile_keys, q_tile);
      warp_scores<T, kD>(dpt_warp, tile_values, do_tile);
      __syncwarp();
      Pack<T, 2> p_dropped[kHeldPairs<T>], ds[kHeldPairs<T>];
#pragma unroll
      for (int c = 0; c < kLanePairs; ++c) {
        float p_e[2] = {0.0f, 0.0f}, ds_e[2] = {0.0f, 0.0f};
        const int t = 4 * c + 2 * half;
        const float2 score = lane_pair(st_warp + r * Layout::kScore, c, half);
        const float2 dp = lane_pair(dpt_warp + r * Layout::kScore, c, half);
        const float2 row_lse2 = *reinterpret_cast<const float2*>(lse_tile + t);
        const float2 row_dot = *reinterpret_cast<const float2*>(dot_tile + t);
        const float score_e[2] = {score.x, score.y}, dp_e[2] = {dp.x, dp.y};
        const float lse_e[2] = {row_lse2.x, row_lse2.y}, dot_e[2] = {row_dot.x, row_dot.y};
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int i = i0 + t + e;
          if (i >= first_visible && i < a.query_len) {
            const float p = exp2f(score_e[e] * scale_log2 - lse_e[e]);
            const float z = dropout.factor(i, j, a.key_len);
            p_e[e] = p * z;
            ds_e[e] = score_gradient(p, z, dp_e[e], dot_e[e]);
          }
        }
        if constexpr (kWeightsInPlace<T>) {
          store_lane_pair(pt_warp + r * Layout::kWeight, c, half, p_e[0], p_e[1]);
          store_lane_pair(dst_warp + r * Layout::kWeight, c, half, ds_e[0], ds_e[1]);
        } else {
          p_dropped[c] = weight_pair<T>(p_e[0], p_e[1]);
          ds[c] = weight_pair<T>(ds_e[0], ds_e[1]);
        }
      }
      if constexpr (!kWeightsInPlace<T>) {
        __syncwarp();  // every lane has read its scores before the weights overwrite them
#pragma unroll
        for (int c = 0; c < kLanePairs; ++c) {
          store_lane_pair(pt_warp + r * Layout::kWeight, c, half, p_dropped[c]);
          store_lane_pair(dst_warp + r * Layout::kWeight, c, half, ds[c]);
        }
      }
      __syncwarp();
#pragma unroll
      for (int n = 0; n < kD / 16; ++n) {
        tile_product<T, kMmaTile>(dv_acc[n], pt_warp, Layout::kWeight, do_tile + n * 16, Layout::kInput);
        tile_product<T, kMmaTile>(dk_acc[n], dst_warp, Layout::kWeight, q_tile + n * 16, Layout::kInput);
      }
      if constexpr (kDq) {
        __syncthreads();  // every warp's ds^T is in place
        warp_query_share<T, kD>(dpt_tile, k_tile, warp_row,
                                dq_partials + ((static_cast<int64_t>(blockIdx.x) * a.batch + b) * a.heads + h) *
                                                  padded_rows(a.query_len) * kD +
                                    static_cast<int64_t>(i0 + warp_row) * kD);
      }
      __syncwarp();  // the weights are read before the next tile's scores overwrite them
    }
  }
  store_accumulators<T, kD>(dk_acc, st_warp, dk, a.k_stride, a, b, h, j0 + warp_row, a.key_len, a.scale);
  store_accumulators<T, kD>(dv_acc, st_warp, dv, a.v_stride, a, b, h, j0 + warp_row, a.key_len, 1.0f);
#endif
}

}  // namespace
}  // namespace dpbench::cuda_kernels
