// ReferenceBackend's Transformer ops: the row bias of a linear layer with its epilogue, GELU's
// backward, layer normalisation, the sinusoidal positional encoding and multi-head attention
// (engine/backend/attention_geometry.h), written as plain loops with every sum in double: the
// oracle the CUDA versions are tested against.
// Buffers of a 16-bit type are read as floats and each output is rounded once to that type;
// biases, gamma, beta, statistics and lse stay fp32. None of these ops needs a workspace here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend/counter_random.h"
#include "engine/backend/gelu.h"
#include "engine/backend/linear_in_ops.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "engine/reference/reference_storage.h"

namespace dpbench {
namespace {

using reference_detail::with_type;

// ---- attention helpers --------------------------------------------------------------------------

void check_attention_geometry(const AttentionGeometry& g, const char* op) {
  const int d = g.model_dim();
  const bool valid = g.batch >= 0 && g.heads >= 1 && g.head_dim >= 1 && g.query_len >= 1 &&
                     g.key_len >= 1 && g.q_stride >= d && g.k_stride >= d && g.v_stride >= d &&
                     g.o_stride >= d && g.dropout_rate >= 0.0f && g.dropout_rate < 1.0f;
  if (!valid) {
    throw RuntimeError(std::string(op) + ": invalid attention geometry (batch " + std::to_string(g.batch) +
                       ", heads " + std::to_string(g.heads) + ", head_dim " + std::to_string(g.head_dim) +
                       ", lengths " + std::to_string(g.query_len) + "x" + std::to_string(g.key_len) +
                       ", dropout " + std::to_string(g.dropout_rate) + ")");
  }
  if (g.causal && g.query_len != g.key_len) {
    throw RuntimeError(std::string(op) + ": causal attention needs query_len == key_len, not " +
                       std::to_string(g.query_len) + " and " + std::to_string(g.key_len));
  }
}

// Where element (t, d) of one (sentence, head) slice of a sequence-major tensor lies: row
// t * batch + b, column h * head_dim + d, rows `stride` elements apart.
struct HeadSlice {
  size_t first = 0, row_step = 0;
  size_t at(int t, int d) const { return first + static_cast<size_t>(t) * row_step + d; }
};

HeadSlice head_slice(const AttentionGeometry& g, int stride, int b, int h) {
  return HeadSlice{static_cast<size_t>(b) * stride + static_cast<size_t>(h) * g.head_dim,
                   static_cast<size_t>(g.batch) * stride};
}

// The (length, head_dim) slice as contiguous floats, so the inner loops read plain arrays.
void gather(DataType type, const void* data, const HeadSlice& slice, int length, int head_dim,
            std::vector<float>& out) {
  out.resize(static_cast<size_t>(length) * head_dim);
  for (int t = 0; t < length; ++t) {
    float* row = out.data() + static_cast<size_t>(t) * head_dim;
    for (int d = 0; d < head_dim; ++d) row[d] = load_as_float(type, data, slice.at(t, d));
  }
}

// Rounds each sum once into the slice; the tensor's other columns (another head, or another of
// q, k, v in a packed buffer) are left alone.
void scatter(DataType type, const std::vector<double>& values, const HeadSlice& slice, int length,
             int head_dim, void* data) {
  for (int t = 0; t < length; ++t) {
    const double* row = values.data() + static_cast<size_t>(t) * head_dim;
    for (int d = 0; d < head_dim; ++d) store_from_float(type, data, slice.at(t, d), static_cast<float>(row[d]));
  }
}

// Query i of sentence b sees keys [0, visible_keys): both masks cut a prefix of the keys.
int visible_keys(const AttentionGeometry& g, const int32_t* key_lengths, int b, int i) {
  int count = key_lengths != nullptr ? std::clamp(key_lengths[b], 0, g.key_len) : g.key_len;
  if (g.causal) count = std::min(count, i + 1);
  return count;
}

// The factor dropout puts on p_ij: 1 without dropout, else 0 or 1 / (1 - rate), the mask keyed by
// the global sentence index so that any sharding of the batch draws the same one. `step` is read
// only with dropout (the runner passes none otherwise).
class ProbabilityDropout {
 public:
  ProbabilityDropout(const AttentionGeometry& g, const int32_t* step)
      : g_(g), step_(g.dropout_rate > 0.0f ? *step : 0),
        kept_scale_(1.0 / static_cast<double>(1.0f - g.dropout_rate)) {}
  double factor(int b, int h, int i, int j) const {
    if (!(g_.dropout_rate > 0.0f)) return 1.0;
    const uint64_t index =
        (((g_.first_sample + static_cast<uint64_t>(b)) * g_.heads + h) * g_.query_len + i) * g_.key_len + j;
    return dropout_keeps(g_.dropout_seed, step_, index, g_.dropout_rate) ? kept_scale_ : 0.0;
  }

 private:
  const AttentionGeometry& g_;
  int32_t step_;
  double kept_scale_;
};

// scale * q_i . k_j over one head's gathered rows.
double score(const AttentionGeometry& g, const std::vector<float>& q, int i, const std::vector<float>& k, int j) {
  const float* qi = q.data() + static_cast<size_t>(i) * g.head_dim;
  const float* kj = k.data() + static_cast<size_t>(j) * g.head_dim;
  double dot = 0.0;
  for (int d = 0; d < g.head_dim; ++d) dot += static_cast<double>(qi[d]) * kj[d];
  return static_cast<double>(g.scale) * dot;
}

}  // namespace

// ---- linear layers and their row bias -----------------------------------------------------------

void ReferenceBackend::linear_forward(DataType type, const void* x, const void* weights, const float* bias,
                                      const void* bias_copy, int rows, int in, int out, void* y,
                                      const RowBiasEpilogue& then) {
  if (!linear_forward_fused(type, rows, in, out, then)) {
    linear_forward_in_two_ops(*this, type, x, weights, bias, rows, in, out, y, then);
    return;
  }
  // As one fused matmul: the product kept in fp32, the bias copy (the layer's type) and the
  // residual added to it, each output rounded once; GELU of the unrounded pre-activation.
  check_row_bias_epilogue(then, y, "ReferenceBackend::linear_forward");
  std::vector<float> product(static_cast<size_t>(rows) * out);
  gemm(Transpose::no, Transpose::yes, rows, out, in, 1.0f, type, x, in, weights, in, 0.0f, DataType::f32,
       product.data(), out);
  with_type(type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t at = 0; at < product.size(); ++at) {
      const float u = product[at] + load_as_float(T, bias_copy, at % static_cast<size_t>(out));
      if (then.residual != nullptr) {
        store_from_float(T, then.out, at, load_as_float(T, then.residual, at) + u);
        continue;
      }
      store_from_float(T, y, at, u);
      if (then.gelu) store_from_float(T, then.activated, at, gelu_tanh(u));
    }
  });
}

// What CudaBackend's cuBLASLt path takes (CublasLtLinear::forward_takes), when the tests ask.
bool ReferenceBackend::linear_forward_fused(DataType, int, int, int, const RowBiasEpilogue& then) {
  return fuse_linear_epilogues_ && !then.relu && then.dropout.rate <= 0.0f;
}

void ReferenceBackend::linear_backward(DataType type, const void* x, const void* dy, const void* weights, int rows,
                                       int in, int out, float* dweights, float* dbias, void* dx, bool accumulate,
                                       const GeluInputGradient& gelu) {
  check_linear_backward(dx, accumulate, gelu, "ReferenceBackend::linear_backward");
  linear_backward_in_ops(*this, type, x, dy, weights, rows, in, out, dweights, dbias, dx, accumulate, gelu);
}

int ReferenceBackend::linear_backward_launches(DataType, int, int, int, bool bias, bool input_gradient, bool gelu) {
  return linear_weight_gradient_in_ops_launches(bias) + linear_input_gradient_in_ops_launches(input_gradient, gelu);
}

void ReferenceBackend::add_row_bias(DataType type, void* y, const float* bias, int rows, int cols,
                                    const RowBiasEpilogue& then) {
  check_row_bias_epilogue(then, y, "ReferenceBackend::add_row_bias");
  const DropoutDraw& dropout = then.dropout;
  const bool dropping = dropout.rate > 0.0f;
  const uint64_t stream_key = dropping ? dropout_stream_key(dropout.seed, *dropout.step) : 0;
  const uint32_t threshold = dropout_threshold(dropout.rate);
  const float keep_scale = dropout_keep_scale(dropout.rate);
  with_type(type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t r = 0; r < static_cast<size_t>(std::max(rows, 0)); ++r) {
      for (int c = 0; c < cols; ++c) {
        const size_t at = r * cols + c;
        // Rounded where the separate ops store: after the bias (and ReLU), after the dropout.
        // The ReLU's comparison is relu_forward's, so the fused op equals the ops in sequence.
        float v = round_to(T, load_as_float(T, y, at) + bias[c]);
        if (then.relu && !(v > 0.0f)) v = 0.0f;
        if (dropping) {
          v = dropout_keeps_keyed(stream_key, dropout.first_index + at, threshold) ? round_to(T, v * keep_scale)
                                                                                   : 0.0f;
        }
        if (then.residual != nullptr) {
          store_from_float(T, then.out, at, load_as_float(T, then.residual, at) + v);
        } else {
          store_from_float(T, y, at, v);
        }
        if (then.gelu) store_from_float(T, then.activated, at, gelu_tanh(v));
      }
    }
  });
}

void ReferenceBackend::relu_dropout_backward(DataType type, const void* y, const void* dy, void* dx, size_t n,
                                             float rate) {
  const float keep_scale = dropout_keep_scale(rate);
  with_type(type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t i = 0; i < n; ++i) {
      store_from_float(T, dx, i, load_as_float(T, y, i) > 0.0f ? load_as_float(T, dy, i) * keep_scale : 0.0f);
    }
  });
}

void ReferenceBackend::gelu_backward(DataType type, const void* x, const void* dy, void* dx, size_t n) {
  with_type(type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t i = 0; i < n; ++i) {
      store_from_float(T, dx, i, load_as_float(T, dy, i) * gelu_tanh_derivative(load_as_float(T, x, i)));
    }
  });
}

// ---- layer normalisation ------------------------------------------------------------------------

void ReferenceBackend::layer_norm_forward(DataType type, const void* x, const float* gamma, const float* beta,
                                          int rows, int cols, float epsilon, void* y, float* saved_mean,
                                          float* saved_inv_std) {
  with_type(type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (int r = 0; r < rows; ++r) {
      const size_t row = static_cast<size_t>(r) * cols;  // (cols)
      double mean = 0.0;
      for (int c = 0; c < cols; ++c) mean += load_as_float(T, x, row + c);
      mean /= cols;
      // Two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2, which cancels badly.
      double variance = 0.0;
      for (int c = 0; c < cols; ++c) {
        const double deviation = load_as_float(T, x, row + c) - mean;
        variance += deviation * deviation;
      }
      const double inv_std = 1.0 / std::sqrt(variance / cols + epsilon);  // biased variance
      saved_mean[r] = static_cast<float>(mean);
      saved_inv_std[r] = static_cast<float>(inv_std);
      for (int c = 0; c < cols; ++c) {
        const double value = double(gamma[c]) * (load_as_float(T, x, row + c) - mean) * inv_std + beta[c];
        store_from_float(T, y, row + c, static_cast<float>(value));
      }
    }
  });
}

void ReferenceBackend::layer_norm_backward(DataType type, const void* x, const void* dy, const float* gamma,
                                           const float* saved_mean, const float* saved_inv_std, int rows,
                                           int cols, void* dx, float* dgamma, float* dbeta, void* /*workspace*/,
                                           bool accumulate) {
  std::vector<double> dgamma_sum(static_cast<size_t>(std::max(cols, 0)), 0.0);
  std::vector<double> dbeta_sum(dgamma_sum.size(), 0.0);
  std::vector<double> xhat(dgamma_sum.size()), g(dgamma_sum.size());  // one row's
  with_type(type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (int r = 0; r < rows; ++r) {
      const size_t row = static_cast<size_t>(r) * cols;
      const double mean = saved_mean[r], inv_std = saved_inv_std[r];
      // The whole row of dy is read before any of its dx is written: dx may alias dy.
      double sum_g = 0.0, sum_g_xhat = 0.0;
      for (int c = 0; c < cols; ++c) {
        const double d = load_as_float(T, dy, row + c);
        xhat[c] = (load_as_float(T, x, row + c) - mean) * inv_std;
        g[c] = d * gamma[c];
        sum_g += g[c];
        sum_g_xhat += g[c] * xhat[c];
        dgamma_sum[c] += d * xhat[c];
        dbeta_sum[c] += d;
      }
      for (int c = 0; c < cols; ++c) {
        const float value = static_cast<float>(inv_std / cols * (cols * g[c] - sum_g - xhat[c] * sum_g_xhat));
        store_from_float(T, dx, row + c, accumulate ? load_as_float(T, dx, row + c) + value : value);
      }
    }
  });
  for (int c = 0; c < cols; ++c) {
    dgamma[c] = static_cast<float>(dgamma_sum[c]);
    dbeta[c] = static_cast<float>(dbeta_sum[c]);
  }
}

size_t ReferenceBackend::layer_norm_workspace_bytes(int, int) { return 0; }

// ---- positional encoding ------------------------------------------------------------------------

void ReferenceBackend::add_positional_encoding(DataType type, const void* x, void* y, int seq_len, int batch,
                                               int dim, float scale) {
  // Column c's angular frequency 10000^(-2i / dim), i = c / 2: columns 2i and 2i + 1 share it.
  std::vector<double> frequency(static_cast<size_t>(std::max(dim, 0)));
  for (int c = 0; c < dim; ++c) frequency[c] = std::pow(10000.0, -static_cast<double>(c - c % 2) / dim);
  with_type(type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (int t = 0; t < seq_len; ++t) {
      for (int b = 0; b < batch; ++b) {
        const size_t row = (static_cast<size_t>(t) * batch + b) * dim;  // (dim)
        for (int c = 0; c < dim; ++c) {
          const double angle = t * frequency[c];
          const double encoding = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
          // Element by element, each read just before its write: y may alias x.
          const double value = static_cast<double>(load_as_float(T, x, row + c)) * scale + encoding;
          store_from_float(T, y, row + c, static_cast<float>(value));
        }
      }
    }
  });
}

// ---- attention ----------------------------------------------------------------------------------

void ReferenceBackend::attention_forward(const AttentionGeometry& g, const void* q, const void* k, const void* v,
                                         const int32_t* key_lengths, const int32_t* step, void* o, float* lse,
                                         void* /*workspace*/) {
  check_attention_geometry(g, "attention_forward");
  const ProbabilityDropout dropout(g, step);
  const int D = g.head_dim;
  std::vector<float> q_head, k_head, v_head;  // (Tq, D), (Tk, D), (Tk, D)
  std::vector<double> o_head, s(static_cast<size_t>(g.key_len));  // (Tq, D); one row's scores
  for (int b = 0; b < g.batch; ++b) {
    for (int h = 0; h < g.heads; ++h) {
      gather(g.type, q, head_slice(g, g.q_stride, b, h), g.query_len, D, q_head);
      gather(g.type, k, head_slice(g, g.k_stride, b, h), g.key_len, D, k_head);
      gather(g.type, v, head_slice(g, g.v_stride, b, h), g.key_len, D, v_head);
      o_head.assign(static_cast<size_t>(g.query_len) * D, 0.0);
      for (int i = 0; i < g.query_len; ++i) {
        float& row_lse = lse[(static_cast<size_t>(b) * g.heads + h) * g.query_len + i];
        const int visible = visible_keys(g, key_lengths, b, i);
        if (visible == 0) {  // nothing to attend to: o stays 0, and the backward skips the row
          row_lse = -std::numeric_limits<float>::infinity();
          continue;
        }
        double row_max = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < visible; ++j) {
          s[j] = score(g, q_head, i, k_head, j);
          row_max = std::max(row_max, s[j]);
        }
        double sum = 0.0;  // l_i, the exponentials shifted by the maximum so none overflows
        for (int j = 0; j < visible; ++j) sum += std::exp(s[j] - row_max);
        row_lse = static_cast<float>(row_max + std::log(sum));
        double* o_row = o_head.data() + static_cast<size_t>(i) * D;
        for (int j = 0; j < visible; ++j) {
          const double p = std::exp(s[j] - row_max) / sum * dropout.factor(b, h, i, j);
          if (p == 0.0) continue;
          const float* v_row = v_head.data() + static_cast<size_t>(j) * D;
          for (int d = 0; d < D; ++d) o_row[d] += p * v_row[d];
        }
      }
      scatter(g.type, o_head, head_slice(g, g.o_stride, b, h), g.query_len, D, o);
    }
  }
}

// Differentiates exactly the function attention_forward computes, with p_ij rebuilt as
// exp(s_ij - lse_i). D_i = sum_j p_ij dP_ij equals rowsum(dO * O) in exact arithmetic; it is
// taken from p and dP rather than from the stored o so that a rounded 16-bit o costs the oracle
// nothing, which is why `o` goes unused here.
void ReferenceBackend::attention_backward(const AttentionGeometry& g, const void* q, const void* k, const void* v,
                                          const void* /*o*/, const void* d_o, const float* lse,
                                          const int32_t* key_lengths, const int32_t* step, void* dq, void* dk,
                                          void* dv, void* /*workspace*/) {
  check_attention_geometry(g, "attention_backward");
  const ProbabilityDropout dropout(g, step);
  const int D = g.head_dim;
  const double scale = g.scale;
  std::vector<float> q_head, k_head, v_head, do_head;  // (Tq, D), (Tk, D), (Tk, D), (Tq, D)
  std::vector<double> dq_head, dk_head, dv_head;       // the same shapes, summed in double
  std::vector<double> p(static_cast<size_t>(g.key_len)), dp(p.size());  // one row's p_ij and dP_ij
  for (int b = 0; b < g.batch; ++b) {
    for (int h = 0; h < g.heads; ++h) {
      gather(g.type, q, head_slice(g, g.q_stride, b, h), g.query_len, D, q_head);
      gather(g.type, k, head_slice(g, g.k_stride, b, h), g.key_len, D, k_head);
      gather(g.type, v, head_slice(g, g.v_stride, b, h), g.key_len, D, v_head);
      gather(g.type, d_o, head_slice(g, g.o_stride, b, h), g.query_len, D, do_head);
      dq_head.assign(q_head.size(), 0.0);
      dk_head.assign(k_head.size(), 0.0);
      dv_head.assign(v_head.size(), 0.0);
      for (int i = 0; i < g.query_len; ++i) {
        const int visible = visible_keys(g, key_lengths, b, i);
        const double row_lse = lse[(static_cast<size_t>(b) * g.heads + h) * g.query_len + i];
        const float* do_row = do_head.data() + static_cast<size_t>(i) * D;
        double row_dot = 0.0;  // D_i
        for (int j = 0; j < visible; ++j) {
          p[j] = std::exp(score(g, q_head, i, k_head, j) - row_lse);
          const double keep = dropout.factor(b, h, i, j);
          const float* v_row = v_head.data() + static_cast<size_t>(j) * D;
          double* dv_row = dv_head.data() + static_cast<size_t>(j) * D;
          double do_dot_v = 0.0;  // dP'_ij
          for (int d = 0; d < D; ++d) {
            do_dot_v += static_cast<double>(do_row[d]) * v_row[d];
            dv_row[d] += p[j] * keep * do_row[d];
          }
          dp[j] = do_dot_v * keep;
          row_dot += p[j] * dp[j];
        }
        const float* q_row = q_head.data() + static_cast<size_t>(i) * D;
        double* dq_row = dq_head.data() + static_cast<size_t>(i) * D;
        for (int j = 0; j < visible; ++j) {
          const double ds = scale * p[j] * (dp[j] - row_dot);  // scale * dS_ij
          const float* k_row = k_head.data() + static_cast<size_t>(j) * D;
          double* dk_row = dk_head.data() + static_cast<size_t>(j) * D;
          for (int d = 0; d < D; ++d) {
            dq_row[d] += ds * k_row[d];
            dk_row[d] += ds * q_row[d];
          }
        }
      }
      scatter(g.type, dq_head, head_slice(g, g.q_stride, b, h), g.query_len, D, dq);
      scatter(g.type, dk_head, head_slice(g, g.k_stride, b, h), g.key_len, D, dk);
      scatter(g.type, dv_head, head_slice(g, g.v_stride, b, h), g.key_len, D, dv);
    }
  }
}

size_t ReferenceBackend::attention_workspace_bytes(const AttentionGeometry&) { return 0; }

}  // namespace dpbench
