// The reference backend's sequence ops are the oracle for the cuDNN/CUDA ones, so each is checked
// here on its own terms: small cases worked by hand, the fused LSTM against an LSTM unrolled from
// gemm + lstm_cell_forward, and every LSTM gradient against central finite differences.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend/rnn_geometry.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "tests/host/reference_cnn_test_support.h"

using namespace dpbench;
using dpbench::testing::check_close;
using dpbench::testing::finite_difference;
using dpbench::testing::random_values;
using dpbench::testing::weighted_sum;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// A float buffer of at least `bytes` bytes (reserve and workspace of the LSTM).
std::vector<float> scratch(size_t bytes) { return std::vector<float>(bytes / sizeof(float) + 1); }

// The small stacked LSTM the forward and gradient checks run: T 3, B 2, in 3, H 2, two layers.
RnnGeometry two_layer_geometry(bool bidirectional) {
  return RnnGeometry{/*seq_len=*/3, /*batch=*/2, /*input_size=*/3, /*hidden_size=*/2,
                     /*num_layers=*/2, bidirectional};
}

// One LSTM problem: inputs, weights, the forward's outputs, and a scalar loss
//   L = sum(y * wy) + sum(hy * wh) + sum(cy * wc)
// whose parts can be switched off, so the backward passes see dy, dhy, dcy = nullptr.
struct LstmProblem {
  ReferenceBackend ops;
  RnnGeometry g;
  std::vector<float> x, hx, cx, weights;  // (T, B, in), (P, B, H) twice, canonical layout
  std::vector<float> wy, wh, wc;          // the loss's weights: its gradients dy, dhy, dcy
  bool through_outputs = true;            // y feeds the loss
  bool through_states = true;             // hy and cy feed the loss
  std::vector<float> y, hy, cy, reserve, workspace;

  LstmProblem(const RnnGeometry& geometry, uint64_t stream) : g(geometry) {
    x = random_values(g.input_count(), stream);
    hx = random_values(g.state_count(), stream + 1);
    cx = random_values(g.state_count(), stream + 2);
    weights = random_values(g.weight_count(), stream + 3, -0.7f, 0.7f);
    wy = random_values(g.output_count(), stream + 4);
    wh = random_values(g.state_count(), stream + 5);
    wc = random_values(g.state_count(), stream + 6);
    y.assign(g.output_count(), kNaN);
    hy.assign(g.state_count(), kNaN);
    cy.assign(g.state_count(), kNaN);
    reserve = scratch(ops.lstm_reserve_bytes(g));
    workspace = scratch(ops.lstm_workspace_bytes(g));
  }
  void forward() {
    ops.lstm_forward(g, x.data(), hx.data(), cx.data(), weights.data(), y.data(), hy.data(),
                     cy.data(), reserve.data(), workspace.data());
  }
  double loss() {
    forward();
    double sum = 0.0;
    if (through_outputs) sum += weighted_sum(y, wy);
    if (through_states) sum += weighted_sum(hy, wh) + weighted_sum(cy, wc);
    return sum;
  }
  void backward_data(float* dx, float* dhx, float* dcx) {
    ops.lstm_backward_data(g, y.data(), through_outputs ? wy.data() : nullptr,
                           through_states ? wh.data() : nullptr,
                           through_states ? wc.data() : nullptr, weights.data(), hx.data(),
                           cx.data(), dx, dhx, dcx, reserve.data(), workspace.data());
  }
  // Adds the weight gradient of the last backward_data to dweights.
  void backward_weights(std::vector<float>& dweights) {
    ops.lstm_backward_weights(g, x.data(), hx.data(), y.data(), dweights.data(), reserve.data(),
                              workspace.data());
  }
  // dL/dvalues[i] for every i, by finite_difference (h and 2h combined by Richardson).
  std::vector<double> numeric_gradient(std::vector<float>& values, double step) {
    std::vector<double> gradient(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      gradient[i] = finite_difference(values[i], step, [&] { return loss(); });
    }
    return gradient;
  }
};

// The stacked LSTM unrolled by hand from gemm and lstm_cell_forward, as the dynamic RNN layer
// composes it: direction 1 walks t = T-1..0, y[t] = [h_forward, h_backward].
void unrolled_lstm(ReferenceBackend& ops, const RnnGeometry& g, const std::vector<float>& x,
                   const std::vector<float>& hx, const std::vector<float>& cx,
                   const std::vector<float>& w, std::vector<float>& y, std::vector<float>& hy,
                   std::vector<float>& cy) {
  const int T = g.seq_len, B = g.batch, H = g.hidden_size, D = g.directions();
  std::vector<float> input = x;
  for (int l = 0; l < g.num_layers; ++l) {
    const int in = g.layer_input_size(l);
    std::vector<float> output(g.output_count());  // (T, B, H * D)
    for (int d = 0; d < D; ++d) {
      const int p = l * D + d;
      std::vector<float> h(hx.begin() + p * B * H, hx.begin() + (p + 1) * B * H);  // (B, H)
      std::vector<float> c(cx.begin() + p * B * H, cx.begin() + (p + 1) * B * H);
      std::vector<float> gates(B * 4 * H), c_next(B * H);
      for (int s = 0; s < T; ++s) {
        const int t = d == 0 ? s : T - 1 - s;
        ops.gemm(Transpose::no, Transpose::yes, B, 4 * H, in, 1.0f, &input[t * B * in], in,
                 &w[g.input_weights_offset(l, d)], in, 0.0f, gates.data(), 4 * H);
        ops.gemm(Transpose::no, Transpose::yes, B, 4 * H, H, 1.0f, h.data(), H,
                 &w[g.recurrent_weights_offset(l, d)], H, 1.0f, gates.data(), 4 * H);
        ops.lstm_cell_forward(B, H, gates.data(), &w[g.input_bias_offset(l, d)],
                              &w[g.recurrent_bias_offset(l, d)], c.data(), c_next.data(),
                              h.data());
        c = c_next;
        for (int b = 0; b < B; ++b) {
          for (int j = 0; j < H; ++j) output[(t * B + b) * H * D + d * H + j] = h[b * H + j];
        }
      }
      std::copy(h.begin(), h.end(), hy.begin() + p * B * H);
      std::copy(c.begin(), c.end(), cy.begin() + p * B * H);
    }
    input = output;
  }
  y = input;
}

}  // namespace

TEST_CASE("reference softmax_cross_entropy_rows: hand case with both scales and in place",
          "[reference]") {
  ReferenceBackend ops;
  // Row 0: logits (1, 2, 3), label 2: softmax (0.0900306, 0.2447285, 0.6652410), loss 0.4076059.
  // Row 1: equal logits, label 0: softmax 1/3 each, loss log 3 = 1.0986123.
  // dlogits = (softmax - onehot) * 0.5 * 4: no division by rows, both scales multiply.
  const std::vector<int32_t> labels = {2, 0};
  const std::vector<double> scaled_dlogits = {0.1800611, 0.4894569,  -0.6695181,
                                              -1.3333333, 0.6666667, 0.6666667};
  for (float shift : {0.0f, 1000.0f}) {  // +1000 overflows exp() unless the row max is subtracted
    const std::vector<float> logits = {1 + shift, 2 + shift, 3 + shift,
                                       1 + shift, 1 + shift, 1 + shift};
    std::vector<float> row_losses(2, kNaN), dlogits(6, kNaN);
    const float loss_scale = 4.0f;
    ops.softmax_cross_entropy_rows(logits.data(), labels.data(), 2, 3, 0.5f, row_losses.data(),
                                   dlogits.data(), &loss_scale);
    CHECK(row_losses[0] == Approx(0.4076059).epsilon(1e-5));  // not scaled
    CHECK(row_losses[1] == Approx(1.0986123).epsilon(1e-5));
    check_close(dlogits, scaled_dlogits, 1e-6, 1e-5, "scaled dlogits");

    // Without loss_scale only gradient_scale applies; dlogits written over the logits.
    std::vector<float> in_place = logits;
    ops.softmax_cross_entropy_rows(in_place.data(), labels.data(), 2, 3, 0.5f, row_losses.data(),
                                   in_place.data());
    std::vector<double> unscaled = scaled_dlogits;
    for (double& value : unscaled) value /= 4.0;
    check_close(in_place, unscaled, 1e-6, 1e-5, "in-place dlogits");
    CHECK(row_losses[0] == Approx(0.4076059).epsilon(1e-5));
  }
  // Rows 5 apart (two padding elements each, holding values that would change every result):
  // the same losses and gradients, the padding as it was.
  {
    const std::vector<float> padded = {1, 2, 3, 99, -99, 1, 1, 1, 99, -99};
    std::vector<float> row_losses(2, kNaN), dlogits = padded;
    const float loss_scale = 4.0f;
    ops.softmax_cross_entropy_rows(DataType::f32, padded.data(), labels.data(), 2, 3, 0.5f, row_losses.data(),
                                   dlogits.data(), &loss_scale, nullptr, 5);
    CHECK(row_losses[0] == Approx(0.4076059).epsilon(1e-5));
    CHECK(row_losses[1] == Approx(1.0986123).epsilon(1e-5));
    const std::vector<float> rows = {dlogits[0], dlogits[1], dlogits[2], dlogits[5], dlogits[6], dlogits[7]};
    check_close(rows, scaled_dlogits, 1e-6, 1e-5, "scaled dlogits, padded rows");
    CHECK(dlogits[3] == 99.0f);
    CHECK(dlogits[9] == -99.0f);
    CHECK_THROWS_AS(ops.softmax_cross_entropy_rows(DataType::f32, padded.data(), labels.data(), 2, 3, 0.5f,
                                                   row_losses.data(), dlogits.data(), nullptr, nullptr, 2),
                    RuntimeError);
  }
  const std::vector<int32_t> bad_label = {3};
  std::vector<float> one_row = {1, 2, 3}, loss(1);
  CHECK_THROWS_AS(ops.softmax_cross_entropy_rows(one_row.data(), bad_label.data(), 1, 3, 1.0f,
                                                 loss.data(), one_row.data()),
                  RuntimeError);
}

TEST_CASE("reference sum_scaled sums in double and copy copies bytes", "[reference]") {
  ReferenceBackend ops;
  const std::vector<float> x = {1, 2, 3.5f, -0.5f};
  float out = kNaN;
  ops.sum_scaled(x.data(), x.size(), 0.25f, &out);
  CHECK(out == 1.5f);
  // A float running sum loses both 1s against 1e8 (giving 1); a double one keeps them.
  const std::vector<float> cancelling = {1e8f, 1.0f, -1e8f, 1.0f};
  ops.sum_scaled(cancelling.data(), cancelling.size(), 3.0f, &out);
  CHECK(out == 6.0f);
  ops.sum_scaled(x.data(), 0, 2.0f, &out);
  CHECK(out == 0.0f);

  const std::vector<float> source = {1.5f, -2.0f, 3.25f};
  std::vector<float> destination(4, 9.0f);
  ops.copy(destination.data(), source.data(), 2 * sizeof(float));
  CHECK(destination == std::vector<float>{1.5f, -2.0f, 9.0f, 9.0f});
}

TEST_CASE("reference embedding forward and backward with repeated ids", "[reference]") {
  ReferenceBackend ops;
  const std::vector<float> table = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};  // (4, 3)
  const std::vector<int32_t> ids = {2, 0, 2, 3};
  std::vector<float> y(12, kNaN);
  ops.embedding_forward(table.data(), ids.data(), ids.size(), 3, y.data());
  CHECK(y == std::vector<float>{20, 21, 22, 0, 1, 2, 20, 21, 22, 30, 31, 32});

  const std::vector<float> dy = {1, 2, 3, 4, 5, 6, 0.5f, 0.25f, 0.125f, -1, -2, -3};  // (4, 3)
  std::vector<float> dtable(12, 100.0f);  // it adds: row 1 is untouched, row 2 gets two rows
  ops.embedding_backward(ids.data(), dy.data(), ids.size(), 3, dtable.data());
  CHECK(dtable == std::vector<float>{104, 105, 106, 100, 100, 100, 101.5f, 102.25f, 103.125f,
                                     99, 98, 97});
}

TEST_CASE("reference embedding_touched_rows: distinct ids ascending and counted", "[reference]") {
  ReferenceBackend ops;
  const std::vector<int32_t> ids = {5, 1, 5, 3, 1, 0, 7};
  std::vector<int32_t> rows(ids.size(), -9);
  int32_t count = -1;
  std::vector<unsigned char> workspace(
      ops.embedding_touched_rows_workspace_bytes(ids.size(), 8) + 1);
  ops.embedding_touched_rows(ids.data(), ids.size(), 8, rows.data(), &count, workspace.data());
  REQUIRE(count == 5);
  CHECK(std::vector<int32_t>(rows.begin(), rows.begin() + count) ==
        std::vector<int32_t>{0, 1, 3, 5, 7});

  ops.embedding_touched_rows(ids.data(), 0, 8, rows.data(), &count, workspace.data());
  CHECK(count == 0);
  const std::vector<int32_t> outside = {2, 8};
  CHECK_THROWS_AS(ops.embedding_touched_rows(outside.data(), 2, 8, rows.data(), &count,
                                             workspace.data()),
                  RuntimeError);
}

TEST_CASE("reference gather_rows packs the counted rows and pads with row 0 and zeros", "[reference]") {
  ReferenceBackend ops;
  // table (5, 3): row r holds 10r + 1, 10r + 2, 10r + 3.
  std::vector<float> table(15);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 3; ++c) table[r * 3 + c] = static_cast<float>(10 * r + c + 1);
  const std::vector<int32_t> rows = {1, 3, 4, -7};  // the last one is past the count: never read
  std::vector<int32_t> rows_out(5, -1);
  std::vector<float> values(15, kNaN);
  int32_t count = 3;
  ops.gather_rows(table.data(), 3, rows.data(), &count, 5, rows_out.data(), values.data());
  CHECK(rows_out == std::vector<int32_t>{1, 3, 4, 0, 0});
  CHECK(values == std::vector<float>{11, 12, 13, 31, 32, 33, 41, 42, 43, 0, 0, 0, 0, 0, 0});

  // The padding scatters nothing: embedding_backward of the whole pack rebuilds exactly the
  // counted rows of the table and leaves every other row (row 0 included) zero.
  std::vector<float> scattered(15, 0.0f);
  ops.embedding_backward(rows_out.data(), values.data(), 5, 3, scattered.data());
  CHECK(scattered == std::vector<float>{0, 0, 0, 11, 12, 13, 0, 0, 0, 31, 32, 33, 41, 42, 43});

  count = 0;  // nothing touched: all padding
  ops.gather_rows(table.data(), 3, rows.data(), &count, 2, rows_out.data(), values.data());
  CHECK(std::vector<int32_t>(rows_out.begin(), rows_out.begin() + 2) == std::vector<int32_t>{0, 0});
  CHECK(std::vector<float>(values.begin(), values.begin() + 6) == std::vector<float>(6, 0.0f));
  count = 2;  // exactly the capacity: no padding
  ops.gather_rows(table.data(), 3, rows.data(), &count, 2, rows_out.data(), values.data());
  CHECK(std::vector<int32_t>(rows_out.begin(), rows_out.begin() + 2) == std::vector<int32_t>{1, 3});
  count = 3;  // more than the capacity breaks the contract
  CHECK_THROWS_AS(ops.gather_rows(table.data(), 3, rows.data(), &count, 2, rows_out.data(), values.data()),
                  RuntimeError);
}

TEST_CASE("reference lstm_cell_forward and lstm_cell_backward against the formulas",
          "[reference]") {
  ReferenceBackend ops;
  const int B = 2, H = 2;
  const std::vector<float> pre = random_values(B * 4 * H, 11, -2.0f, 2.0f);  // (B, 4H)
  const std::vector<float> bias_input = random_values(4 * H, 12);
  const std::vector<float> bias_recurrent = random_values(4 * H, 13);
  std::vector<float> c_prev = random_values(B * H, 14);
  const std::vector<float> dh = random_values(B * H, 15), dc = random_values(B * H, 16);

  for (bool zero_state : {false, true}) {
    INFO("c_prev " << (zero_state ? "nullptr" : "given"));
    const float* c_prev_arg = zero_state ? nullptr : c_prev.data();
    std::vector<float> gates = pre, c(B * H, kNaN), h(B * H, kNaN);
    ops.lstm_cell_forward(B, H, gates.data(), bias_input.data(), bias_recurrent.data(),
                          c_prev_arg, c.data(), h.data());
    std::vector<double> want_gates(B * 4 * H), want_c(B * H), want_h(B * H);
    std::vector<double> want_dgates(B * 4 * H), want_dc_prev(B * H);
    for (int b = 0; b < B; ++b) {
      for (int j = 0; j < H; ++j) {
        auto z = [&](int gate) {
          const int k = gate * H + j;
          return static_cast<double>(pre[b * 4 * H + k]) + bias_input[k] + bias_recurrent[k];
        };
        const double i = sigmoid(z(0)), f = sigmoid(z(1)), g = std::tanh(z(2)), o = sigmoid(z(3));
        const double cp = zero_state ? 0.0 : c_prev[b * H + j];
        const double cn = f * cp + i * g, tc = std::tanh(cn);
        const int e = b * H + j;
        want_gates[b * 4 * H + j] = i;
        want_gates[b * 4 * H + H + j] = f;
        want_gates[b * 4 * H + 2 * H + j] = g;
        want_gates[b * 4 * H + 3 * H + j] = o;
        want_c[e] = cn;
        want_h[e] = o * tc;
        // dL/dc through both paths, then the chain rule into each gate's pre-activation.
        const double dct = dc[e] + dh[e] * o * (1 - tc * tc);
        want_dgates[b * 4 * H + j] = dct * g * i * (1 - i);
        want_dgates[b * 4 * H + H + j] = dct * cp * f * (1 - f);
        want_dgates[b * 4 * H + 2 * H + j] = dct * i * (1 - g * g);
        want_dgates[b * 4 * H + 3 * H + j] = dh[e] * tc * o * (1 - o);
        want_dc_prev[e] = dct * f;
      }
    }
    check_close(gates, want_gates, 1e-6, 1e-6, "activations");
    check_close(c, want_c, 1e-6, 1e-6, "c");
    check_close(h, want_h, 1e-6, 1e-6, "h");

    std::vector<float> dgates(B * 4 * H, kNaN), dc_prev(B * H, kNaN);
    ops.lstm_cell_backward(B, H, gates.data(), c_prev_arg, c.data(), dh.data(), dc.data(),
                           dgates.data(), dc_prev.data());
    check_close(dgates, want_dgates, 1e-6, 1e-5, "dgates");
    check_close(dc_prev, want_dc_prev, 1e-6, 1e-5, "dc_prev");

    // In place (dgates over gates, dc_prev over dc): the same bits.
    std::vector<float> in_place_gates = gates, in_place_dc = dc;
    ops.lstm_cell_backward(B, H, in_place_gates.data(), c_prev_arg, c.data(), dh.data(),
                           in_place_dc.data(), in_place_gates.data(), in_place_dc.data());
    CHECK(in_place_gates == dgates);
    CHECK(in_place_dc == dc_prev);
  }
}

TEST_CASE("reference lstm_cell_backward matches finite differences", "[reference]") {
  ReferenceBackend ops;
  const int B = 2, H = 3;
  std::vector<float> pre = random_values(B * 4 * H, 21, -1.5f, 1.5f);  // (B, 4H)
  std::vector<float> c_prev = random_values(B * H, 22);
  const std::vector<float> bias_input = random_values(4 * H, 23);
  const std::vector<float> bias_recurrent = random_values(4 * H, 24);
  const std::vector<float> wh = random_values(B * H, 25), wc = random_values(B * H, 26);
  for (bool last_step : {false, true}) {  // the last step has dc = nullptr: c feeds only h
    INFO((last_step ? "dc nullptr" : "dc given"));
    auto loss = [&] {
      std::vector<float> gates = pre, c(B * H), h(B * H);
      ops.lstm_cell_forward(B, H, gates.data(), bias_input.data(), bias_recurrent.data(),
                            c_prev.data(), c.data(), h.data());
      return weighted_sum(h, wh) + (last_step ? 0.0 : weighted_sum(c, wc));
    };
    std::vector<float> gates = pre, c(B * H), h(B * H);
    ops.lstm_cell_forward(B, H, gates.data(), bias_input.data(), bias_recurrent.data(),
                          c_prev.data(), c.data(), h.data());
    std::vector<float> dgates(B * 4 * H), dc_prev(B * H);
    ops.lstm_cell_backward(B, H, gates.data(), c_prev.data(), c.data(), wh.data(),
                           last_step ? nullptr : wc.data(), dgates.data(), dc_prev.data());
    std::vector<double> want_dgates(pre.size()), want_dc_prev(c_prev.size());
    for (size_t i = 0; i < pre.size(); ++i) want_dgates[i] = finite_difference(pre[i], 1e-2, loss);
    for (size_t i = 0; i < c_prev.size(); ++i) {
      want_dc_prev[i] = finite_difference(c_prev[i], 1e-2, loss);
    }
    // A loss of six float terms carries rounding of ~1e-7; over a step of 2e-2 that is ~1e-5.
    check_close(dgates, want_dgates, 1e-4, 1e-3, "dgates");
    check_close(dc_prev, want_dc_prev, 1e-4, 1e-3, "dc_prev");
  }
}

TEST_CASE("reference lstm_forward: one layer one step batch one by the formula",
          "[reference]") {
  ReferenceBackend ops;
  RnnGeometry g;
  g.input_size = 2;
  g.hidden_size = 2;
  const int H = 2, in = 2;
  const std::vector<float> x = {0.5f, -1.0f}, hx = {0.25f, -0.5f}, cx = {0.75f, -0.25f};
  const std::vector<float> w = random_values(g.weight_count(), 31, -0.8f, 0.8f);
  REQUIRE(w.size() == 4 * H * (in + H + 2));
  // The canonical block, read by its definition: W (4H, in), R (4H, H), bW (4H), bR (4H).
  const float* W = &w[0];
  const float* R = W + 4 * H * in;
  const float* bW = R + 4 * H * H;
  const float* bR = bW + 4 * H;
  std::vector<double> want_h(H), want_c(H);
  for (int j = 0; j < H; ++j) {
    auto z = [&](int gate) {
      const int r = gate * H + j;
      double sum = static_cast<double>(bW[r]) + bR[r];
      for (int m = 0; m < in; ++m) sum += static_cast<double>(W[r * in + m]) * x[m];
      for (int m = 0; m < H; ++m) sum += static_cast<double>(R[r * H + m]) * hx[m];
      return sum;
    };
    want_c[j] = sigmoid(z(1)) * cx[j] + sigmoid(z(0)) * std::tanh(z(2));
    want_h[j] = sigmoid(z(3)) * std::tanh(want_c[j]);
  }
  std::vector<float> y(H, kNaN), hy(H, kNaN), cy(H, kNaN);
  std::vector<float> reserve = scratch(ops.lstm_reserve_bytes(g));
  std::vector<float> workspace = scratch(ops.lstm_workspace_bytes(g));
  ops.lstm_forward(g, x.data(), hx.data(), cx.data(), w.data(), y.data(), hy.data(), cy.data(),
                   reserve.data(), workspace.data());
  check_close(y, want_h, 1e-6, 1e-5, "y");
  check_close(hy, want_h, 1e-6, 1e-5, "hy");
  check_close(cy, want_c, 1e-6, 1e-5, "cy");

  // hx, cx == nullptr is the zero state; hy, cy == nullptr are simply not written.
  const std::vector<float> zeros(H, 0.0f);
  std::vector<float> y_zero_state(H), y_nullptr(H, kNaN);
  ops.lstm_forward(g, x.data(), zeros.data(), zeros.data(), w.data(), y_zero_state.data(),
                   hy.data(), cy.data(), reserve.data(), workspace.data());
  ops.lstm_forward(g, x.data(), nullptr, nullptr, w.data(), y_nullptr.data(), nullptr, nullptr,
                   reserve.data(), workspace.data());
  CHECK(y_nullptr == y_zero_state);
  CHECK(y_nullptr != y);
}

TEST_CASE("reference lstm_forward equals the LSTM unrolled from gemm + lstm_cell_forward",
          "[reference]") {
  for (bool bidirectional : {false, true}) {
    INFO((bidirectional ? "bidirectional" : "unidirectional"));
    const RnnGeometry g = two_layer_geometry(bidirectional);
    LstmProblem problem(g, 40);
    problem.forward();
    std::vector<float> y(g.output_count()), hy(g.state_count()), cy(g.state_count());
    unrolled_lstm(problem.ops, g, problem.x, problem.hx, problem.cx, problem.weights, y, hy, cy);
    check_close(problem.y, y, 0.0, 1e-6, "y");
    check_close(problem.hy, hy, 0.0, 1e-6, "hy");
    check_close(problem.cy, cy, 0.0, 1e-6, "cy");
  }
}

namespace {

// Analytic gradients of dx, dhx, dcx and the weights against central differences of the loss.
// Tolerance: the loss sums ~30 float outputs of size < 1 times weights < 1, each rounded to ~6e-8
// relative, so one evaluation is off by ~1e-7; finite_difference divides such differences by
// steps of 2e-2 and 4e-2 (Richardson weights 4/3 and 1/3), which leaves ~1e-5 of noise, and its
// O(h^4) truncation error is ~1e-8 here (the checks pass at 1e-5 + 1e-4 relative). The tolerance
// is ten times the noise; a wrong gradient (a missing path, a swapped gate or direction) is off by
// 1e-2 or more.
void check_lstm_gradients(LstmProblem& problem) {
  const RnnGeometry& g = problem.g;
  constexpr double kStep = 1e-2, kAtol = 1e-4, kRtol = 1e-3;
  problem.forward();
  std::vector<float> dx(g.input_count(), kNaN), dhx(g.state_count(), kNaN),
      dcx(g.state_count(), kNaN);
  problem.backward_data(dx.data(), dhx.data(), dcx.data());
  // lstm_backward_weights adds: start from a non-zero buffer and expect it plus the gradient.
  const std::vector<float> prefill = random_values(g.weight_count(), 99);
  std::vector<float> dweights = prefill;
  problem.backward_weights(dweights);

  check_close(dx, problem.numeric_gradient(problem.x, kStep), kAtol, kRtol, "dx");
  check_close(dhx, problem.numeric_gradient(problem.hx, kStep), kAtol, kRtol, "dhx");
  check_close(dcx, problem.numeric_gradient(problem.cx, kStep), kAtol, kRtol, "dcx");
  std::vector<double> want_dweights = problem.numeric_gradient(problem.weights, kStep);
  for (size_t i = 0; i < want_dweights.size(); ++i) want_dweights[i] += prefill[i];
  check_close(dweights, want_dweights, kAtol, kRtol, "dweights");
}

}  // namespace

TEST_CASE("reference lstm backward matches finite differences: 2 layers", "[reference]") {
  // Each direction count with the loss through y, hy and cy, then with one part cut off: through
  // y only unidirectional (dhy, dcy = nullptr), through hy and cy only bidirectional (dy = nullptr).
  struct Case {
    bool bidirectional;
    uint64_t stream;
    bool LstmProblem::*cut;
  };
  for (const Case& c : {Case{false, 50, &LstmProblem::through_states},
                        Case{true, 60, &LstmProblem::through_outputs}}) {
    for (bool whole_loss : {true, false}) {
      INFO((c.bidirectional ? "bidirectional" : "unidirectional")
           << (whole_loss ? ", loss through y, hy and cy" : ", loss with one part cut off"));
      LstmProblem problem(two_layer_geometry(c.bidirectional), c.stream);
      if (!whole_loss) problem.*c.cut = false;
      check_lstm_gradients(problem);
    }
  }
}

TEST_CASE("reference lstm backward: unwanted dx dhx dcx leave the weight gradient alone",
          "[reference]") {
  LstmProblem problem(two_layer_geometry(true), 70);
  const RnnGeometry& g = problem.g;
  auto weight_gradient = [&](bool want_inputs) {
    std::vector<float> dx(g.input_count()), dhx(g.state_count()), dcx(g.state_count());
    problem.forward();
    if (want_inputs) {
      problem.backward_data(dx.data(), dhx.data(), dcx.data());
    } else {
      problem.backward_data(nullptr, nullptr, nullptr);
    }
    std::vector<float> dweights(g.weight_count(), 0.0f);
    problem.backward_weights(dweights);
    return dweights;
  };
  const std::vector<float> with_inputs = weight_gradient(true);
  CHECK(weight_gradient(false) == with_inputs);
  // Both biases enter the gates as one sum, so their gradients are the same numbers.
  for (int l = 0; l < g.num_layers; ++l) {
    for (int d = 0; d < g.directions(); ++d) {
      const float* dbW = &with_inputs[g.input_bias_offset(l, d)];
      const float* dbR = &with_inputs[g.recurrent_bias_offset(l, d)];
      CHECK(std::vector<float>(dbW, dbW + 4 * g.hidden_size) ==
            std::vector<float>(dbR, dbR + 4 * g.hidden_size));
    }
  }
}

TEST_CASE("reference adam reads the step from step_from_zero when it is given", "[reference]") {
  ReferenceBackend ops;
  const size_t n = 6;
  const std::vector<float> grads = random_values(n, 81);
  std::vector<float> params_host = random_values(n, 82), m_host(n, 0.0f), v_host(n, 0.0f);
  std::vector<float> params_device = params_host, m_device = m_host, v_device = v_host;
  std::vector<float> params_wrong = params_host, m_wrong = m_host, v_wrong = v_host;
  for (int64_t step = 1; step <= 3; ++step) {
    const int32_t step_from_zero = static_cast<int32_t>(step - 1);
    UpdateExtras extras;
    extras.step_from_zero = &step_from_zero;
    ops.adam_update(params_host.data(), grads.data(), m_host.data(), v_host.data(), n, 0.01f,
                    0.9f, 0.999f, 1e-8f, step, 0.0f);
    // The `step` argument (1000) must be ignored: bias correction uses *step_from_zero + 1.
    ops.adam_update(params_device.data(), grads.data(), m_device.data(), v_device.data(), n,
                    0.01f, 0.9f, 0.999f, 1e-8f, 1000, 0.0f, extras);
    ops.adam_update(params_wrong.data(), grads.data(), m_wrong.data(), v_wrong.data(), n, 0.01f,
                    0.9f, 0.999f, 1e-8f, 1000, 0.0f);
  }
  CHECK(params_device == params_host);
  CHECK(m_device == m_host);
  CHECK(v_device == v_host);
  CHECK(params_wrong != params_host);  // so the step number does matter here
}

namespace {

// `values` rounded to `type` and stored as it (2 bytes per element for the 16-bit types).
std::vector<uint16_t> stored_as(DataType type, const std::vector<float>& values) {
  std::vector<uint16_t> stored(values.size());
  for (size_t i = 0; i < values.size(); ++i) store_from_float(type, stored.data(), i, values[i]);
  return stored;
}

std::vector<float> widened(DataType type, const std::vector<uint16_t>& stored) {
  std::vector<float> values(stored.size());
  for (size_t i = 0; i < stored.size(); ++i) values[i] = load_as_float(type, stored.data(), i);
  return values;
}

std::vector<float> rounded(DataType type, std::vector<float> values) {
  for (float& v : values) v = round_to(type, v);
  return values;
}

}  // namespace

// The 16-bit sequence ops are defined as the fp32 op on the stored (rounded) inputs with each
// output rounded once: what the GPU's fp32-inside kernels store. Checked here on strided GEMMs
// with either output type, the in-place loss, the in-place cell backward and the fused LSTM, so
// that the oracle of the [gpu] tests is itself pinned down.
TEST_CASE("reference 16-bit sequence ops are the fp32 ops on rounded inputs, rounded once",
          "[reference][precision]") {
  ReferenceBackend ops;
  for (const DataType type : {DataType::bf16, DataType::f16}) {
    INFO(data_type_name(type));
    // gemm (no, yes) with lda > k and ldc > n, beta 1; then the same into an fp32 C.
    const int m = 3, n = 4, k = 5, lda = 7, ldb = 5, ldc = 6;
    const std::vector<float> a = rounded(type, random_values(m * lda, 1)), b = rounded(type, random_values(n * ldb, 2));
    const std::vector<float> c0 = rounded(type, random_values(m * ldc, 3));
    std::vector<float> expected = c0;
    ops.gemm(Transpose::no, Transpose::yes, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, expected.data(), ldc);
    const std::vector<uint16_t> a16 = stored_as(type, a), b16 = stored_as(type, b);
    std::vector<uint16_t> c16 = stored_as(type, c0);
    ops.gemm(Transpose::no, Transpose::yes, m, n, k, 0.5f, type, a16.data(), lda, b16.data(), ldb, 1.0f, type,
             c16.data(), ldc);
    const std::vector<float> c = widened(type, c16);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < ldc; ++j) {
        const size_t e = static_cast<size_t>(i) * ldc + j;
        // Inside the matrix: the fp32 result rounded; between rows: untouched.
        CHECK(c[e] == (j < n ? round_to(type, expected[e]) : c0[e]));
      }
    std::vector<float> c32(m * ldc, kNaN);
    std::vector<float> expected32(m * ldc, kNaN);
    ops.gemm(Transpose::no, Transpose::yes, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, expected32.data(), ldc);
    ops.gemm(Transpose::no, Transpose::yes, m, n, k, 1.0f, type, a16.data(), lda, b16.data(), ldb, 0.0f,
             DataType::f32, c32.data(), ldc);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) CHECK(c32[i * ldc + j] == expected32[i * ldc + j]);  // fp32 C: no rounding
    CHECK_THROWS_AS(ops.gemm(Transpose::no, Transpose::no, 1, 1, 1, 1.0f, type, a16.data(), 1, b16.data(), 1, 0.0f,
                             type == DataType::bf16 ? DataType::f16 : DataType::bf16, c16.data(), 1),
                    RuntimeError);

    // softmax_cross_entropy_rows in place on 16-bit logits, weighted rows, a loss scale.
    const int rows = 3, classes = 6;
    const std::vector<float> logits = rounded(type, random_values(rows * classes, 4));
    const std::vector<int32_t> labels = {5, 0, 2};
    const std::vector<float> weights = {0.5f, 1.0f, 0.0f};
    const float loss_scale = 8.0f;
    std::vector<float> expected_gradients(logits.size()), expected_losses(rows), losses(rows);
    ops.softmax_cross_entropy_rows(logits.data(), labels.data(), rows, classes, 0.25f, expected_losses.data(),
                                   expected_gradients.data(), &loss_scale, weights.data());
    std::vector<uint16_t> logits16 = stored_as(type, logits);
    ops.softmax_cross_entropy_rows(type, logits16.data(), labels.data(), rows, classes, 0.25f, losses.data(),
                                   logits16.data(), &loss_scale, weights.data());
    CHECK(losses == expected_losses);  // fp32 losses from the same (rounded) logits
    CHECK(widened(type, logits16) == rounded(type, expected_gradients));

    // The cell, backward in place (dgates over gates, dc_prev over dc).
    const int batch = 2, hidden = 3;
    std::vector<float> gates = rounded(type, random_values(batch * 4 * hidden, 5));
    const std::vector<float> bias_w = rounded(type, random_values(4 * hidden, 6)),
                             bias_r = rounded(type, random_values(4 * hidden, 7)),
                             c_prev = rounded(type, random_values(batch * hidden, 8));
    std::vector<uint16_t> gates16 = stored_as(type, gates), c16_cell(batch * hidden), h16(batch * hidden);
    const std::vector<uint16_t> bias_w16 = stored_as(type, bias_w), bias_r16 = stored_as(type, bias_r),
                                c_prev16 = stored_as(type, c_prev);
    std::vector<float> c_cell(batch * hidden), h(batch * hidden);
    ops.lstm_cell_forward(batch, hidden, gates.data(), bias_w.data(), bias_r.data(), c_prev.data(), c_cell.data(),
                          h.data());
    ops.lstm_cell_forward(type, batch, hidden, gates16.data(), bias_w16.data(), bias_r16.data(), c_prev16.data(),
                          c16_cell.data(), h16.data());
    CHECK(widened(type, gates16) == rounded(type, gates));
    CHECK(widened(type, c16_cell) == rounded(type, c_cell));
    CHECK(widened(type, h16) == rounded(type, h));
    // Backward from the 16-bit forward's stored activations.
    const std::vector<float> activations = widened(type, gates16), cells = widened(type, c16_cell);
    const std::vector<float> dh = rounded(type, random_values(batch * hidden, 9)),
                             dc = rounded(type, random_values(batch * hidden, 10));
    std::vector<float> dgates(activations.size()), dc_prev(dc.size());
    ops.lstm_cell_backward(batch, hidden, activations.data(), c_prev.data(), cells.data(), dh.data(), dc.data(),
                           dgates.data(), dc_prev.data());
    std::vector<uint16_t> dc16 = stored_as(type, dc);
    const std::vector<uint16_t> dh16 = stored_as(type, dh), cells16 = stored_as(type, cells);
    ops.lstm_cell_backward(type, batch, hidden, gates16.data(), c_prev16.data(), cells16.data(), dh16.data(),
                           dc16.data(), gates16.data(), dc16.data());
    CHECK(widened(type, gates16) == rounded(type, dgates));
    CHECK(widened(type, dc16) == rounded(type, dc_prev));

    // Embeddings: the forward gathers stored rows bit for bit; the backward adds widened rows to fp32.
    const std::vector<float> table = rounded(type, random_values(4 * 3, 11));
    const std::vector<int32_t> ids = {2, 0, 2};
    const std::vector<uint16_t> table16 = stored_as(type, table);
    std::vector<uint16_t> y16(ids.size() * 3);
    ops.embedding_forward(type, table16.data(), ids.data(), ids.size(), 3, y16.data());
    for (size_t i = 0; i < ids.size(); ++i)
      for (int j = 0; j < 3; ++j) CHECK(y16[i * 3 + j] == table16[ids[i] * 3 + j]);
    std::vector<float> dtable(12, 0.0f), expected_dtable(12, 0.0f);
    const std::vector<float> dy = widened(type, y16);
    ops.embedding_backward(ids.data(), dy.data(), ids.size(), 3, expected_dtable.data());
    ops.embedding_backward(ids.data(), type, y16.data(), ids.size(), 3, dtable.data());
    CHECK(dtable == expected_dtable);

    // The fused LSTM: bidirectional, two layers, given initial states; outputs are the fp32
    // LSTM's on the rounded inputs, rounded; the weight gradient (fp32) is not rounded.
    RnnGeometry g = two_layer_geometry(true);
    const std::vector<float> x = rounded(type, random_values(g.input_count(), 12)),
                             hx = rounded(type, random_values(g.state_count(), 13)),
                             cx = rounded(type, random_values(g.state_count(), 14)),
                             w = rounded(type, random_values(g.weight_count(), 15)),
                             dy_seq = rounded(type, random_values(g.output_count(), 16));
    std::vector<float> y32(g.output_count()), hy32(g.state_count()), cy32(g.state_count()), dx32(g.input_count()),
        dw32(g.weight_count(), 0.0f);
    std::vector<float> reserve = scratch(ops.lstm_reserve_bytes(g)), workspace = scratch(ops.lstm_workspace_bytes(g));
    ops.lstm_forward(g, x.data(), hx.data(), cx.data(), w.data(), y32.data(), hy32.data(), cy32.data(),
                     reserve.data(), workspace.data());
    ops.lstm_backward_data(g, y32.data(), dy_seq.data(), nullptr, nullptr, w.data(), hx.data(), cx.data(),
                           dx32.data(), nullptr, nullptr, reserve.data(), workspace.data());
    const std::vector<float> y_rounded = rounded(type, y32);
    ops.lstm_backward_weights(g, x.data(), hx.data(), y_rounded.data(), dw32.data(), reserve.data(),
                              workspace.data());
    g.type = type;
    const std::vector<uint16_t> x16 = stored_as(type, x), hx16 = stored_as(type, hx), cx16 = stored_as(type, cx),
                                w16 = stored_as(type, w), dy16 = stored_as(type, dy_seq);
    std::vector<uint16_t> y_16(g.output_count()), hy16(g.state_count()), cy16(g.state_count()),
        dx16(g.input_count());
    std::vector<float> dw16(g.weight_count(), 0.0f);
    ops.lstm_forward(g, x16.data(), hx16.data(), cx16.data(), w16.data(), y_16.data(), hy16.data(), cy16.data(),
                     reserve.data(), workspace.data());
    ops.lstm_backward_data(g, y_16.data(), dy16.data(), nullptr, nullptr, w16.data(), hx16.data(), cx16.data(),
                           dx16.data(), nullptr, nullptr, reserve.data(), workspace.data());
    ops.lstm_backward_weights(g, x16.data(), hx16.data(), y_16.data(), dw16.data(), reserve.data(),
                              workspace.data());
    CHECK(widened(type, y_16) == y_rounded);
    CHECK(widened(type, hy16) == rounded(type, hy32));
    CHECK(widened(type, cy16) == rounded(type, cy32));
    CHECK(widened(type, dx16) == rounded(type, dx32));
    CHECK(dw16 == dw32);
  }
}
