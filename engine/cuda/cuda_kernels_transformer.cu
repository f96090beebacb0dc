// The Transformer's sinusoidal positional encoding and a linear layer's epilogue (bias, ReLU,
// dropout, residual add, or GELU). (Layer normalisation is cuda_kernels_layer_norm.cu; attention is
// cuda_kernels_attention.cu.) Kernels first, launchers after.
// Rows hold fp32, fp16 or bf16 (cuda_packs.cuh); the arithmetic is fp32, a 16-bit result is
// rounded once as it is stored. Bound by memory, so rows move in 16-byte packs where the row
// length and the pointers allow; nothing allocates or synchronises, so the launcher can be
// captured in a graph.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/backend/counter_random.h"
#include "engine/backend/gelu.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"
#include "engine/cuda/cuda_packs.cuh"

namespace dpbench::cuda_kernels {
namespace {

// ---- positional encoding ---------------------------------------------------------------------
// Block (blockIdx.x, t = blockIdx.y) first tabulates PE(t, 0 .. dim) in shared memory, then adds
// it to its share of token t's batch * dim elements (which start with column 0 of sentence 0).
// The table's angles and sinusoids are computed in double and rounded once: dim values per block
// cost nothing beside the rows, and an fp32 angle t * 10000^(-2i/dim) would be off by up to an
// ulp of t, which sin turns into an absolute error that grows with the position. kVec divides dim.
template <typename T, int kVec>
__global__ void positional_encoding_kernel(const T* x, T* y, int batch, int dim, float scale) {
  extern __shared__ float encoding[];  // (dim)
  const int t = blockIdx.y;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    const double frequency = pow(10000.0, -static_cast<double>(d - d % 2) / dim);
    const double angle = static_cast<double>(t) * frequency;
    encoding[d] = static_cast<float>(d % 2 == 0 ? sin(angle) : cos(angle));
  }
  __syncthreads();
  const size_t token_offset = static_cast<size_t>(t) * batch * dim;
  const T* in = x + token_offset;  // (batch, dim)
  T* out = y + token_offset;       // (batch, dim); may be `in`
  const size_t packs = static_cast<size_t>(batch) * dim / kVec;
  for (size_t q = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < packs;
       q += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const Pack<T, kVec> v = load_pack<kVec>(in, static_cast<long long>(q));
    const int d = static_cast<int>(q * kVec % dim);
    float result[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) result[k] = element(v, k) * scale + encoding[d + k];
    store_pack<kVec>(out, static_cast<long long>(q), round_pack<T, kVec>(result));
  }
}

// ---- a linear layer's epilogue ------------------------------------------------------------------
// Backend::add_row_bias: bias, ReLU, dropout and the residual add in one pass over (rows, cols),
// in packs of kVec along a row (kVec divides cols, so a pack never straddles two rows). Values are
// rounded to T where the separate kernels store them, and the keep scale's product is __fmul_rn,
// never contracted into the residual's add: bit for bit the ops in sequence. With `activated`
// (GELU, which comes alone), y keeps the rounded sum and activated receives its GELU.
template <typename T, int kVec>
__global__ void row_bias_epilogue_kernel(T* y, const float* bias, size_t packs, unsigned cols, bool relu,
                                         DropoutDraw dropout, uint32_t threshold, float keep_scale,
                                         const T* residual, T* out, T* activated) {
  const bool dropping = dropout.rate > 0.0f;
  const uint64_t key = dropping ? dropout_stream_key(dropout.seed, *dropout.step) : 0;
  DPB_GRID_STRIDE_LOOP(i, packs) {
    const size_t at = i * kVec;
    const unsigned column = static_cast<unsigned>(at % cols);
    const Pack<T, kVec> in = load_pack<kVec>(y + at);
    float v[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = element(in, k) + bias[column + k];
    Pack<T, kVec> rounded = round_pack<T, kVec>(v);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      v[k] = element(rounded, k);
      if (relu && !(v[k] > 0.0f)) v[k] = 0.0f;
    }
    if (dropping) {
      bool keep[kVec];
      dropout_keeps_run(key, dropout.first_index + at, threshold, keep);
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = keep[k] ? __fmul_rn(v[k], keep_scale) : 0.0f;
      rounded = round_pack<T, kVec>(v);
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = element(rounded, k);
    }
    if (residual != nullptr) {
      const Pack<T, kVec> r = load_pack<kVec>(residual + at);
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = element(r, k) + v[k];
      store_pack<kVec>(out + at, round_pack<T, kVec>(v));
    } else {
      store_pack<kVec>(y + at, round_pack<T, kVec>(v));
    }
    if (activated != nullptr) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = gelu_tanh(v[k]);
      store_pack<kVec>(activated + at, round_pack<T, kVec>(v));
    }
  }
}

}  // namespace

void launch_row_bias_epilogue(cudaStream_t stream, DataType type, void* y, const float* bias, int rows, int cols,
                              const RowBiasEpilogue& then) {
  if (rows <= 0 || cols <= 0) return;
  const float rate = then.dropout.rate;
  const uint32_t threshold = dropout_threshold(rate);
  const float keep_scale = dropout_keep_scale(rate);  // rounded once, as the reference rounds it
  with_storage_type(type, "add_row_bias", [&](auto tag) {
    using T = decltype(tag);
    with_row_packs<T>(cols, {y, then.residual, then.out, then.activated}, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const size_t packs = static_cast<size_t>(rows) * cols / kVec;
      row_bias_epilogue_kernel<T, kVec><<<grid_for(packs), kBlockSize, 0, stream>>>(
          static_cast<T*>(y), bias, packs, static_cast<unsigned>(cols), then.relu, then.dropout, threshold,
          keep_scale, static_cast<const T*>(then.residual), static_cast<T*>(then.out),
          static_cast<T*>(then.gelu ? then.activated : nullptr));
    });
  });
  DPB_CUDA_CHECK_LAUNCH(row_bias_epilogue_kernel);
}

void launch_add_positional_encoding(cudaStream_t stream, DataType type, const void* x, void* y,
                                    int seq_len, int batch, int dim, float scale) {
  if (seq_len <= 0 || batch <= 0 || dim <= 0) return;
  with_storage_type(type, "add_positional_encoding", [&](auto tag) {
    using T = decltype(tag);
    with_row_packs<T>(dim, {x, y}, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      // About four packs a thread for each token: enough blocks to fill the GPU at the
      // benchmark's shapes, few enough that the table is computed a small number of times.
      const size_t packs = static_cast<size_t>(batch) * dim / kVec;
      const size_t per_block = static_cast<size_t>(kBlockSize) * 4;
      const unsigned blocks = static_cast<unsigned>(
          std::min<size_t>((packs + per_block - 1) / per_block, kMaxGridBlocks));
      const size_t table_bytes = static_cast<size_t>(dim) * sizeof(float);
      positional_encoding_kernel<T, kVec>
          <<<dim3(blocks, static_cast<unsigned>(seq_len)), kBlockSize, table_bytes, stream>>>(
              static_cast<const T*>(x), static_cast<T*>(y), batch, dim, scale);
    });
  });
  DPB_CUDA_CHECK_LAUNCH(positional_encoding_kernel);
}

}  // namespace dpbench::cuda_kernels
