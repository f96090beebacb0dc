// CudaBackend's Transformer ops: a linear layer's epilogue and the positional encoding
// (cuda_kernels_transformer.cu), the feed-forward activations' backward (the ReLU kernel with
// dropout's scale, GELU's: cuda_kernels_elementwise.cu) and layer norm (cuda_kernels_layer_norm.cu);
// attention has its own file (cuda_attention_ops.cpp). Arguments are checked here, on the host,
// since a kernel cannot throw; everything else is asynchronous on the backend's stream and
// allocates nothing, so a step made of these ops can be captured as a CUDA graph.
#include <cuda_runtime.h>

#include <string>

#include "engine/backend/counter_random.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/errors.h"

namespace dpbench {

void CudaBackend::add_row_bias(DataType type, void* y, const float* bias, int rows, int cols,
                               const RowBiasEpilogue& then) {
  check_row_bias_epilogue(then, y, "CudaBackend::add_row_bias");
  cuda_kernels::launch_row_bias_epilogue(stream_, type, y, bias, rows, cols, then);
}

void CudaBackend::relu_dropout_backward(DataType type, const void* y, const void* dy, void* dx, size_t n,
                                        float rate) {
  cuda_kernels::launch_relu_backward(stream_, type, y, dy, dx, n, dropout_keep_scale(rate));
}

void CudaBackend::gelu_backward(DataType type, const void* x, const void* dy, void* dx, size_t n) {
  cuda_kernels::launch_gelu_backward(stream_, type, x, dy, dx, n);
}

void CudaBackend::layer_norm_forward(DataType type, const void* x, const float* gamma, const float* beta,
                                     int rows, int cols, float epsilon, void* y, float* saved_mean,
                                     float* saved_inv_std) {
  cuda_kernels::launch_layer_norm_forward(stream_, type, x, gamma, beta, rows, cols, epsilon, y, saved_mean,
                                          saved_inv_std);
}

void CudaBackend::layer_norm_backward(DataType type, const void* x, const void* dy, const float* gamma,
                                      const float* saved_mean, const float* saved_inv_std, int rows, int cols,
                                      void* dx, float* dgamma, float* dbeta, void* workspace, bool accumulate) {
  if (accumulate && dx == dy)
    throw RuntimeError("CudaBackend::layer_norm_backward: accumulating into dx needs dx apart from dy");
  cuda_kernels::launch_layer_norm_backward(stream_, type, x, dy, gamma, saved_mean, saved_inv_std, rows, cols,
                                           dx, dgamma, dbeta, workspace, accumulate);
}

size_t CudaBackend::layer_norm_workspace_bytes(int rows, int cols) {
  return cuda_kernels::layer_norm_workspace_bytes(rows, cols);
}

void CudaBackend::add_positional_encoding(DataType type, const void* x, void* y, int seq_len, int batch,
                                          int dim, float scale) {
  if (seq_len > 65535) {
    throw RuntimeError("CudaBackend::add_positional_encoding: seq_len " + std::to_string(seq_len) +
                       " (at most 65535)");
  }
  if (static_cast<size_t>(dim) * sizeof(float) > 48 * 1024) {
    throw RuntimeError("CudaBackend::add_positional_encoding: dim " + std::to_string(dim) +
                       " (the table of a position must fit 48 KB of shared memory)");
  }
  cuda_kernels::launch_add_positional_encoding(stream_, type, x, y, seq_len, batch, dim, scale);
}

}  // namespace dpbench
