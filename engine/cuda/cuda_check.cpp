// The one place where a failed CUDA-family call becomes a RuntimeError with a readable message.
#include "engine/cuda/cuda_check.h"

#include <cstring>
#include <sstream>
#include <string>

#include "engine/errors.h"

namespace dpbench::cuda_detail {
namespace {

const char* basename_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

}  // namespace

void throw_library_error(const char* library, const char* call, int code, const char* message,
                         const char* file, int line) {
  // The device helps most on multi-GPU runs; if even this query fails, say so and go on.
  int device = -1;
  const bool device_known = cudaGetDevice(&device) == cudaSuccess;
  std::ostringstream text;
  text << library << " call `" << call << "` failed at " << basename_of(file) << ':' << line
       << " on device ";
  if (device_known) {
    text << device;
  } else {
    text << '?';
  }
  text << ": " << (message != nullptr ? message : "unknown error") << " (code " << code << ')';
  throw RuntimeError(text.str());
}

const char* cublas_status_text(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS not initialised (no driver or context?)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value (bad size or leading dimension)";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "feature not supported by this GPU architecture";
    case CUBLAS_STATUS_MAPPING_ERROR: return "GPU memory mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal cuBLAS error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "operation not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "license error";
    default: return cublasGetStatusString(status);
  }
}

}  // namespace dpbench::cuda_detail
