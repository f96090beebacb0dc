// Shapes of the Transformer's ops: multi-head scaled-dot-product attention over sequence-major
// activations, and the dropout of its probabilities.
//
// Layout (the sequence models' layout, engine/backend/rnn_geometry.h): token t of sentence b is row
// t * batch + b of a row-major matrix; head h of a query, key, value or output row is columns
// [h * head_dim, (h + 1) * head_dim) from the tensor's pointer. Rows are `*_stride` elements
// apart, so Q, K and V can be column slices of one packed projection (rows of 3 * d_model).
//
// For query i and key j of sentence b and head h:
//   s_ij = scale * q_i . k_j;  masked when j >= key_lengths[b] or (causal and j > i): p_ij = 0
//   p_ij = exp(s_ij - m_i) / l_i over the unmasked j (m_i the row's maximum, l_i its sum)
//   with dropout: p'_ij = keep_ij ? p_ij / (1 - rate) : 0,
//     keep_ij = dropout_keeps(seed, *step, index_ij, rate) (engine/backend/counter_random.h),
//     index_ij = (((first_sample + b) * heads + h) * query_len + i) * key_len + j
//   o_i = sum_j p'_ij v_j
// and the row's log-sum-exp lse_i = m_i + log l_i is kept for the backward pass, which rebuilds
// p from it instead of storing the (batch, heads, query_len, key_len) matrix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>

#include "engine/data_type.h"

namespace dpbench {

// The widest head the CUDA kernels take (a head's row of q, k and v is held in registers).
inline constexpr int kMaxAttentionHeadDim = 128;

struct AttentionGeometry {
  int batch = 1;
  int heads = 1;
  int query_len = 1;  // Tq
  int key_len = 1;    // Tk (keys and values)
  int head_dim = 1;
  DataType type = DataType::f32;  // of q, k, v, o and their gradients; arithmetic is fp32
  bool causal = false;            // query i sees keys j <= i (needs query_len == key_len)
  float scale = 1.0f;             // usually 1 / sqrt(head_dim)
  // Elements between consecutive rows (tokens) of each tensor; the gradients dq, dk, dv, do share
  // the strides of q, k, v, o.
  int q_stride = 1, k_stride = 1, v_stride = 1, o_stride = 1;
  // Dropout of the probabilities (0: none), placed by global sentence index as dropout_forward is.
  float dropout_rate = 0.0f;
  uint64_t dropout_seed = 0;
  uint64_t first_sample = 0;  // this replica's first sentence in the global batch

  int model_dim() const { return heads * head_dim; }
  // What a prepared plan of this attention depends on: every field but the scale (a value each
  // call passes) and the dropout's seed and first sample (likewise per call).
  auto plan_fields() const {
    return std::tie(batch, heads, query_len, key_len, head_dim, type, causal, q_stride, k_stride, v_stride,
                    o_stride, dropout_rate);
  }
  // (batch, heads, query_len) floats: the log-sum-exp of each query row.
  size_t lse_count() const {
    return static_cast<size_t>(batch) * heads * query_len;
  }
};

}  // namespace dpbench
