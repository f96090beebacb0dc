// CudaBackend's Transformer ops: the row bias with ReLU (the NHWC channel-bias kernel of
// cuda_kernels_cnn.cu), layer norm and the positional encoding (cuda_kernels_transformer.cu).
// Arguments are checked here, on the host, since a kernel cannot throw; everything else is
// asynchronous on the backend's stream and allocates nothing, so a step made of these ops can be
// captured as a CUDA graph.
#include <cuda_runtime.h>

#include <string>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/errors.h"

namespace dpbench {

void CudaBackend::add_row_bias(DataType type, void* y, const float* bias, int rows, int cols, bool relu) {
  if (rows <= 0 || cols <= 0) return;
  cuda_kernels::ChannelLayout layout;
  layout.outer = static_cast<size_t>(rows);
  layout.channels = cols;
  layout.inner = 1;
  cuda_kernels::launch_add_channel_bias(stream_, type, y, bias, layout, relu);
}

void CudaBackend::layer_norm_forward(DataType type, const void* x, const float* gamma, const float* beta,
                                     int rows, int cols, float epsilon, void* y, float* saved_mean,
                                     float* saved_inv_std) {
  cuda_kernels::launch_layer_norm_forward(stream_, type, x, gamma, beta, rows, cols, epsilon, y, saved_mean,
                                          saved_inv_std);
}

void CudaBackend::layer_norm_backward(DataType type, const void* x, const void* dy, const float* gamma,
                                      const float* saved_mean, const float* saved_inv_std, int rows, int cols,
                                      void* dx, float* dgamma, float* dbeta, void* workspace) {
  cuda_kernels::launch_layer_norm_backward(stream_, type, x, dy, gamma, saved_mean, saved_inv_std, rows, cols,
                                           dx, dgamma, dbeta, workspace);
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
