// CudaBackend's Transformer ops: a linear layer's epilogue and the positional encoding
// (cuda_kernels_transformer.cu), the feed-forward activations' backward (the ReLU kernel with
// dropout's scale, GELU's: cuda_kernels_elementwise.cu), layer norm (cuda_kernels_layer_norm.cu) and flash attention
// (cuda_kernels_attention.cu). Arguments are checked here, on the host, since a kernel cannot
// throw; everything else is asynchronous on the backend's stream and allocates nothing, so a step
// made of these ops can be captured as a CUDA graph.
#include <cuda_runtime.h>

#include <string>

#include "engine/backend/counter_random.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

std::string describe(const AttentionGeometry& g) {
  return "batch " + std::to_string(g.batch) + ", heads " + std::to_string(g.heads) + ", query_len " +
         std::to_string(g.query_len) + ", key_len " + std::to_string(g.key_len) + ", head_dim " +
         std::to_string(g.head_dim);
}

// What the kernels cannot handle or the semantics do not define, said before anything runs.
void check_attention(const AttentionGeometry& g, const int32_t* step, const char* op) {
  const std::string where = std::string("CudaBackend::") + op + " (" + describe(g) + "): ";
  if (g.batch < 0 || g.heads < 0 || g.query_len < 0 || g.key_len < 0) {
    throw RuntimeError(where + "negative size");
  }
  if (g.head_dim < 1 || g.head_dim > 128) throw RuntimeError(where + "head_dim must lie in [1, 128]");
  if (g.causal && g.query_len != g.key_len) throw RuntimeError(where + "causal needs query_len == key_len");
  if (g.batch > 65535 || g.heads > 65535) throw RuntimeError(where + "batch and heads must be at most 65535");
  const int model_dim = g.model_dim();
  if (g.q_stride < model_dim || g.k_stride < model_dim || g.v_stride < model_dim || g.o_stride < model_dim) {
    throw RuntimeError(where + "a row stride below heads * head_dim");
  }
  if (g.dropout_rate < 0.0f || g.dropout_rate >= 1.0f) throw RuntimeError(where + "dropout rate outside [0, 1)");
  if (g.dropout_rate > 0.0f && step == nullptr) throw RuntimeError(where + "dropout needs the step counter");
}

}  // namespace

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

void CudaBackend::attention_forward(const AttentionGeometry& g, const void* q, const void* k, const void* v,
                                    const int32_t* key_lengths, const int32_t* step, void* o, float* lse,
                                    void* workspace) {
  check_attention(g, step, "attention_forward");
  cuda_kernels::launch_attention_forward(stream_, g, tf32(), q, k, v, key_lengths, step, o, lse);
}

void CudaBackend::attention_backward(const AttentionGeometry& g, const void* q, const void* k, const void* v,
                                     const void* o, const void* d_o, const float* lse,
                                     const int32_t* key_lengths, const int32_t* step, void* dq, void* dk,
                                     void* dv, void* workspace) {
  check_attention(g, step, "attention_backward");
  cuda_kernels::launch_attention_backward(stream_, g, tf32(), q, k, v, o, d_o, lse, key_lengths, step, dq, dk, dv,
                                          workspace);
}

size_t CudaBackend::attention_workspace_bytes(const AttentionGeometry& g) {
  return cuda_kernels::attention_workspace_bytes(g);
}

}  // namespace dpbench
