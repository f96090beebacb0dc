// The sequence ops of ReferenceBackend: row-wise softmax cross-entropy, embeddings and the LSTM
// (fused over a whole sequence, and one cell step), written as plain loops that the [gpu] tests of
// the cuDNN/CUDA versions compare against. The fused LSTM is built from the same cell step as
// lstm_cell_forward, so an LSTM unrolled by hand from gemm + lstm_cell_forward gives the same
// numbers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "engine/reference/reference_storage.h"

namespace dpbench {

using reference_detail::WidenedInput;
using reference_detail::WidenedOutput;

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// One step of the cell for every row of the batch. gates (B, 4H) holds the pre-activations
// without bias and receives the activations; h is written with a row stride, so that the fused
// LSTM can write straight into its direction's half of a (T, B, H * D) output.
void cell_forward_rows(int batch, int hidden, float* gates, const float* bias_input,
                       const float* bias_recurrent, const float* c_prev, float* c, float* h,
                       int h_stride) {
  const size_t H = static_cast<size_t>(hidden);
  for (int b = 0; b < batch; ++b) {
    float* row = gates + static_cast<size_t>(b) * 4 * H;  // (4H): i, f, g, o
    for (size_t j = 0; j < H; ++j) {
      auto pre = [&](size_t gate) {
        const size_t k = gate * H + j;
        return static_cast<double>(row[k]) + bias_input[k] + bias_recurrent[k];
      };
      const float i = static_cast<float>(sigmoid(pre(0)));
      const float f = static_cast<float>(sigmoid(pre(1)));
      const float g = static_cast<float>(std::tanh(pre(2)));
      const float o = static_cast<float>(sigmoid(pre(3)));
      row[j] = i;
      row[H + j] = f;
      row[2 * H + j] = g;
      row[3 * H + j] = o;
      // c and h come from the stored (rounded) activations: backward differentiates exactly those.
      const double previous = c_prev != nullptr ? c_prev[b * H + j] : 0.0;
      const float c_new = static_cast<float>(static_cast<double>(f) * previous +
                                             static_cast<double>(i) * g);
      c[b * H + j] = c_new;
      h[static_cast<size_t>(b) * h_stride + j] =
          static_cast<float>(static_cast<double>(o) * std::tanh(static_cast<double>(c_new)));
    }
  }
}

// Backward of cell_forward_rows. dc (B, H) may be nullptr (zero); dgates may alias gates and
// dc_prev may alias dc: every element is read before the same element is written.
void cell_backward_rows(int batch, int hidden, const float* gates, const float* c_prev,
                        const float* c, const float* dh, const float* dc, float* dgates,
                        float* dc_prev) {
  const size_t H = static_cast<size_t>(hidden);
  for (int b = 0; b < batch; ++b) {
    const float* row = gates + static_cast<size_t>(b) * 4 * H;  // (4H) activations
    float* drow = dgates + static_cast<size_t>(b) * 4 * H;      // (4H) pre-activation gradients
    for (size_t j = 0; j < H; ++j) {
      const size_t e = b * H + j;
      const double i = row[j], f = row[H + j], g = row[2 * H + j], o = row[3 * H + j];
      const double previous = c_prev != nullptr ? c_prev[e] : 0.0;
      const double tanh_c = std::tanh(static_cast<double>(c[e]));
      const double dh_e = dh[e];
      // c feeds the next step directly (dc) and this step's h through o * tanh(c).
      const double dc_total = (dc != nullptr ? dc[e] : 0.0) + dh_e * o * (1.0 - tanh_c * tanh_c);
      drow[j] = static_cast<float>(dc_total * g * i * (1.0 - i));
      drow[H + j] = static_cast<float>(dc_total * previous * f * (1.0 - f));
      drow[2 * H + j] = static_cast<float>(dc_total * i * (1.0 - g * g));
      drow[3 * H + j] = static_cast<float>(dh_e * tanh_c * o * (1.0 - o));
      if (dc_prev != nullptr) dc_prev[e] = static_cast<float>(dc_total * f);
    }
  }
}

// Every loop below assumes at least one step, row and unit: an empty geometry is a caller's bug.
void require_non_empty(const RnnGeometry& g, const char* op) {
  if (g.seq_len < 1 || g.batch < 1 || g.input_size < 1 || g.hidden_size < 1 || g.num_layers < 1) {
    throw RuntimeError(std::string(op) + ": every dimension of the LSTM geometry must be >= 1");
  }
}

// Direction 0 runs forward in time, direction 1 backward: the time index of processing step s.
int time_at(int direction, int step, int seq_len) {
  return direction == 0 ? step : seq_len - 1 - step;
}

// Where lstm_forward leaves what the backward passes read, all in floats:
//   activations  (P, T, B, 4H)  gate activations i, f, g, o of pseudo-layer p at time t
//   cells        (P, T, B, H)   c_t
//   dgates       (P, T, B, 4H)  pre-activation gradients, written by lstm_backward_data and read
//                               by lstm_backward_weights
//   layer_output (L - 1, T, B, H * D)  outputs of every layer but the last (the last one is y)
// Indexed by time t, not by processing step, in both directions.
struct LstmReserve {
  const RnnGeometry& g;
  float* base;

  size_t gate_floats() const { return static_cast<size_t>(g.batch) * 4 * g.hidden_size; }
  size_t cell_floats() const { return static_cast<size_t>(g.batch) * g.hidden_size; }
  size_t steps() const { return static_cast<size_t>(g.pseudo_layers()) * g.seq_len; }
  size_t output_floats() const { return g.output_count(); }

  float* activations(int p, int t) const {
    return base + (p * size_t(g.seq_len) + t) * gate_floats();
  }
  float* cells(int p, int t) const {
    return base + steps() * gate_floats() + (p * size_t(g.seq_len) + t) * cell_floats();
  }
  float* dgates(int p, int t) const {
    return base + steps() * (gate_floats() + cell_floats()) +
           (p * size_t(g.seq_len) + t) * gate_floats();
  }
  float* layer_output(int layer) const {
    return base + steps() * (2 * gate_floats() + cell_floats()) + layer * output_floats();
  }
  size_t total_floats() const {
    return steps() * (2 * gate_floats() + cell_floats()) +
           static_cast<size_t>(g.num_layers - 1) * output_floats();
  }
};

// Scratch of lstm_backward_data:
//   gradient_a, gradient_b (T, B, max(in, H * D))  gradients of one layer's output and input,
//                                                   used in turn as the layers go down
//   dh_total, dh_recurrent, dc (B, H)               the running state gradients of one direction
struct LstmWorkspace {
  const RnnGeometry& g;
  float* base;

  size_t sequence_floats() const {
    return static_cast<size_t>(g.seq_len) * g.batch * std::max(g.input_size, g.output_size());
  }
  size_t state_floats() const { return static_cast<size_t>(g.batch) * g.hidden_size; }
  float* gradient_a() const { return base; }
  float* gradient_b() const { return base + sequence_floats(); }
  float* dh_total() const { return base + 2 * sequence_floats(); }
  float* dh_recurrent() const { return dh_total() + state_floats(); }
  float* dc() const { return dh_recurrent() + state_floats(); }
  size_t total_floats() const { return 2 * sequence_floats() + 3 * state_floats(); }
};

// The input a layer reads: x for layer 0, else the output of the layer beneath. (T, B, in_l)
const float* layer_input(const LstmReserve& reserve, const float* x, int layer) {
  return layer == 0 ? x : reserve.layer_output(layer - 1);
}

// Where a layer's output lives: y for the top layer, the reserve for the others. (T, B, H * D)
template <typename Float>  // float (lstm_forward writes it) or const float
Float* layer_output(const LstmReserve& reserve, Float* y, int layer) {
  return layer == reserve.g.num_layers - 1 ? y : reserve.layer_output(layer);
}

}  // namespace

// ---- loss ---------------------------------------------------------------------------------------

void ReferenceBackend::softmax_cross_entropy_rows(DataType logits_type, const void* logits_data,
                                                  const int32_t* labels, int rows, int classes,
                                                  float gradient_scale, float* row_losses,
                                                  void* dlogits_data, const float* loss_scale,
                                                  const float* row_weights, int row_stride) {
  const size_t stride = static_cast<size_t>(std::max(row_stride > 0 ? row_stride : classes, 0));
  if (rows > 0 && stride < static_cast<size_t>(classes))
    throw RuntimeError("softmax_cross_entropy_rows: row_stride " + std::to_string(row_stride) + " < " +
                       std::to_string(classes) + " classes");
  // Through the last row's last class: the padding between rows is widened and stored back
  // unchanged with the rest.
  const size_t count = rows > 0 ? (static_cast<size_t>(rows) - 1) * stride + static_cast<size_t>(classes) : 0;
  // Widened before anything is written: dlogits may alias logits.
  const WidenedInput logits_values(logits_type, logits_data, count);
  const WidenedOutput dlogits_values(logits_type, dlogits_data, count);
  const float* logits = logits_values.get();
  float* dlogits = dlogits_values.get();
  // Every scale applied in double before the one rounding, as softmax_cross_entropy does.
  const double common =
      static_cast<double>(gradient_scale) * (loss_scale != nullptr ? *loss_scale : 1.0);
  for (int r = 0; r < rows; ++r) {
    const double weight = row_weights != nullptr ? row_weights[r] : 1.0;
    const double scale = common * weight;
    const float* x = logits + static_cast<size_t>(r) * stride;  // (classes)
    float* dx = dlogits + static_cast<size_t>(r) * stride;      // (classes), may alias x
    const int label = labels[r];
    if (label < 0 || label >= classes) {
      throw RuntimeError("softmax_cross_entropy_rows: label " + std::to_string(label) +
                         " of row " + std::to_string(r) + " is outside [0, " +
                         std::to_string(classes) + ")");
    }
    // Subtracting the row maximum keeps exp() from overflowing; the softmax is unchanged.
    double row_max = x[0];
    for (int j = 1; j < classes; ++j) row_max = std::max(row_max, static_cast<double>(x[j]));
    double exp_sum = 0.0;
    for (int j = 0; j < classes; ++j) exp_sum += std::exp(x[j] - row_max);
    row_losses[r] = static_cast<float>((std::log(exp_sum) - (x[label] - row_max)) * weight);
    // Every read of x is done above except x[j] itself, read just before dx[j] is written.
    for (int j = 0; j < classes; ++j) {
      const double probability = std::exp(x[j] - row_max) / exp_sum;
      dx[j] = static_cast<float>((probability - (j == label ? 1.0 : 0.0)) * scale);
    }
  }
  dlogits_values.store();
}

void ReferenceBackend::sum_scaled(const float* x, size_t n, float scale, float* out) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += x[i];
  out[0] = static_cast<float>(static_cast<double>(scale) * sum);
}

// ---- copy and embeddings ------------------------------------------------------------------------

void ReferenceBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void ReferenceBackend::embedding_forward(DataType type, const void* table, const int32_t* ids,
                                         size_t n, int dim, void* y) {
  const size_t row_bytes = static_cast<size_t>(dim) * data_type_bytes(type);
  for (size_t i = 0; i < n; ++i) {
    const char* row = static_cast<const char*>(table) + static_cast<size_t>(ids[i]) * row_bytes;
    std::memcpy(static_cast<char*>(y) + i * row_bytes, row, row_bytes);
  }
}

void ReferenceBackend::embedding_backward(const int32_t* ids, DataType dy_type, const void* dy_data,
                                          size_t n, int dim, float* dtable) {
  const WidenedInput dy_values(dy_type, dy_data, n * static_cast<size_t>(std::max(dim, 0)));
  const float* dy = dy_values.get();
  // In the order of i, one float add each: a row shared by several ids sums them in that order.
  const size_t row_floats = static_cast<size_t>(dim);
  for (size_t i = 0; i < n; ++i) {
    float* row = dtable + static_cast<size_t>(ids[i]) * row_floats;  // (dim)
    const float* dy_row = dy + i * row_floats;
    for (size_t j = 0; j < row_floats; ++j) row[j] += dy_row[j];
  }
}

void ReferenceBackend::embedding_touched_rows(const int32_t* ids, size_t n, int vocab,
                                              int32_t* rows, int32_t* count,
                                              void* /*workspace*/) {
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      throw RuntimeError("embedding_touched_rows: id " + std::to_string(ids[i]) + " at " +
                         std::to_string(i) + " is outside [0, " + std::to_string(vocab) + ")");
    }
  }
  // rows holds n ids, so it doubles as the sorting space.
  std::copy(ids, ids + n, rows);
  std::sort(rows, rows + n);
  *count = static_cast<int32_t>(std::unique(rows, rows + n) - rows);
}

size_t ReferenceBackend::embedding_touched_rows_workspace_bytes(size_t, int) { return 0; }

void ReferenceBackend::gather_rows(const float* table, int dim, const int32_t* rows,
                                   const int32_t* count, size_t capacity, int32_t* rows_out,
                                   float* values_out) {
  if (*count < 0 || static_cast<size_t>(*count) > capacity) {
    throw RuntimeError("gather_rows: count " + std::to_string(*count) + " is outside [0, " +
                       std::to_string(capacity) + "]");
  }
  const size_t row_floats = static_cast<size_t>(dim);
  const size_t used = static_cast<size_t>(*count);
  for (size_t i = 0; i < used; ++i) {
    const float* row = table + static_cast<size_t>(rows[i]) * row_floats;  // (dim)
    rows_out[i] = rows[i];
    std::copy(row, row + row_floats, values_out + i * row_floats);
  }
  std::fill(rows_out + used, rows_out + capacity, 0);
  std::fill(values_out + used * row_floats, values_out + capacity * row_floats, 0.0f);
}

// ---- LSTM ---------------------------------------------------------------------------------------

size_t ReferenceBackend::lstm_workspace_bytes(const RnnGeometry& g) {
  return LstmWorkspace{g, nullptr}.total_floats() * sizeof(float);
}

size_t ReferenceBackend::lstm_reserve_bytes(const RnnGeometry& g) {
  return LstmReserve{g, nullptr}.total_floats() * sizeof(float);
}

void ReferenceBackend::lstm_forward(const RnnGeometry& g, const void* x, const void* hx,
                                    const void* cx, const void* weights, void* y, void* hy,
                                    void* cy, void* reserve, void* /*workspace*/) {
  require_non_empty(g, "lstm_forward");
  const DataType type = g.type;
  const WidenedInput x_values(type, x, g.input_count()), hx_values(type, hx, g.state_count()),
      cx_values(type, cx, g.state_count()), weight_values(type, weights, g.weight_count());
  const WidenedOutput y_values(type, y, g.output_count()), hy_values(type, hy, g.state_count()),
      cy_values(type, cy, g.state_count());
  lstm_forward_f32(g, x_values.get(), hx_values.get(), cx_values.get(), weight_values.get(),
                   y_values.get(), hy_values.get(), cy_values.get(), reserve);
  y_values.store();
  hy_values.store();
  cy_values.store();
}

void ReferenceBackend::lstm_forward_f32(const RnnGeometry& g, const float* x, const float* hx,
                                        const float* cx, const float* weights, float* y, float* hy,
                                        float* cy, void* reserve_memory) {
  const LstmReserve reserve{g, static_cast<float*>(reserve_memory)};
  const int T = g.seq_len, B = g.batch, H = g.hidden_size, D = g.directions();
  const int output_size = g.output_size();  // H * D, the row stride of every layer output
  const size_t state = static_cast<size_t>(B) * H;

  for (int l = 0; l < g.num_layers; ++l) {
    const int in = g.layer_input_size(l);
    const float* input = layer_input(reserve, x, l);  // (T, B, in)
    float* output = layer_output(reserve, y, l);      // (T, B, H * D)
    for (int d = 0; d < D; ++d) {
      const int p = l * D + d;
      const float* W = weights + g.input_weights_offset(l, d);      // (4H, in)
      const float* R = weights + g.recurrent_weights_offset(l, d);  // (4H, H)
      const float* bias_input = weights + g.input_bias_offset(l, d);
      const float* bias_recurrent = weights + g.recurrent_bias_offset(l, d);
      for (int s = 0; s < T; ++s) {
        const int t = time_at(d, s, T);
        float* gates = reserve.activations(p, t);  // (B, 4H)
        // gates = x_t W^T + h_prev R^T, then the cell adds both biases.
        gemm_f32(Transpose::no, Transpose::yes, B, 4 * H, in, 1.0f,
                 input + static_cast<size_t>(t) * B * in, in, W, in, 0.0f, gates, 4 * H);
        const float* h_prev = nullptr;  // (B, H) with row stride h_prev_stride; nullptr: zeros
        int h_prev_stride = H;
        const float* c_prev = nullptr;
        if (s > 0) {
          const int t_prev = time_at(d, s - 1, T);
          h_prev = output + static_cast<size_t>(t_prev) * B * output_size + d * H;
          h_prev_stride = output_size;
          c_prev = reserve.cells(p, t_prev);
        } else {
          if (hx != nullptr) h_prev = hx + p * state;
          if (cx != nullptr) c_prev = cx + p * state;
        }
        if (h_prev != nullptr) {
          gemm_f32(Transpose::no, Transpose::yes, B, 4 * H, H, 1.0f, h_prev, h_prev_stride, R, H,
                   1.0f, gates, 4 * H);
        }
        cell_forward_rows(B, H, gates, bias_input, bias_recurrent, c_prev, reserve.cells(p, t),
                          output + static_cast<size_t>(t) * B * output_size + d * H,
                          output_size);
      }
      // The final state is the one after the last processing step (t = 0 for direction 1).
      const int t_last = time_at(d, T - 1, T);
      if (hy != nullptr) {
        for (int b = 0; b < B; ++b) {
          const float* h = output + (static_cast<size_t>(t_last) * B + b) * output_size + d * H;
          std::copy(h, h + H, hy + p * state + static_cast<size_t>(b) * H);
        }
      }
      if (cy != nullptr) {
        const float* c = reserve.cells(p, t_last);
        std::copy(c, c + state, cy + p * state);
      }
    }
  }
}

// Needs no h: the gate activations and cells in the reserve are all the chain rule reads here, so
// y and hx go unused.
void ReferenceBackend::lstm_backward_data(const RnnGeometry& g, const void* /*y*/, const void* dy,
                                          const void* dhy, const void* dcy, const void* weights,
                                          const void* /*hx*/, const void* cx, void* dx, void* dhx,
                                          void* dcx, void* reserve, void* workspace) {
  require_non_empty(g, "lstm_backward_data");
  const DataType type = g.type;
  const WidenedInput dy_values(type, dy, g.output_count()), dhy_values(type, dhy, g.state_count()),
      dcy_values(type, dcy, g.state_count()), weight_values(type, weights, g.weight_count()),
      cx_values(type, cx, g.state_count());
  const WidenedOutput dx_values(type, dx, g.input_count()), dhx_values(type, dhx, g.state_count()),
      dcx_values(type, dcx, g.state_count());
  lstm_backward_data_f32(g, dy_values.get(), dhy_values.get(), dcy_values.get(), weight_values.get(),
                         cx_values.get(), dx_values.get(), dhx_values.get(), dcx_values.get(), reserve,
                         workspace);
  dx_values.store();
  dhx_values.store();
  dcx_values.store();
}

void ReferenceBackend::lstm_backward_data_f32(const RnnGeometry& g, const float* dy,
                                              const float* dhy, const float* dcy,
                                              const float* weights, const float* cx, float* dx,
                                              float* dhx, float* dcx, void* reserve_memory,
                                              void* workspace_memory) {
  const LstmReserve reserve{g, static_cast<float*>(reserve_memory)};
  const LstmWorkspace workspace{g, static_cast<float*>(workspace_memory)};
  const int T = g.seq_len, B = g.batch, H = g.hidden_size, D = g.directions();
  const int output_size = g.output_size();
  const size_t state = static_cast<size_t>(B) * H;
  float* dh_total = workspace.dh_total();          // (B, H)
  float* dh_recurrent = workspace.dh_recurrent();  // (B, H)
  float* dc = workspace.dc();                      // (B, H)

  // Gradient of the current layer's output (T, B, H * D); the top layer's is dy.
  const float* d_output = dy;
  if (d_output == nullptr) {
    std::fill(workspace.gradient_a(), workspace.gradient_a() + g.output_count(), 0.0f);
    d_output = workspace.gradient_a();
  }
  for (int l = g.num_layers - 1; l >= 0; --l) {
    const int in = g.layer_input_size(l);
    // Gradient of this layer's input (T, B, in): dx for layer 0 (nullptr: not needed), else the
    // scratch buffer d_output does not occupy.
    float* d_input = l == 0 ? dx
                            : (d_output == workspace.gradient_a() ? workspace.gradient_b()
                                                                  : workspace.gradient_a());
    for (int d = 0; d < D; ++d) {
      const int p = l * D + d;
      const float* W = weights + g.input_weights_offset(l, d);      // (4H, in)
      const float* R = weights + g.recurrent_weights_offset(l, d);  // (4H, H)
      if (dhy != nullptr) {
        std::copy(dhy + p * state, dhy + (p + 1) * state, dh_recurrent);
      } else {
        std::fill(dh_recurrent, dh_recurrent + state, 0.0f);
      }
      if (dcy != nullptr) {
        std::copy(dcy + p * state, dcy + (p + 1) * state, dc);
      } else {
        std::fill(dc, dc + state, 0.0f);
      }
      for (int s = T - 1; s >= 0; --s) {
        const int t = time_at(d, s, T);
        // h_t reaches the loss through this layer's output and through the next step.
        for (int b = 0; b < B; ++b) {
          const float* d_out = d_output + (static_cast<size_t>(t) * B + b) * output_size + d * H;
          for (int j = 0; j < H; ++j) {
            dh_total[b * H + j] = d_out[j] + dh_recurrent[static_cast<size_t>(b) * H + j];
          }
        }
        const float* c_prev = s > 0 ? reserve.cells(p, time_at(d, s - 1, T))
                                    : (cx != nullptr ? cx + p * state : nullptr);
        float* dgates = reserve.dgates(p, t);  // (B, 4H)
        cell_backward_rows(B, H, reserve.activations(p, t), c_prev, reserve.cells(p, t),
                           dh_total, dc, dgates, dc);
        // dh_prev = dgates R;  d_input_t (+)= dgates W (the second direction adds to the first).
        gemm_f32(Transpose::no, Transpose::no, B, H, 4 * H, 1.0f, dgates, 4 * H, R, H, 0.0f,
                 dh_recurrent, H);
        if (d_input != nullptr) {
          gemm_f32(Transpose::no, Transpose::no, B, in, 4 * H, 1.0f, dgates, 4 * H, W, in,
                   d == 0 ? 0.0f : 1.0f, d_input + static_cast<size_t>(t) * B * in, in);
        }
      }
      if (dhx != nullptr) std::copy(dh_recurrent, dh_recurrent + state, dhx + p * state);
      if (dcx != nullptr) std::copy(dc, dc + state, dcx + p * state);
    }
    d_output = d_input;
  }
}

void ReferenceBackend::lstm_backward_weights(const RnnGeometry& g, const void* x, const void* hx,
                                             const void* y, float* dweights, void* reserve,
                                             void* /*workspace*/) {
  require_non_empty(g, "lstm_backward_weights");
  const WidenedInput x_values(g.type, x, g.input_count()), hx_values(g.type, hx, g.state_count()),
      y_values(g.type, y, g.output_count());
  lstm_backward_weights_f32(g, x_values.get(), hx_values.get(), y_values.get(), dweights, reserve);
}

void ReferenceBackend::lstm_backward_weights_f32(const RnnGeometry& g, const float* x,
                                                 const float* hx, const float* y, float* dweights,
                                                 void* reserve_memory) {
  const LstmReserve reserve{g, static_cast<float*>(reserve_memory)};
  const int T = g.seq_len, B = g.batch, H = g.hidden_size, D = g.directions();
  const size_t gates_count = 4 * static_cast<size_t>(H);
  const int output_size = g.output_size();
  const size_t state = static_cast<size_t>(B) * H;

  // Sums over time and batch in double, added to dweights once per pseudo-layer.
  std::vector<double> dW, dR, dbias;
  for (int l = 0; l < g.num_layers; ++l) {
    const int in = g.layer_input_size(l);
    const float* input = layer_input(reserve, x, l);    // (T, B, in)
    const float* output = layer_output(reserve, y, l);  // (T, B, H * D)
    for (int d = 0; d < D; ++d) {
      const int p = l * D + d;
      dW.assign(gates_count * in, 0.0);
      dR.assign(gates_count * H, 0.0);
      dbias.assign(gates_count, 0.0);
      for (int s = 0; s < T; ++s) {
        const int t = time_at(d, s, T);
        for (int b = 0; b < B; ++b) {
          const float* dgates = reserve.dgates(p, t) + b * gates_count;       // (4H)
          const float* x_row = input + (static_cast<size_t>(t) * B + b) * in;  // (in)
          // The recurrent input of this step: the previous step's h, or hx (nullptr: zeros).
          const float* h_prev = nullptr;  // (H)
          if (s > 0) {
            h_prev = output + (static_cast<size_t>(time_at(d, s - 1, T)) * B + b) * output_size +
                     d * H;
          } else if (hx != nullptr) {
            h_prev = hx + p * state + static_cast<size_t>(b) * H;
          }
          for (size_t r = 0; r < gates_count; ++r) {
            const double dgate = dgates[r];
            dbias[r] += dgate;
            double* dW_row = dW.data() + r * in;
            for (int k = 0; k < in; ++k) dW_row[k] += dgate * x_row[k];
            if (h_prev != nullptr) {
              double* dR_row = dR.data() + r * H;
              for (int k = 0; k < H; ++k) dR_row[k] += dgate * h_prev[k];
            }
          }
        }
      }
      auto add_into = [](const std::vector<double>& sums, float* target) {
        for (size_t i = 0; i < sums.size(); ++i) {
          target[i] = static_cast<float>(target[i] + sums[i]);
        }
      };
      add_into(dW, dweights + g.input_weights_offset(l, d));
      add_into(dR, dweights + g.recurrent_weights_offset(l, d));
      // Both biases enter the gates as one sum, so they share its gradient.
      add_into(dbias, dweights + g.input_bias_offset(l, d));
      add_into(dbias, dweights + g.recurrent_bias_offset(l, d));
    }
  }
}

void ReferenceBackend::lstm_cell_forward(DataType type, int batch, int hidden, void* gates,
                                         const void* bias_input, const void* bias_recurrent,
                                         const void* c_prev, void* c, void* h) {
  const size_t states = static_cast<size_t>(batch) * hidden, gate_count = 4 * states;
  const WidenedInput bias_input_values(type, bias_input, 4 * static_cast<size_t>(hidden)),
      bias_recurrent_values(type, bias_recurrent, 4 * static_cast<size_t>(hidden)),
      c_prev_values(type, c_prev, states);
  const WidenedOutput gate_values(type, gates, gate_count), c_values(type, c, states),
      h_values(type, h, states);
  cell_forward_rows(batch, hidden, gate_values.get(), bias_input_values.get(),
                    bias_recurrent_values.get(), c_prev_values.get(), c_values.get(),
                    h_values.get(), hidden);
  gate_values.store();
  c_values.store();
  h_values.store();
}

void ReferenceBackend::lstm_cell_backward(DataType type, int batch, int hidden, const void* gates,
                                          const void* c_prev, const void* c, const void* dh,
                                          const void* dc, void* dgates, void* dc_prev) {
  const size_t states = static_cast<size_t>(batch) * hidden, gate_count = 4 * states;
  // Inputs widened before any output is written: dgates may alias gates, dc_prev dc.
  const WidenedInput gate_values(type, gates, gate_count), c_prev_values(type, c_prev, states),
      c_values(type, c, states), dh_values(type, dh, states), dc_values(type, dc, states);
  const WidenedOutput dgate_values(type, dgates, gate_count), dc_prev_values(type, dc_prev, states);
  cell_backward_rows(batch, hidden, gate_values.get(), c_prev_values.get(), c_values.get(),
                     dh_values.get(), dc_values.get(), dgate_values.get(), dc_prev_values.get());
  dgate_values.store();
  dc_prev_values.store();
}

}  // namespace dpbench
