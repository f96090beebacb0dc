// Kernels of the Transformer's row ops: layer normalisation (forward, backward with its
// deterministic dgamma/dbeta) and the sinusoidal positional encoding. (The row bias with ReLU is
// the NHWC channel bias of cuda_kernels_cnn.cu; attention is cuda_kernels_attention.cu.)
// Kernels first, launchers after. Rows hold fp32, fp16 or bf16 (cuda_packs.cuh); the arithmetic
// and every statistic are fp32, a 16-bit result is rounded once as it is stored. All are bound
// by memory, so rows move in 16-byte packs where the row length and the pointers allow; nothing
// allocates, synchronises or uses atomics, so every launcher can be captured in a graph and gives
// the same bits on every run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"
#include "engine/cuda/cuda_packs.cuh"

namespace dpbench::cuda_kernels {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block of the row kernels: one row per warp

// Rows of layer_norm_backward's dgamma/dbeta partial sums: the partition depends on the shape
// alone, so the final sums add the same partials in the same order on every GPU and run.
constexpr int kRowsPerPart = 128;
constexpr int kPartColumns = 32;  // columns per block of the partial sums: a warp reads them
constexpr int kPartLanes = 8;     // rows of a part summed in parallel

// Sum over a warp by butterfly: every lane ends with the same bits (each step adds the same two
// values, in either order), so lanes may branch on the result alike.
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// ---- layer norm ------------------------------------------------------------------------------
// One warp per row (blockDim (32, kRowsPerBlock)), the row read from global memory in every pass
// (a row of a few thousand columns stays in L1/L2 between passes, and nothing caps its length).
// Statistics by two passes, mean then the mean of squared deviations: no cancellation, unlike
// E[x^2] - E[x]^2. kVec divides cols and the rows are aligned for it (the launcher checks).

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
    const float inv_std = 1.0f / sqrtf(warp_sum(squares) / static_cast<float>(cols) + epsilon);
    for (int q = threadIdx.x; q < packs; q += 32) {
      const Pack<T, kVec> v = load_pack<kVec>(in, q);
      float result[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const int c = q * kVec + k;
        result[k] = gamma[c] * ((element(v, k) - mean) * inv_std) + beta[c];
      }
      store_pack<kVec>(out, q, round_pack<T, kVec>(result));
    }
    if (threadIdx.x == 0) {
      saved_mean[row] = mean;
      saved_inv_std[row] = inv_std;
    }
  }
}

// dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, xhat = (x - mean) * inv_std.
// dx may alias dy: every element is read and written by one lane only, and its last read comes
// before its write.
template <typename T, int kVec>
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
        gx_sum += g * ((element(xs, k) - mean) * inv_std);
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
        const float xhat = (element(xs, k) - mean) * inv_std;
        result[k] = inv_std * (g - g_mean - xhat * gx_mean);
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
                                           const float* saved_inv_std, int rows, int cols,
                                           float* partial_dgamma, float* partial_dbeta) {
  __shared__ float lanes_dgamma[kPartLanes][kPartColumns + 1];
  __shared__ float lanes_dbeta[kPartLanes][kPartColumns + 1];
  const int c = blockIdx.x * kPartColumns + threadIdx.x;
  const int first = blockIdx.y * kRowsPerPart;
  const int last = min(rows, first + kRowsPerPart);
  float dgamma = 0.0f, dbeta = 0.0f;
  if (c < cols) {
    for (int row = first + threadIdx.y; row < last; row += kPartLanes) {
      const size_t at = static_cast<size_t>(row) * cols + c;
      const float d = load_widened(dy + at);
      dgamma += d * ((load_widened(x + at) - saved_mean[row]) * saved_inv_std[row]);
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

// dgamma[c], dbeta[c] = the parts' partial sums of column c, added in part order.
__global__ void layer_norm_sum_parts_kernel(const float* partial_dgamma, const float* partial_dbeta,
                                            int parts, int cols, float* dgamma, float* dbeta) {
  DPB_GRID_STRIDE_LOOP(i, static_cast<size_t>(cols)) {
    float total_dgamma = 0.0f, total_dbeta = 0.0f;
    for (int p = 0; p < parts; ++p) {
      total_dgamma += partial_dgamma[static_cast<size_t>(p) * cols + i];
      total_dbeta += partial_dbeta[static_cast<size_t>(p) * cols + i];
    }
    dgamma[i] = total_dgamma;
    dbeta[i] = total_dbeta;
  }
}

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

// ---- launch helpers --------------------------------------------------------------------------

// Calls run(std::integral_constant<int, kVec>) with kVec the elements of a 16-byte pack of T
// where `length` splits into such packs and every pointer is aligned to 16 bytes, else 1.
template <typename T, typename Run>
void with_row_packs(int length, std::initializer_list<const void*> pointers, Run run) {
  constexpr int kWide = static_cast<int>(16 / sizeof(T));
  if (length % kWide == 0 && aligned_to(pointers, 16)) {
    run(std::integral_constant<int, kWide>{});
  } else {
    run(std::integral_constant<int, 1>{});
  }
}

unsigned row_blocks(int rows) {
  const size_t blocks = (static_cast<size_t>(rows) + kRowsPerBlock - 1) / kRowsPerBlock;
  return static_cast<unsigned>(std::max<size_t>(1, std::min(blocks, kMaxGridBlocks)));
}

int layer_norm_parts(int rows) { return (rows + kRowsPerPart - 1) / kRowsPerPart; }

}  // namespace

void launch_layer_norm_forward(cudaStream_t stream, DataType type, const void* x, const float* gamma,
                               const float* beta, int rows, int cols, float epsilon, void* y,
                               float* saved_mean, float* saved_inv_std) {
  if (rows <= 0 || cols <= 0) return;
  with_storage_type(type, "layer_norm_forward", [&](auto tag) {
    using T = decltype(tag);
    with_row_packs<T>(cols, {x, y}, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      layer_norm_forward_kernel<T, kVec><<<row_blocks(rows), dim3(32, kRowsPerBlock), 0, stream>>>(
          static_cast<const T*>(x), gamma, beta, rows, cols, epsilon, static_cast<T*>(y), saved_mean,
          saved_inv_std);
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
                                void* workspace) {
  if (cols <= 0) return;
  if (rows <= 0) {
    DPB_CUDA_CHECK(cudaMemsetAsync(dgamma, 0, sizeof(float) * cols, stream));
    DPB_CUDA_CHECK(cudaMemsetAsync(dbeta, 0, sizeof(float) * cols, stream));
    return;
  }
  const int parts = layer_norm_parts(rows);
  float* partial_dgamma = static_cast<float*>(workspace);  // (parts, cols)
  float* partial_dbeta = partial_dgamma + static_cast<size_t>(parts) * cols;
  with_storage_type(type, "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x);
    const T* dys = static_cast<const T*>(dy);
    // The partial sums first: they read dy, which dx may overwrite.
    const dim3 part_grid(static_cast<unsigned>((cols + kPartColumns - 1) / kPartColumns),
                         static_cast<unsigned>(parts));
    layer_norm_partials_kernel<T><<<part_grid, dim3(kPartColumns, kPartLanes), 0, stream>>>(
        xs, dys, saved_mean, saved_inv_std, rows, cols, partial_dgamma, partial_dbeta);
    DPB_CUDA_CHECK_LAUNCH(layer_norm_partials_kernel);
    layer_norm_sum_parts_kernel<<<grid_for(static_cast<size_t>(cols)), kBlockSize, 0, stream>>>(
        partial_dgamma, partial_dbeta, parts, cols, dgamma, dbeta);
    DPB_CUDA_CHECK_LAUNCH(layer_norm_sum_parts_kernel);
    with_row_packs<T>(cols, {x, dy, dx}, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      layer_norm_backward_dx_kernel<T, kVec><<<row_blocks(rows), dim3(32, kRowsPerBlock), 0, stream>>>(
          xs, dys, gamma, saved_mean, saved_inv_std, rows, cols, static_cast<T*>(dx));
    });
  });
  DPB_CUDA_CHECK_LAUNCH(layer_norm_backward_dx_kernel);
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
