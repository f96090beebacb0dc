// Device-side helpers shared by the kernel files: launch geometry for grid-stride loops, the
// dynamic shared memory opt-in, and a deterministic block-wide reduction.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "engine/cuda/cuda_check.h"

namespace dpbench::cuda_kernels {

constexpr int kBlockSize = 256;
// Enough blocks to fill any current GPU several times over; grid-stride loops cover the rest,
// and a cap keeps huge ranges from producing grids the hardware refuses.
constexpr size_t kMaxGridBlocks = 4096;

inline unsigned grid_for(size_t n, int block_size = kBlockSize) {
  const size_t blocks = (n + block_size - 1) / block_size;
  return static_cast<unsigned>(blocks < kMaxGridBlocks ? (blocks > 0 ? blocks : 1) : kMaxGridBlocks);
}

// Lets `kernel` launch with `bytes` of dynamic shared memory on the current device (the opt-in
// above 48 KiB; legal inside a graph capture, and repeated per launch since the setting is per
// device); false, setting nothing, where the device's blocks cannot have that much.
template <typename Kernel>
bool allow_dynamic_shared_memory(Kernel kernel, size_t bytes) {
  int device = 0, limit = 0;
  DPB_CUDA_CHECK(cudaGetDevice(&device));
  DPB_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<size_t>(limit)) return false;
  DPB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  return true;
}

// Grid-stride index range over [0, n): size_t, so ranges beyond 2^31 elements work.
#define DPB_GRID_STRIDE_LOOP(i, n)                                                      \
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<size_t>(blockDim.x) * gridDim.x)

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};

// Reduces `value` over the block and returns the result to every thread. The order of the
// additions depends only on blockDim, so results are bit-reproducible run to run.
// blockDim.x must be a multiple of 32 (at most 1024); `shared` holds 32 values.
// Ends with a barrier: shared memory and anything read before the call may be reused afterwards.
template <typename T, typename Op>
__device__ T block_reduce(T value, Op op, T identity, T* shared) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) {
    value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
  }
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  if (warp == 0) {
    const unsigned num_warps = blockDim.x / 32;
    value = lane < num_warps ? shared[lane] : identity;
    for (int offset = 16; offset > 0; offset /= 2) {
      value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
    }
    if (lane == 0) shared[0] = value;
  }
  __syncthreads();
  const T result = shared[0];
  __syncthreads();
  return result;
}

}  // namespace dpbench::cuda_kernels
