// One family of check macros for CUDA, cuBLAS and cuDNN calls (NCCL's, which also name the rank,
// are in nccl_communicator.cpp). A failing call throws RuntimeError naming the call text,
// file:line, the device and the library's own message.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

namespace dpbench::cuda_detail {

[[noreturn]] void throw_library_error(const char* library, const char* call, int code,
                                      const char* message, const char* file, int line);
const char* cublas_status_text(cublasStatus_t status);

}  // namespace dpbench::cuda_detail

#define DPB_CUDA_CHECK(call)                                                                 \
  do {                                                                                       \
    cudaError_t dpb_status_ = (call);                                                        \
    if (dpb_status_ != cudaSuccess)                                                          \
      ::dpbench::cuda_detail::throw_library_error("CUDA", #call, static_cast<int>(dpb_status_), \
                                                  cudaGetErrorString(dpb_status_), __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: catches bad launch configurations at the launch site.
#define DPB_CUDA_CHECK_LAUNCH(kernel_name)                                                   \
  do {                                                                                       \
    cudaError_t dpb_status_ = cudaGetLastError();                                            \
    if (dpb_status_ != cudaSuccess)                                                          \
      ::dpbench::cuda_detail::throw_library_error("CUDA", "launch of " #kernel_name,         \
                                                  static_cast<int>(dpb_status_),             \
                                                  cudaGetErrorString(dpb_status_), __FILE__, __LINE__); \
  } while (0)

#define DPB_CUBLAS_CHECK(call)                                                               \
  do {                                                                                       \
    cublasStatus_t dpb_status_ = (call);                                                     \
    if (dpb_status_ != CUBLAS_STATUS_SUCCESS)                                                \
      ::dpbench::cuda_detail::throw_library_error(                                           \
          "cuBLAS", #call, static_cast<int>(dpb_status_),                                    \
          ::dpbench::cuda_detail::cublas_status_text(dpb_status_), __FILE__, __LINE__);      \
  } while (0)

#define DPB_CUDNN_CHECK(call)                                                                \
  do {                                                                                       \
    cudnnStatus_t dpb_status_ = (call);                                                      \
    if (dpb_status_ != CUDNN_STATUS_SUCCESS)                                                 \
      ::dpbench::cuda_detail::throw_library_error("cuDNN", #call, static_cast<int>(dpb_status_), \
                                                  cudnnGetErrorString(dpb_status_), __FILE__, __LINE__); \
  } while (0)
