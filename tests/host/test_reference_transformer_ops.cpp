// The reference Transformer ops are the oracle for the CUDA ones, so each is checked here on its
// own terms: small cases worked by hand, attention against a direct softmax over logical indices,
// every gradient against central finite differences (causal, with key lengths, packed q/k/v,
// dropout), dropout's mask against the formula of engine/backend/attention_geometry.h, and 16-bit storage
// as the fp32 op on the stored values, rounded once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend/attention_geometry.h"
#include "engine/backend/counter_random.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "tests/host/reference_cnn_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Rows of model_dim elements, nothing between them; scale 1 / sqrt(head_dim).
AttentionGeometry contiguous_geometry(int batch, int heads, int query_len, int key_len, int head_dim) {
  AttentionGeometry g{batch, heads, query_len, key_len, head_dim};
  g.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  g.q_stride = g.k_stride = g.v_stride = g.o_stride = g.model_dim();
  return g;
}

// g made causal, its probabilities dropped out at `rate` with `seed`.
AttentionGeometry causal_with_dropout(AttentionGeometry g, float rate, uint64_t seed) {
  g.causal = true;
  g.dropout_rate = rate;
  g.dropout_seed = seed;
  return g;
}

// attention_forward on contiguous fp32 q, k, v; returns o and leaves lse.
std::vector<float> attend(const AttentionGeometry& g, const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v, const int32_t* key_lengths, std::vector<float>& lse,
                          const int32_t* step = nullptr) {
  ReferenceBackend ops;
  std::vector<float> o(static_cast<size_t>(g.query_len) * g.batch * g.model_dim(), kNaN);
  lse.assign(g.lse_count(), kNaN);
  ops.attention_forward(g, q.data(), k.data(), v.data(), key_lengths, step, o.data(), lse.data(), nullptr);
  return o;
}

// The definition of attention_geometry.h over logical indices, in double, without dropout: o and
// lse as attention_forward lays them out (o at g.o_stride; its other columns left as they are).
void direct_attention(const AttentionGeometry& g, const std::vector<float>& q, const std::vector<float>& k,
                      const std::vector<float>& v, const int32_t* key_lengths, std::vector<double>& o,
                      std::vector<double>& lse) {
  lse.assign(g.lse_count(), 0.0);
  for (int b = 0; b < g.batch; ++b) {
    const int length = key_lengths != nullptr ? key_lengths[b] : g.key_len;
    for (int h = 0; h < g.heads; ++h) {
      for (int i = 0; i < g.query_len; ++i) {
        std::vector<double> s(g.key_len, -INFINITY);
        double row_max = -INFINITY;
        for (int j = 0; j < g.key_len; ++j) {
          if (j >= length || (g.causal && j > i)) continue;
          double dot = 0.0;
          for (int d = 0; d < g.head_dim; ++d) {
            dot += double(q[(size_t(i) * g.batch + b) * g.q_stride + h * g.head_dim + d]) *
                   k[(size_t(j) * g.batch + b) * g.k_stride + h * g.head_dim + d];
          }
          s[j] = g.scale * dot;
          row_max = std::max(row_max, s[j]);
        }
        double sum = 0.0;
        for (int j = 0; j < g.key_len; ++j) sum += std::isinf(s[j]) ? 0.0 : std::exp(s[j] - row_max);
        lse[(size_t(b) * g.heads + h) * g.query_len + i] = sum > 0.0 ? row_max + std::log(sum) : -INFINITY;
        for (int d = 0; d < g.head_dim; ++d) {
          double value = 0.0;
          for (int j = 0; j < g.key_len; ++j) {
            if (std::isinf(s[j])) continue;
            value += std::exp(s[j] - row_max) / sum * v[(size_t(j) * g.batch + b) * g.v_stride + h * g.head_dim + d];
          }
          o[(size_t(i) * g.batch + b) * g.o_stride + h * g.head_dim + d] = value;
        }
      }
    }
  }
}

// An attention problem in fp32 with the loss L = sum(o * w): q, k and v in one buffer `qkv`,
// either as three blocks (rows of model_dim) or packed as column slices of rows of 3 * model_dim,
// as a fused projection leaves them; their gradients in `dqkv`, laid out alike.
struct AttentionProblem {
  AttentionGeometry g;
  std::vector<int32_t> key_lengths;  // empty: every key real
  int32_t step = 0;
  size_t q_at = 0, k_at = 0, v_at = 0;  // where q, k and v start in qkv (and dq, dk, dv in dqkv)
  std::vector<float> qkv, w, o, lse, dqkv;

  AttentionProblem(const AttentionGeometry& geometry, bool packed, uint64_t stream) : g(geometry) {
    const int d = g.model_dim();
    const size_t query_rows = size_t(g.query_len) * g.batch, key_rows = size_t(g.key_len) * g.batch;
    size_t count = 0;
    if (packed) {
      REQUIRE(g.query_len == g.key_len);
      g.q_stride = g.k_stride = g.v_stride = 3 * d;
      k_at = d;
      v_at = 2 * d;
      count = query_rows * 3 * d;
    } else {
      g.q_stride = g.k_stride = g.v_stride = d;
      k_at = query_rows * d;
      v_at = k_at + key_rows * d;
      count = v_at + key_rows * d;
    }
    g.o_stride = d;
    qkv = random_values(count, stream);
    w = random_values(query_rows * d, stream + 1);
    o.assign(w.size(), kNaN);
    lse.assign(g.lse_count(), kNaN);
    dqkv.assign(count, kNaN);
  }
  const int32_t* lengths() const { return key_lengths.empty() ? nullptr : key_lengths.data(); }
  void forward() {
    ReferenceBackend ops;
    ops.attention_forward(g, qkv.data() + q_at, qkv.data() + k_at, qkv.data() + v_at, lengths(), &step,
                          o.data(), lse.data(), nullptr);
  }
  double loss() {
    forward();
    return weighted_sum(o, w);
  }
  void backward() {
    forward();
    ReferenceBackend ops;
    ops.attention_backward(g, qkv.data() + q_at, qkv.data() + k_at, qkv.data() + v_at, o.data(), w.data(),
                           lse.data(), lengths(), &step, dqkv.data() + q_at, dqkv.data() + k_at,
                           dqkv.data() + v_at, nullptr);
  }
};

// Sentences [first, first + count) of a (T, batch, width) sequence-major tensor, as a (T, count,
// width) one: the buffer a replica holding only those sentences would have.
std::vector<float> sentences(const std::vector<float>& x, int T, int batch, int width, int first, int count) {
  std::vector<float> part;
  for (int t = 0; t < T; ++t) {
    const auto row = x.begin() + (size_t(t) * batch + first) * width;
    part.insert(part.end(), row, row + size_t(count) * width);
  }
  return part;
}

// The lse entries of sentences [first, first + count): (batch, heads, query_len) keeps a
// sentence's entries together.
std::vector<float> lse_of(const std::vector<float>& lse, const AttentionGeometry& g, int first, int count) {
  const size_t per_sentence = size_t(g.heads) * g.query_len;
  return std::vector<float>(lse.begin() + first * per_sentence, lse.begin() + (first + count) * per_sentence);
}

}  // namespace

// ---- row bias -----------------------------------------------------------------------------------

namespace {

RowBiasEpilogue relu_if(bool relu) {
  RowBiasEpilogue then;
  then.relu = relu;
  return then;
}

}  // namespace

TEST_CASE("reference add_row_bias adds the bias to every row with an optional ReLU", "[reference][transformer]") {
  ReferenceBackend ops;
  const std::vector<float> bias = {0.5f, 1.0f, -4.0f};
  std::vector<float> y = {1, -2, 3, -4, 5, -6};  // (2, 3)
  ops.add_row_bias(DataType::f32, y.data(), bias.data(), 2, 3, relu_if(false));
  CHECK(y == std::vector<float>{1.5f, -1.0f, -1.0f, -3.5f, 6.0f, -10.0f});
  y = {1, -2, 3, -4, 5, -6};
  ops.add_row_bias(DataType::f32, y.data(), bias.data(), 2, 3, relu_if(true));
  CHECK(y == std::vector<float>{1.5f, 0.0f, 0.0f, 0.0f, 6.0f, 0.0f});
}

TEST_CASE("reference add_row_bias in fp16 and bf16 rounds the fp32 sum once", "[reference][transformer]") {
  ReferenceBackend ops;
  const int rows = 7, cols = 9;
  const std::vector<float> bias = random_values(cols, 301);
  for (DataType type : kHalfTypes) {
    for (bool relu : {false, true}) {
      INFO(data_type_name(type) << (relu ? " relu" : ""));
      TypedBuffer y16(type, random_values(size_t(rows) * cols, 302));
      std::vector<float> y = y16.values();
      ops.add_row_bias(DataType::f32, y.data(), bias.data(), rows, cols, relu_if(relu));
      REQUIRE(changed_by_rounding(type, y) > y.size() / 4);
      ops.add_row_bias(type, y16.data(), bias.data(), rows, cols, relu_if(relu));
      check_same_bits(y16.values(), rounded(type, y), "y");
    }
  }
}

TEST_CASE("reference add_row_bias's epilogue equals the bias, dropout and residual add in sequence",
          "[reference][transformer]") {
  // The fused pass must leave the bits the separate ops leave (backend.h): bias (+ ReLU) stored,
  // dropout_forward over the whole buffer from the same first index, then add_tensors.
  ReferenceBackend ops;
  const int rows = 6, cols = 10;  // odd first index below: the mask's pairs straddle rows
  const size_t n = static_cast<size_t>(rows) * cols;
  const std::vector<float> bias = random_values(cols, 305);
  const int32_t step = 3;
  for (DataType type : kAllTypes) {
    for (bool relu : {false, true}) {
      for (bool residual : {false, true}) {
        INFO(data_type_name(type) << (relu ? " relu" : "") << (residual ? " residual" : ""));
        const TypedBuffer start(type, random_values(n, 306, -2.0f, 2.0f));
        const TypedBuffer skip(type, random_values(n, 307, -2.0f, 2.0f));
        RowBiasEpilogue then = relu_if(relu);
        then.dropout.rate = 0.25f;
        then.dropout.seed = 77;
        then.dropout.first_index = 1001;
        then.dropout.step = &step;
        TypedBuffer fused(type, start.values()), fused_sum(type, std::vector<float>(n, 0.0f));
        if (residual) {
          then.residual = skip.data();
          then.out = fused_sum.data();
        }
        ops.add_row_bias(type, fused.data(), bias.data(), rows, cols, then);

        TypedBuffer separate(type, start.values()), separate_sum(type, std::vector<float>(n, 0.0f));
        ops.add_row_bias(type, separate.data(), bias.data(), rows, cols, relu_if(relu));
        ops.dropout_forward(type, separate.data(), separate.data(), n, then.dropout.rate, then.dropout.seed,
                            then.dropout.first_index, &step);
        if (residual) {
          ops.add_tensors(type, skip.data(), separate.data(), separate_sum.data(), n, false);
          check_same_bits(fused_sum.values(), separate_sum.values(), "out");
        } else {
          check_same_bits(fused.values(), separate.values(), "y");
        }
        // The mask did drop something and keep something, so the comparison saw both.
        const std::vector<float> dropped = separate.values();
        const size_t zeros = static_cast<size_t>(std::count(dropped.begin(), dropped.end(), 0.0f));
        CHECK(zeros >= n / 10);
        CHECK(zeros < n);
      }
    }
  }
}

TEST_CASE("reference linear_forward with fused epilogues rounds the fp32 product, bias copy and residual once",
          "[reference][transformer]") {
  // x (rows, in) times W (out, in) transposed; the fp32 product computed here by the reference's
  // own fp32 GEMM on the stored 16-bit values, the bias copy and residual added, rounded once.
  const int rows = 5, in = 16, out = 8;
  const size_t n = static_cast<size_t>(rows) * out;
  for (DataType type : kHalfTypes) {
    INFO(data_type_name(type));
    ReferenceBackend ops;
    ops.set_fuse_linear_epilogues(true);
    const TypedBuffer x(type, random_values(size_t(rows) * in, 311)), w(type, random_values(size_t(out) * in, 312));
    const TypedBuffer bias_copy(type, random_values(out, 313)), skip(type, random_values(n, 314, -2.0f, 2.0f));
    const std::vector<float> bias = bias_copy.values();
    std::vector<float> product(n);
    const std::vector<float> xs = x.values(), ws = w.values();
    ops.gemm(Transpose::no, Transpose::yes, rows, out, in, 1.0f, DataType::f32, xs.data(), in, ws.data(), in, 0.0f,
             DataType::f32, product.data(), out);
    std::vector<float> with_bias(n), with_residual(n);
    const std::vector<float> skips = skip.values();
    for (size_t at = 0; at < n; ++at) {
      with_bias[at] = product[at] + bias[at % out];
      with_residual[at] = skips[at] + with_bias[at];
    }
    CHECK(ops.linear_forward_fused(type, rows, in, out, RowBiasEpilogue{}));
    TypedBuffer y(type, std::vector<float>(n, 0.0f)), sum(type, std::vector<float>(n, 0.0f));
    ops.linear_forward(type, x.data(), w.data(), bias.data(), bias_copy.data(), rows, in, out, y.data(), {});
    check_same_bits(y.values(), rounded(type, with_bias), "y");
    RowBiasEpilogue then;
    then.residual = skip.data();
    then.out = sum.data();
    ops.linear_forward(type, x.data(), w.data(), bias.data(), bias_copy.data(), rows, in, out, y.data(), then);
    check_same_bits(sum.values(), rounded(type, with_residual), "out");
    // Op by op (the default) the product and the biased sum are rounded first: other bits.
    ReferenceBackend plain;
    TypedBuffer plain_sum(type, std::vector<float>(n, 0.0f));
    then.out = plain_sum.data();
    plain.linear_forward(type, x.data(), w.data(), bias.data(), bias_copy.data(), rows, in, out, y.data(), then);
    CHECK(plain_sum.values() != sum.values());
  }
}

TEST_CASE("reference relu_dropout_backward equals dropout_backward then relu_backward",
          "[reference][transformer]") {
  ReferenceBackend ops;
  const size_t n = 301;
  const int32_t step = 5;
  const float rate = 0.1f;
  for (DataType type : kAllTypes) {
    INFO(data_type_name(type));
    // y: the forward's output, ReLU then dropout of random values.
    TypedBuffer y(type, random_values(n, 308, -1.0f, 1.0f));
    ops.relu_forward(type, y.data(), y.data(), n);
    ops.dropout_forward(type, y.data(), y.data(), n, rate, 91, 12, &step);
    const TypedBuffer dy(type, random_values(n, 309, -3.0f, 3.0f));
    TypedBuffer fused(type, dy.values()), separate(type, dy.values());
    ops.relu_dropout_backward(type, y.data(), fused.data(), fused.data(), n, rate);
    ops.dropout_backward(type, separate.data(), separate.data(), n, rate, 91, 12, &step);
    ops.relu_backward(type, y.data(), separate.data(), separate.data(), n);
    check_same_bits(fused.values(), separate.values(), "dx");
    const std::vector<float> dx = fused.values();
    CHECK(std::count(dx.begin(), dx.end(), 0.0f) > static_cast<std::ptrdiff_t>(n / 3));  // ReLU's half and the drops
    CHECK(std::count(dx.begin(), dx.end(), 0.0f) < static_cast<std::ptrdiff_t>(n));
  }
}

// ---- GELU ---------------------------------------------------------------------------------------

namespace {

const double kSqrtTwoOverPi = std::sqrt(2.0 / std::acos(-1.0));

// The tanh form of GELU and its derivative in double, from the formula itself (not gelu.h).
double gelu_in_double(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrtTwoOverPi * (x + 0.044715 * x * x * x)));
}

double gelu_derivative_in_double(double x) {
  const double t = std::tanh(kSqrtTwoOverPi * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrtTwoOverPi * (1.0 + 3.0 * 0.044715 * x * x);
}

RowBiasEpilogue gelu_into(void* activated) {
  RowBiasEpilogue then;
  then.gelu = true;
  then.activated = activated;
  return then;
}

// GELU of `x` (fp32) by the reference's add_row_bias with a zero bias.
std::vector<float> reference_gelu(ReferenceBackend& ops, std::vector<float> x) {
  const std::vector<float> zero_bias(x.size(), 0.0f);
  std::vector<float> activated(x.size());
  ops.add_row_bias(DataType::f32, x.data(), zero_bias.data(), 1, static_cast<int>(x.size()),
                   gelu_into(activated.data()));
  return activated;
}

}  // namespace

TEST_CASE("reference add_row_bias with gelu: y keeps the pre-activation, activated its GELU",
          "[reference][transformer]") {
  ReferenceBackend ops;
  const int rows = 5, cols = 13;
  const size_t n = static_cast<size_t>(rows) * cols;
  const std::vector<float> bias = random_values(cols, 320);
  const std::vector<float> start = random_values(n, 321, -5.0f, 5.0f);  // GELU's bend and both tails
  std::vector<float> sums(n);
  for (size_t i = 0; i < n; ++i) sums[i] = start[i] + bias[i % cols];

  std::vector<float> y = start, activated(n, kNaN);
  ops.add_row_bias(DataType::f32, y.data(), bias.data(), rows, cols, gelu_into(activated.data()));
  check_same_bits(y, sums, "y, the pre-activation");
  std::vector<double> expected(n);
  for (size_t i = 0; i < n; ++i) expected[i] = gelu_in_double(y[i]);
  // fp32 arithmetic with tanhf: a few roundings, relative to GELU's value, and tanh's own error
  // of an ulp or two near +-1, which 1 + tanh turns into an absolute error of about |x| 2^-24
  // in the negative tail.
  check_close(activated, expected, 1e-6, 1e-6, "activated, fp32");

  for (DataType type : kHalfTypes) {
    INFO(data_type_name(type));
    TypedBuffer y16(type, start), activated16(type, n, kNaN);
    ops.add_row_bias(type, y16.data(), bias.data(), rows, cols, gelu_into(activated16.data()));
    // v is the sum rounded to the type, as without GELU; GELU is computed in fp32 from that
    // rounded v and rounded once.
    std::vector<float> v = rounded(type, start);
    for (size_t i = 0; i < n; ++i) v[i] = round_to(type, v[i] + bias[i % cols]);
    check_same_bits(y16.values(), v, "y, the pre-activation");
    const std::vector<float> gelu_of_v = reference_gelu(ops, v);
    REQUIRE(changed_by_rounding(type, gelu_of_v) > n / 2);
    check_same_bits(activated16.values(), rounded(type, gelu_of_v), "activated");
  }
}

TEST_CASE("reference gelu_backward is dy times GELU's derivative, by the formula and by finite differences",
          "[reference][transformer]") {
  ReferenceBackend ops;
  std::vector<float> x = random_values(61, 322, -6.0f, 6.0f);
  x.insert(x.end(), {0.0f, -0.0f, 1.0f, -1.0f, 30.0f, -30.0f});
  const size_t n = x.size();
  const std::vector<float> dy = random_values(n, 323, -2.0f, 2.0f);
  std::vector<float> dx(n, kNaN);
  ops.gelu_backward(DataType::f32, x.data(), dy.data(), dx.data(), n);

  std::vector<double> expected(n);
  for (size_t i = 0; i < n; ++i) expected[i] = dy[i] * gelu_derivative_in_double(x[i]);
  // fp32 roundings of values up to about 1.1, and tanh's error of an ulp or two (1.2e-7 near
  // +-1) times d gelu' / dt = 0.5 - x t sqrt(2/pi) (1 + 0.134 x^2), about 10 at |x| = 4, where t
  // is not yet +-1 in fp32: 1.2e-6 |dy|, |dy| <= 2.
  check_close(dx, expected, 5e-6, 1e-6, "dx against the formula");
  CHECK(dx[61] == Approx(0.5 * dy[61]).epsilon(1e-7));  // gelu'(0) = 1/2
  CHECK(dx[65] == dy[65]);                               // gelu'(30) = 1 in fp32
  CHECK(dx[66] == 0.0f);                                 // gelu'(-30) = 0 in fp32

  // The derivative of the forward op itself: central differences of sum(dy * gelu(x)) in x.
  std::vector<float> probe = x;
  probe.resize(61);  // the random points, where GELU is smooth at the difference's scale
  for (size_t i = 0; i < probe.size(); ++i) {
    INFO("x = " << probe[i]);
    const double numeric = finite_difference(probe[i], 1e-2, [&] {
      return weighted_sum(reference_gelu(ops, probe), std::vector<float>(dy.begin(), dy.begin() + 61));
    });
    // Only term i changes, the others cancel exactly; its fp32 value (|dy gelu| <= 12, rounded
    // to 2^-24 relative, tanh an ulp or two off) over 2h = 0.02 is off by up to about 5e-5, and
    // Richardson's weights (4/3, 1/3) add up to 5/3 of that. The truncation, O(h^4), is far below.
    CHECK(dx[i] == Approx(numeric).margin(2e-4));
  }

  // In place (dx over dy), and 16-bit storage: the fp32 op on the stored values, rounded once.
  std::vector<float> in_place = dy;
  ops.gelu_backward(DataType::f32, x.data(), in_place.data(), in_place.data(), n);
  check_same_bits(in_place, dx, "dx over dy");
  for (DataType type : kHalfTypes) {
    INFO(data_type_name(type));
    const TypedBuffer x16(type, x);
    TypedBuffer dx16(type, dy);
    ops.gelu_backward(type, x16.data(), dx16.data(), dx16.data(), n);
    const std::vector<float> x_stored = x16.values(), dy_stored = rounded(type, dy);
    std::vector<float> wide(n);
    ops.gelu_backward(DataType::f32, x_stored.data(), dy_stored.data(), wide.data(), n);
    REQUIRE(changed_by_rounding(type, wide) > n / 2);
    check_same_bits(dx16.values(), rounded(type, wide), "dx");
  }
}

TEST_CASE("reference add_row_bias refuses gelu with relu, dropout or a residual, and gelu without its output",
          "[reference][transformer]") {
  ReferenceBackend ops;
  std::vector<float> y(6, 1.0f), activated(6), skip(6), out(6);
  const std::vector<float> bias(3, 0.5f);
  const int32_t step = 1;
  const auto refused = [&](const RowBiasEpilogue& then, const std::string& why) {
    INFO(why);
    CHECK_THROWS_WITH(ops.add_row_bias(DataType::f32, y.data(), bias.data(), 2, 3, then),
                      Catch::Contains("ReferenceBackend::add_row_bias: ") && Catch::Contains(why));
    CHECK(y == std::vector<float>(6, 1.0f));  // refused before anything is written
  };
  RowBiasEpilogue with_relu = gelu_into(activated.data());
  with_relu.relu = true;
  refused(with_relu, "gelu takes no ReLU, dropout or residual");
  RowBiasEpilogue with_dropout = gelu_into(activated.data());
  with_dropout.dropout.rate = 0.1f;
  with_dropout.dropout.step = &step;
  refused(with_dropout, "gelu takes no ReLU, dropout or residual");
  RowBiasEpilogue with_residual = gelu_into(activated.data());
  with_residual.residual = skip.data();
  with_residual.out = out.data();
  refused(with_residual, "gelu takes no ReLU, dropout or residual");
  refused(gelu_into(nullptr), "gelu needs `activated`");
  refused(gelu_into(y.data()), "must not be y");
  RowBiasEpilogue activated_alone;
  activated_alone.activated = activated.data();
  refused(activated_alone, "`activated` is written only with gelu");

  // A dropout rate of 0 draws nothing, so it goes with GELU.
  RowBiasEpilogue no_dropout = gelu_into(activated.data());
  no_dropout.dropout.seed = 5;
  ops.add_row_bias(DataType::f32, y.data(), bias.data(), 2, 3, no_dropout);
  CHECK(y == std::vector<float>(6, 1.5f));
  CHECK(activated[0] == Approx(gelu_in_double(1.5)).epsilon(1e-6));
}

// ---- layer normalisation ------------------------------------------------------------------------

TEST_CASE("reference layer_norm_forward: statistics and outputs by hand", "[reference][transformer]") {
  ReferenceBackend ops;
  // Row 0 (1, 2, 3, 4): mean 2.5, biased variance 1.25; with epsilon 2.75, inv_std = 1/sqrt(4) = 0.5
  // and x_hat = (-0.75, -0.25, 0.25, 0.75). Row 1 is constant: x_hat = 0, y = beta,
  // inv_std = 1/sqrt(2.75) = 0.6030227.
  const std::vector<float> x = {1, 2, 3, 4, 7, 7, 7, 7};
  const std::vector<float> gamma = {1.0f, 2.0f, 0.5f, -1.0f}, beta = {0.0f, 1.0f, -1.0f, 0.5f};
  std::vector<float> y(8, kNaN), mean(2, kNaN), inv_std(2, kNaN);
  ops.layer_norm_forward(DataType::f32, x.data(), gamma.data(), beta.data(), 2, 4, 2.75f, y.data(), mean.data(),
                         inv_std.data());
  CHECK(mean == std::vector<float>{2.5f, 7.0f});
  CHECK(inv_std[0] == 0.5f);
  CHECK(inv_std[1] == Approx(0.6030227).epsilon(1e-6));
  check_close(y, std::vector<double>{-0.75, 0.5, -0.875, -0.25, 0.0, 1.0, -1.0, 0.5}, 1e-7, 1e-7, "y");
  CHECK(ops.layer_norm_workspace_bytes(2, 4) == 0);
}

TEST_CASE("reference layer_norm_backward is the finite-difference gradient and may run in place",
          "[reference][transformer]") {
  ReferenceBackend ops;
  const int rows = 3, cols = 5;
  const float epsilon = 1e-3f;
  std::vector<float> x = random_values(size_t(rows) * cols, 311, -2.0f, 2.0f);
  std::vector<float> gamma = random_values(cols, 312, 0.5f, 1.5f), beta = random_values(cols, 313);
  const std::vector<float> w = random_values(x.size(), 314);  // L = sum(y * w): dy = w
  std::vector<float> y(x.size()), mean(rows), inv_std(rows);
  auto loss = [&] {
    ops.layer_norm_forward(DataType::f32, x.data(), gamma.data(), beta.data(), rows, cols, epsilon, y.data(),
                           mean.data(), inv_std.data());
    return weighted_sum(y, w);
  };
  loss();
  std::vector<float> dx(x.size(), kNaN), dgamma(cols, kNaN), dbeta(cols, kNaN);
  ops.layer_norm_backward(DataType::f32, x.data(), w.data(), gamma.data(), mean.data(), inv_std.data(), rows,
                          cols, dx.data(), dgamma.data(), dbeta.data(), nullptr);
  std::vector<double> fd_x(x.size()), fd_gamma(cols), fd_beta(cols);
  for (size_t i = 0; i < x.size(); ++i) fd_x[i] = finite_difference(x[i], 1.0 / 64, loss);
  for (int c = 0; c < cols; ++c) {
    fd_gamma[c] = finite_difference(gamma[c], 1.0 / 64, loss);
    fd_beta[c] = finite_difference(beta[c], 1.0 / 64, loss);
  }
  check_close(dx, fd_x, 1e-3, 1e-3, "dx");
  check_close(dgamma, fd_gamma, 1e-3, 1e-3, "dgamma");
  check_close(dbeta, fd_beta, 1e-3, 1e-3, "dbeta");

  // dx written over dy: each row's sums are taken before the row is overwritten.
  loss();
  std::vector<float> in_place = w;
  ops.layer_norm_backward(DataType::f32, x.data(), in_place.data(), gamma.data(), mean.data(), inv_std.data(),
                          rows, cols, in_place.data(), dgamma.data(), dbeta.data(), nullptr);
  check_same_bits(in_place, dx, "dx in place");

  // Accumulated: the gradient added to a residual's already in dx, one fp32 addition each.
  const std::vector<float> residual = random_values(x.size(), 315);
  std::vector<float> accumulated = residual;
  ops.layer_norm_backward(DataType::f32, x.data(), w.data(), gamma.data(), mean.data(), inv_std.data(), rows, cols,
                          accumulated.data(), dgamma.data(), dbeta.data(), nullptr, true);
  std::vector<float> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) expected[i] = residual[i] + dx[i];
  check_same_bits(accumulated, expected, "dx accumulated");
}

TEST_CASE("reference layer norm in fp16 and bf16: the fp32 op on the stored values rounded once",
          "[reference][transformer]") {
  ReferenceBackend ops;
  const int rows = 6, cols = 10;
  const size_t n = size_t(rows) * cols;
  const float epsilon = 1e-5f;
  const std::vector<float> gamma = random_values(cols, 321, 0.5f, 1.5f), beta = random_values(cols, 322);
  for (DataType type : kHalfTypes) {
    INFO(data_type_name(type));
    const TypedBuffer x16(type, random_values(n, 323, -3.0f, 3.0f)), dy16(type, random_values(n, 324));
    const std::vector<float> x = x16.values(), dy = dy16.values();
    std::vector<float> y(n), mean(rows), inv_std(rows), mean16(rows), inv_std16(rows);
    ops.layer_norm_forward(DataType::f32, x.data(), gamma.data(), beta.data(), rows, cols, epsilon, y.data(),
                           mean.data(), inv_std.data());
    REQUIRE(changed_by_rounding(type, y) > n / 4);
    TypedBuffer y16(type, n, kNaN);
    ops.layer_norm_forward(type, x16.data(), gamma.data(), beta.data(), rows, cols, epsilon, y16.data(),
                           mean16.data(), inv_std16.data());
    check_same_bits(y16.values(), rounded(type, y), "y");
    check_same_bits(mean16, mean, "saved_mean");
    check_same_bits(inv_std16, inv_std, "saved_inv_std");

    std::vector<float> dx(n), dgamma(cols), dbeta(cols), dgamma16(cols), dbeta16(cols);
    ops.layer_norm_backward(DataType::f32, x.data(), dy.data(), gamma.data(), mean.data(), inv_std.data(), rows,
                            cols, dx.data(), dgamma.data(), dbeta.data(), nullptr);
    REQUIRE(changed_by_rounding(type, dx) > n / 4);
    TypedBuffer dx16 = dy16;  // in place, dx over dy
    ops.layer_norm_backward(type, x16.data(), dx16.data(), gamma.data(), mean16.data(), inv_std16.data(), rows,
                            cols, dx16.data(), dgamma16.data(), dbeta16.data(), nullptr);
    check_same_bits(dx16.values(), rounded(type, dx), "dx");
    check_same_bits(dgamma16, dgamma, "dgamma");
    check_same_bits(dbeta16, dbeta, "dbeta");
  }
}

// ---- positional encoding ------------------------------------------------------------------------

TEST_CASE("reference add_positional_encoding: the sinusoids by hand and in place", "[reference][transformer]") {
  ReferenceBackend ops;
  const int seq_len = 3, batch = 2, dim = 6;
  const size_t n = size_t(seq_len) * batch * dim;
  // PE(t, 2i) = sin(t / 10000^(2i/6)), PE(t, 2i+1) = cos(the same): the frequencies of columns
  // (0, 1), (2, 3), (4, 5) are 1, 10000^(-1/3) = 0.0464159 and 10000^(-2/3) = 0.00215443.
  const double pe[3][6] = {
      {0.0, 1.0, 0.0, 1.0, 0.0, 1.0},
      {0.8414710, 0.5403023, 0.0463992, 0.9989230, 0.0021544, 0.9999977},    // sin 1, cos 1, ...
      {0.9092974, -0.4161468, 0.0926985, 0.9956942, 0.0043089, 0.9999907}};  // sin 2, cos 2, ...
  const std::vector<float> zeros(n, 0.0f);
  std::vector<float> y(n, kNaN);
  ops.add_positional_encoding(DataType::f32, zeros.data(), y.data(), seq_len, batch, dim, 2.0f);
  const std::vector<float> x = random_values(n, 331);
  std::vector<double> want_pe(n), want_scaled(n);
  for (int t = 0; t < seq_len; ++t) {
    for (int b = 0; b < batch; ++b) {  // every sentence of a step gets the step's encoding
      for (int c = 0; c < dim; ++c) {
        const size_t at = (size_t(t) * batch + b) * dim + c;
        want_pe[at] = pe[t][c];
        want_scaled[at] = 2.0 * x[at] + pe[t][c];
      }
    }
  }
  check_close(y, want_pe, 1e-7, 0.0, "PE");

  // y = x * scale + PE, here written over x.
  std::vector<float> in_place = x;
  ops.add_positional_encoding(DataType::f32, in_place.data(), in_place.data(), seq_len, batch, dim, 2.0f);
  check_close(in_place, want_scaled, 1e-6, 1e-6, "x * 2 + PE in place");
}

TEST_CASE("reference add_positional_encoding in fp16 and bf16 rounds once", "[reference][transformer]") {
  ReferenceBackend ops;
  const int seq_len = 9, batch = 3, dim = 8;
  const size_t n = size_t(seq_len) * batch * dim;
  for (DataType type : kHalfTypes) {
    INFO(data_type_name(type));
    const TypedBuffer x16(type, random_values(n, 341));
    std::vector<float> y = x16.values();
    ops.add_positional_encoding(DataType::f32, y.data(), y.data(), seq_len, batch, dim, 1.5f);
    REQUIRE(changed_by_rounding(type, y) > n / 4);
    TypedBuffer y16(type, n, kNaN);
    ops.add_positional_encoding(type, x16.data(), y16.data(), seq_len, batch, dim, 1.5f);
    check_same_bits(y16.values(), rounded(type, y), "y");
  }
}

// ---- attention: by hand -------------------------------------------------------------------------

TEST_CASE("reference attention with one key returns its value", "[reference][transformer]") {
  // One key: p = 1 whatever the score, so every query row gets v exactly; lse is the score.
  AttentionGeometry g = contiguous_geometry(1, 1, 2, 1, 2);
  g.scale = 0.5f;
  const std::vector<float> q = {0.3f, -0.7f, 2.0f, 1.0f}, k = {1.0f, 2.0f}, v = {5.0f, -3.0f};
  std::vector<float> lse;
  const std::vector<float> o = attend(g, q, k, v, nullptr, lse);
  CHECK(o == std::vector<float>{5.0f, -3.0f, 5.0f, -3.0f});
  CHECK(lse[0] == Approx(0.5 * (0.3 - 1.4)).epsilon(1e-6));
  CHECK(lse[1] == Approx(0.5 * (2.0 + 2.0)).epsilon(1e-6));
}

TEST_CASE("reference attention weights the values by the softmax of the scores", "[reference][transformer]") {
  // Scores (0, ln 3): p = (1/4, 3/4), o = 4/4 + 3 * 8/4 = 7, lse = ln(1 + 3) = ln 4.
  AttentionGeometry g = contiguous_geometry(1, 1, 1, 2, 1);
  g.scale = 1.0f;
  const std::vector<float> q = {1.0f}, k = {0.0f, static_cast<float>(std::log(3.0))}, v = {4.0f, 8.0f};
  std::vector<float> lse;
  const std::vector<float> o = attend(g, q, k, v, nullptr, lse);
  CHECK(o[0] == Approx(7.0).epsilon(1e-6));
  CHECK(lse[0] == Approx(std::log(4.0)).epsilon(1e-6));
}

TEST_CASE("reference attention with equal scores averages the values in each head", "[reference][transformer]") {
  // q = 0: every score is 0, p = 1/4, o = the mean of the four values of its head, lse = ln 4.
  const AttentionGeometry g = contiguous_geometry(1, 2, 2, 4, 2);
  const std::vector<float> q(2 * 4, 0.0f), k = random_values(4 * 4, 351);
  const std::vector<float> v = {1, 2, 10, 20, 3, 4, 30, 40, 5, 6, 50, 60, 7, 8, 70, 80};  // (4, heads * 2)
  std::vector<float> lse;
  const std::vector<float> o = attend(g, q, k, v, nullptr, lse);
  check_close(o, std::vector<double>{4, 5, 40, 50, 4, 5, 40, 50}, 1e-6, 1e-6, "o");
  check_close(lse, std::vector<double>(4, std::log(4.0)), 1e-6, 1e-6, "lse");
}

TEST_CASE("reference attention gives keys beyond key_lengths no weight and no gradient", "[reference][transformer]") {
  // Two sentences of three keys, lengths 2 and 3, q = 0: sentence 0 averages its first two
  // values, sentence 1 all three. Rows are sequence-major: key j of sentence b is row j * 2 + b.
  const AttentionGeometry g = contiguous_geometry(2, 1, 1, 3, 1);
  const std::vector<int32_t> lengths = {2, 3};
  const std::vector<float> q = {0.0f, 0.0f}, k = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  const std::vector<float> v = {1.0f, 10.0f, 2.0f, 20.0f, 100.0f, 30.0f};  // sentence 0: 1, 2, (100)
  std::vector<float> lse;
  const std::vector<float> o = attend(g, q, k, v, lengths.data(), lse);
  check_close(o, std::vector<double>{1.5, 20.0}, 1e-6, 1e-6, "o");
  check_close(lse, std::vector<double>{std::log(2.0), std::log(3.0)}, 1e-6, 1e-6, "lse");

  ReferenceBackend ops;
  const std::vector<float> d_o = {1.0f, 1.0f};
  std::vector<float> dq(2, kNaN), dk(6, kNaN), dv(6, kNaN);
  ops.attention_backward(g, q.data(), k.data(), v.data(), o.data(), d_o.data(), lse.data(), lengths.data(),
                         nullptr, dq.data(), dk.data(), dv.data(), nullptr);
  CHECK(dk[4] == 0.0f);  // key 2 of sentence 0
  CHECK(dv[4] == 0.0f);
  check_close(dv, std::vector<double>{0.5, 1.0 / 3, 0.5, 1.0 / 3, 0.0, 1.0 / 3}, 1e-7, 1e-6, "dv = p * dO");
}

TEST_CASE("reference causal attention: query i sees keys 0 to i only", "[reference][transformer]") {
  // q = 0 and causal: row 0 takes v_0, row 1 the mean of v_0 and v_1, row 2 of all three; whatever
  // later keys hold (k included) cannot reach an earlier row.
  AttentionGeometry g = contiguous_geometry(1, 1, 3, 3, 1);
  g.causal = true;
  const std::vector<float> q = {0.0f, 0.0f, 0.0f}, k = {0.5f, -1.0f, 2.0f}, v = {3.0f, 5.0f, 10.0f};
  std::vector<float> lse;
  const std::vector<float> o = attend(g, q, k, v, nullptr, lse);
  check_close(o, std::vector<double>{3.0, 4.0, 6.0}, 1e-6, 1e-6, "o");
  check_close(lse, std::vector<double>{0.0, std::log(2.0), std::log(3.0)}, 1e-6, 1e-6, "lse");

  // With real scores, row 0 still equals v_0 exactly.
  const std::vector<float> q2 = {1.0f, -2.0f, 0.5f};
  const std::vector<float> o2 = attend(g, q2, k, v, nullptr, lse);
  CHECK(o2[0] == 3.0f);
  CHECK(lse[0] == Approx(0.5).epsilon(1e-6));  // its only score, 1 * 0.5
}

TEST_CASE("reference attention: a row with no visible key gives zeros and lse -infinity and no gradient",
          "[reference][transformer]") {
  // Sentence 0 has no key at all; sentence 1 has two of three.
  const AttentionGeometry g = contiguous_geometry(2, 2, 2, 3, 2);
  const std::vector<int32_t> lengths = {0, 2};
  const size_t query_count = 2 * 2 * 4, key_count = 3 * 2 * 4;
  const std::vector<float> q = random_values(query_count, 361), k = random_values(key_count, 362);
  const std::vector<float> v = random_values(key_count, 363), d_o = random_values(query_count, 364);
  std::vector<float> lse;
  const std::vector<float> o = attend(g, q, k, v, lengths.data(), lse);
  ReferenceBackend ops;
  std::vector<float> dq(query_count, kNaN), dk(key_count, kNaN), dv(key_count, kNaN);
  ops.attention_backward(g, q.data(), k.data(), v.data(), o.data(), d_o.data(), lse.data(), lengths.data(),
                         nullptr, dq.data(), dk.data(), dv.data(), nullptr);
  bool sentence_0_zero = true, sentence_1_finite = true;
  for (int t = 0; t < 3; ++t) {
    for (int b = 0; b < 2; ++b) {
      for (int c = 0; c < 4; ++c) {
        const size_t at = (size_t(t) * 2 + b) * 4 + c;
        const bool query_row = t < 2;
        if (b == 0) {
          sentence_0_zero = sentence_0_zero && dk[at] == 0.0f && dv[at] == 0.0f &&
                            (!query_row || (o[at] == 0.0f && dq[at] == 0.0f));
        } else {
          sentence_1_finite = sentence_1_finite && std::isfinite(dk[at]) && std::isfinite(dv[at]) &&
                              (!query_row || (std::isfinite(o[at]) && std::isfinite(dq[at])));
        }
      }
    }
  }
  CHECK(sentence_0_zero);
  CHECK(sentence_1_finite);
  for (int r = 0; r < 4; ++r) CHECK(lse[r] == -kInf);  // sentence 0's (head, query) rows
  for (int r = 4; r < 8; ++r) CHECK(std::isfinite(lse[r]));
}

// ---- attention: against the definition and finite differences ------------------------------------

TEST_CASE("reference attention matches a direct softmax with separate row strides", "[reference][transformer]") {
  // Every tensor has its own stride; the columns between rows hold NaN in the inputs (so reading
  // one would show) and a marker in o (which must stay). The backward must equal the backward of
  // contiguous copies, bit for bit.
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "key lengths"));
    AttentionGeometry g = contiguous_geometry(2, 3, causal ? 4 : 3, causal ? 4 : 5, 2);
    g.causal = causal;
    const int d = g.model_dim();
    g.q_stride = d + 1;
    g.k_stride = d + 2;
    g.v_stride = d + 3;
    g.o_stride = d + 4;
    const std::vector<int32_t> lengths = {5, 3};
    const int32_t* key_lengths = causal ? nullptr : lengths.data();
    const size_t query_rows = size_t(g.query_len) * g.batch, key_rows = size_t(g.key_len) * g.batch;
    // A strided buffer of `rows` rows and its contiguous copy (rows of d).
    auto strided = [&](size_t rows, int stride, uint64_t stream, float filler, std::vector<float>& dense) {
      dense = random_values(rows * d, stream);
      std::vector<float> buffer(rows * stride, filler);
      for (size_t r = 0; r < rows; ++r) std::copy_n(&dense[r * d], d, &buffer[r * stride]);
      return buffer;
    };
    std::vector<float> q_dense, k_dense, v_dense, do_dense, unused;
    const std::vector<float> q = strided(query_rows, g.q_stride, 371, kNaN, q_dense);
    const std::vector<float> k = strided(key_rows, g.k_stride, 372, kNaN, k_dense);
    const std::vector<float> v = strided(key_rows, g.v_stride, 373, kNaN, v_dense);
    const std::vector<float> d_o = strided(query_rows, g.o_stride, 374, kNaN, do_dense);
    std::vector<float> o = strided(query_rows, g.o_stride, 375, 123.0f, unused);
    std::vector<float> lse(g.lse_count(), kNaN);
    std::vector<double> want_o(o.begin(), o.end()), want_lse;  // the markers as they were
    ReferenceBackend ops;
    ops.attention_forward(g, q.data(), k.data(), v.data(), key_lengths, nullptr, o.data(), lse.data(), nullptr);
    direct_attention(g, q, k, v, key_lengths, want_o, want_lse);
    check_close(o, want_o, 1e-6, 1e-5, "o");  // the marker columns included
    check_close(lse, want_lse, 1e-6, 1e-6, "lse");

    std::vector<float> dq(q.size(), 7.0f), dk(k.size(), 7.0f), dv(v.size(), 7.0f);
    ops.attention_backward(g, q.data(), k.data(), v.data(), o.data(), d_o.data(), lse.data(), key_lengths,
                           nullptr, dq.data(), dk.data(), dv.data(), nullptr);
    const AttentionGeometry dense_g = contiguous_geometry(g.batch, g.heads, g.query_len, g.key_len, g.head_dim);
    AttentionGeometry dense_causal = dense_g;
    dense_causal.causal = causal;
    std::vector<float> dense_lse;
    const std::vector<float> dense_o = attend(dense_causal, q_dense, k_dense, v_dense, key_lengths, dense_lse);
    std::vector<float> dq_dense(q_dense.size()), dk_dense(k_dense.size()), dv_dense(v_dense.size());
    ops.attention_backward(dense_causal, q_dense.data(), k_dense.data(), v_dense.data(), dense_o.data(),
                           do_dense.data(), dense_lse.data(), key_lengths, nullptr, dq_dense.data(),
                           dk_dense.data(), dv_dense.data(), nullptr);
    // The strided gradients, read back densely; the columns between rows keep their 7.
    auto dense_of = [&](const std::vector<float>& buffer, int stride, size_t rows, bool& gaps_kept) {
      std::vector<float> dense(rows * d);
      for (size_t r = 0; r < rows; ++r) {
        std::copy_n(&buffer[r * stride], d, &dense[r * d]);
        for (int c = d; c < stride; ++c) gaps_kept = gaps_kept && buffer[r * stride + c] == 7.0f;
      }
      return dense;
    };
    bool gaps_kept = true;
    check_same_bits(dense_of(dq, g.q_stride, query_rows, gaps_kept), dq_dense, "dq");
    check_same_bits(dense_of(dk, g.k_stride, key_rows, gaps_kept), dk_dense, "dk");
    check_same_bits(dense_of(dv, g.v_stride, key_rows, gaps_kept), dv_dense, "dv");
    CHECK(gaps_kept);
  }
}

TEST_CASE("reference attention_backward is the finite-difference gradient", "[reference][transformer]") {
  struct Case {
    const char* name;
    int query_len, key_len;
    bool causal, packed;
    std::vector<int32_t> key_lengths;
    float dropout_rate;
  };
  const std::vector<Case> cases = {
      {"cross attention", 3, 4, false, false, {}, 0.0f},
      {"causal", 4, 4, true, false, {}, 0.0f},
      {"key lengths", 3, 4, false, false, {4, 2}, 0.0f},
      {"packed q k v causal with key lengths", 4, 4, true, true, {3, 4}, 0.0f},
      {"dropout packed causal with key lengths", 4, 4, true, true, {3, 4}, 0.3f},
      {"dropout cross attention", 3, 4, false, false, {}, 0.5f},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    AttentionGeometry g = contiguous_geometry(2, 2, c.query_len, c.key_len, 3);
    g.causal = c.causal;
    g.dropout_rate = c.dropout_rate;
    g.dropout_seed = 9;
    g.first_sample = 3;
    AttentionProblem problem(g, c.packed, 381);
    problem.key_lengths = c.key_lengths;
    problem.step = 5;
    problem.backward();
    // The mask is a function of (seed, step, index), fixed while q, k, v move: the loss stays
    // smooth with dropout too.
    std::vector<double> numeric(problem.qkv.size());
    for (size_t i = 0; i < numeric.size(); ++i) {
      numeric[i] = finite_difference(problem.qkv[i], 1.0 / 64, [&] { return problem.loss(); });
    }
    check_close(problem.dqkv, numeric, 1e-3, 1e-3, "dq dk dv");
  }
}

// ---- attention: dropout -------------------------------------------------------------------------

namespace {

// q = 0 (every score equal) and v_j = e_j (head_dim = key_len): o_i is then the dropped-out
// probability row p'_i itself, 0 or 1 / (key_len * (1 - rate)).
struct ProbabilityProbe {
  AttentionGeometry g;
  std::vector<float> q, k, v;

  ProbabilityProbe(int batch, int heads, int length, float rate, uint64_t seed)
      : g(contiguous_geometry(batch, heads, length, length, length)) {
    g.dropout_rate = rate;
    g.dropout_seed = seed;
    const int d = g.model_dim();
    q.assign(size_t(length) * batch * d, 0.0f);
    k = random_values(q.size(), 391);
    v.assign(q.size(), 0.0f);
    for (int j = 0; j < length; ++j) {
      for (int b = 0; b < batch; ++b) {
        for (int h = 0; h < heads; ++h) v[(size_t(j) * batch + b) * d + h * length + j] = 1.0f;
      }
    }
  }
  // p'[((b * heads + h) * length + i) * length + j] at step `step`.
  std::vector<float> probabilities(int32_t step) const {
    std::vector<float> lse;
    const std::vector<float> o = attend(g, q, k, v, nullptr, lse, &step);
    const int length = g.key_len, d = g.model_dim();
    std::vector<float> p;
    for (int b = 0; b < g.batch; ++b) {
      for (int h = 0; h < g.heads; ++h) {
        for (int i = 0; i < length; ++i) {
          const float* row = &o[(size_t(i) * g.batch + b) * d + h * length];
          p.insert(p.end(), row, row + length);
        }
      }
    }
    return p;
  }
};

}  // namespace

TEST_CASE("reference attention dropout: about rate of the probabilities dropped by the declared index",
          "[reference][transformer]") {
  const float rate = 0.3f;
  const uint64_t seed = 17;
  const int32_t step = 4;
  const ProbabilityProbe probe(8, 4, 32, rate, seed);
  const std::vector<float> p = probe.probabilities(step);
  const double kept_value = 1.0 / (32.0 * (1.0f - rate));
  size_t kept = 0;
  bool mask_as_declared = true, kept_values_scaled = true;
  for (size_t index = 0; index < p.size(); ++index) {  // first_sample 0: index is the position
    const bool keep = dropout_keeps(seed, step, index, rate);
    mask_as_declared = mask_as_declared && (p[index] != 0.0f) == keep;
    kept_values_scaled = kept_values_scaled && (p[index] == 0.0f || std::fabs(p[index] - kept_value) < 1e-7);
    kept += p[index] != 0.0f;
  }
  CHECK(mask_as_declared);
  CHECK(kept_values_scaled);
  // Binomial(32768, 0.7) has a standard deviation of 0.0025 in the fraction: 0.015 is 6 sigma.
  CHECK(double(kept) / p.size() == Approx(1.0 - rate).margin(0.015));
}

TEST_CASE("reference attention dropout: the same mask for the same step and seed and a new one for the next",
          "[reference][transformer]") {
  const ProbabilityProbe probe(2, 2, 32, 0.3f, 17);
  const std::vector<float> p = probe.probabilities(4);
  CHECK(probe.probabilities(4) == p);
  auto disagreement = [&](const std::vector<float>& other) {
    size_t differ = 0;
    for (size_t i = 0; i < p.size(); ++i) differ += (other[i] == 0.0f) != (p[i] == 0.0f);
    return differ;
  };
  // Independent masks disagree on 2 * 0.7 * 0.3 = 42% of 4096 probabilities.
  CHECK(disagreement(probe.probabilities(5)) > p.size() / 4);
  const ProbabilityProbe other_seed(2, 2, 32, 0.3f, 18);
  CHECK(disagreement(other_seed.probabilities(4)) > p.size() / 4);
  // Rate 0 reads no step and drops nothing: every probability 1/32.
  const ProbabilityProbe no_dropout(2, 2, 32, 0.0f, 17);
  std::vector<float> lse;
  const std::vector<float> o = attend(no_dropout.g, no_dropout.q, no_dropout.k, no_dropout.v, nullptr, lse, nullptr);
  check_close(o, std::vector<double>(o.size(), 1.0 / 32), 1e-8, 1e-6, "p without dropout");
}

TEST_CASE("reference attention dropout: a sentence's mask does not depend on the sharding of the batch",
          "[reference][transformer]") {
  // Four sentences at once equal two replicas of two (first_sample 0 and 2), forward and backward.
  const AttentionGeometry whole = causal_with_dropout(contiguous_geometry(4, 2, 5, 5, 3), 0.5f, 23);
  const int d = whole.model_dim();
  AttentionProblem all(whole, /*packed=*/false, 401);
  all.key_lengths = {5, 3, 4, 2};
  all.step = 8;
  all.backward();
  // The q, k and v blocks (or their gradients') of `all` cut down to sentences first and first + 1,
  // laid out as a replica holding only those two has them.
  auto shard = [&](const std::vector<float>& buffer, int first) {
    const size_t block = size_t(whole.query_len) * whole.batch * d;
    std::vector<float> part;
    for (size_t at : {all.q_at, all.k_at, all.v_at}) {
      const std::vector<float> tensor(buffer.begin() + at, buffer.begin() + at + block);
      const std::vector<float> slice = sentences(tensor, 5, 4, d, first, 2);
      part.insert(part.end(), slice.begin(), slice.end());
    }
    return part;
  };
  for (int first : {0, 2}) {
    INFO("sentences " << first << " and " << first + 1);
    AttentionGeometry half = whole;
    half.batch = 2;
    half.first_sample = first;
    AttentionProblem part(half, false, 401);
    part.qkv = shard(all.qkv, first);
    part.dqkv.assign(part.qkv.size(), kNaN);
    part.w = sentences(all.w, 5, 4, d, first, 2);
    part.key_lengths = {all.key_lengths[first], all.key_lengths[first + 1]};
    part.step = all.step;
    part.backward();
    check_same_bits(part.o, sentences(all.o, 5, 4, d, first, 2), "o");
    check_same_bits(part.lse, lse_of(all.lse, whole, first, 2), "lse");
    check_same_bits(part.dqkv, shard(all.dqkv, first), "dq dk dv");
  }
}

// ---- attention: 16-bit storage and errors -------------------------------------------------------

TEST_CASE("reference attention in fp16 and bf16: the fp32 op on the stored values rounded once",
          "[reference][transformer]") {
  const AttentionGeometry g = causal_with_dropout(contiguous_geometry(2, 2, 6, 6, 4), 0.2f, 31);
  for (DataType type : kHalfTypes) {
    INFO(data_type_name(type));
    // fp32 on the values 16 bits hold: the 16-bit results must be these, rounded once.
    AttentionProblem stored(g, /*packed=*/true, 411);
    stored.key_lengths = {6, 4};
    stored.step = 2;
    const AttentionProblem unrounded = stored;
    const TypedBuffer qkv16(type, stored.qkv), w16(type, stored.w);
    stored.qkv = qkv16.values();
    stored.w = w16.values();
    stored.backward();
    REQUIRE(changed_by_rounding(type, stored.o) > stored.o.size() / 4);
    REQUIRE(changed_by_rounding(type, stored.dqkv) > stored.dqkv.size() / 4);

    AttentionGeometry g16 = stored.g;
    g16.type = type;
    ReferenceBackend ops;
    TypedBuffer o16(type, stored.o.size(), kNaN), dqkv16(type, stored.dqkv.size(), kNaN);
    std::vector<float> lse16(g.lse_count(), kNaN);
    auto at = [&](const TypedBuffer& buffer, size_t index) { return element_at(buffer.data(), type, index); };
    auto at_mutable = [&](TypedBuffer& buffer, size_t index) { return element_at(buffer.data(), type, index); };
    ops.attention_forward(g16, at(qkv16, stored.q_at), at(qkv16, stored.k_at), at(qkv16, stored.v_at),
                          stored.lengths(), &stored.step, o16.data(), lse16.data(), nullptr);
    check_same_bits(o16.values(), rounded(type, stored.o), "o");
    check_same_bits(lse16, stored.lse, "lse");
    ops.attention_backward(g16, at(qkv16, stored.q_at), at(qkv16, stored.k_at), at(qkv16, stored.v_at), o16.data(),
                           w16.data(), lse16.data(), stored.lengths(), &stored.step,
                           at_mutable(dqkv16, stored.q_at), at_mutable(dqkv16, stored.k_at),
                           at_mutable(dqkv16, stored.v_at), nullptr);
    check_same_bits(dqkv16.values(), rounded(type, stored.dqkv), "dq dk dv");

    // And near the fp32 op on the values before rounding: a few units of the 16-bit type's last
    // place (2^-8 for bf16, 2^-11 for fp16) on values of order 1.
    AttentionProblem exact = unrounded;
    exact.backward();
    const double tolerance = type == DataType::bf16 ? 0.03 : 0.004;
    check_close(o16.values(), exact.o, tolerance, tolerance, "o against unrounded fp32");
    check_close(dqkv16.values(), exact.dqkv, tolerance, tolerance, "dq dk dv against unrounded fp32");
  }
}

TEST_CASE("reference attention rejects causal masks over unequal lengths and needs no workspace",
          "[reference][transformer]") {
  ReferenceBackend ops;
  AttentionGeometry g = contiguous_geometry(1, 1, 2, 3, 1);
  CHECK(ops.attention_workspace_bytes(g) == 0);
  g.causal = true;
  std::vector<float> q(2, 0.0f), kv(3, 0.0f), o(2), lse(2);
  CHECK_THROWS_AS(ops.attention_forward(g, q.data(), kv.data(), kv.data(), nullptr, nullptr, o.data(), lse.data(),
                                        nullptr),
                  RuntimeError);
  CHECK_THROWS_AS(ops.attention_backward(g, q.data(), kv.data(), kv.data(), o.data(), o.data(), lse.data(), nullptr,
                                         nullptr, q.data(), kv.data(), kv.data(), nullptr),
                  RuntimeError);
}
