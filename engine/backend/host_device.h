// DPB_HOST_DEVICE marks a small function that both backends must compute alike: compiled for host
// and device under nvcc, a plain inline function elsewhere, so the reference backend (the oracle)
// and the CUDA kernels call one definition instead of two copies that could drift apart.
#pragma once

#if defined(__CUDACC__)
#define DPB_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define DPB_HOST_DEVICE inline
#endif
