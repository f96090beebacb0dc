// The reference image ops besides convolution (channel bias, batch norm, pooling, dropout,
// channel slices) against direct loops over logical (n, c, h, w) indices, hand-worked cases and
// finite differences, in both layouts; in fp16 and bf16 against the fp32 ops on the same stored
// values, rounded.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/backend/cnn_geometry.h"
#include "engine/backend/counter_random.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "tests/host/reference_cnn_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;

namespace {

const DataFormat kFormats[] = {DataFormat::nchw, DataFormat::nhwc};

// Calls visit(b, c, h, w) for every logical element.
template <typename Visit>
void for_each_element(const Tensor4& t, Visit visit) {
  for (int b = 0; b < t.n; ++b)
    for (int c = 0; c < t.c; ++c)
      for (int h = 0; h < t.h; ++h)
        for (int w = 0; w < t.w; ++w) visit(b, c, h, w);
}

// Batch norm straight from its definition: per channel over (n, h, w), biased variance.
struct BatchNormExpected {
  std::vector<double> y, mean, inv_std;
};
BatchNormExpected direct_batch_norm(const Tensor4& t, const std::vector<float>& x,
                                    const std::vector<float>& gamma,
                                    const std::vector<float>& beta, double epsilon) {
  BatchNormExpected e{std::vector<double>(t.count()), std::vector<double>(t.c, 0.0),
                      std::vector<double>(t.c, 0.0)};
  const double m = double(t.n) * t.h * t.w;
  std::vector<double> variance(t.c, 0.0);
  for_each_element(t, [&](int b, int c, int h, int w) {
    e.mean[c] += x[t.offset(b, c, h, w)] / m;
  });
  for_each_element(t, [&](int b, int c, int h, int w) {
    const double d = x[t.offset(b, c, h, w)] - e.mean[c];
    variance[c] += d * d / m;
  });
  for (int c = 0; c < t.c; ++c) e.inv_std[c] = 1.0 / std::sqrt(variance[c] + epsilon);
  for_each_element(t, [&](int b, int c, int h, int w) {
    const size_t i = t.offset(b, c, h, w);
    e.y[i] = gamma[c] * (x[i] - e.mean[c]) * e.inv_std[c] + beta[c];
  });
  return e;
}

// Pooling straight from its definition: every window position, padding included, in h then w
// order; a position in the padding is skipped (max) or counted as a zero (average).
void direct_pool(const PoolGeometry& g, const std::vector<float>& x, const std::vector<float>& dy,
                 std::vector<double>& y, std::vector<double>& dx) {
  y.assign(g.output.count(), 0.0);
  dx.assign(g.input.count(), 0.0);
  for_each_element(g.output, [&](int b, int c, int oh, int ow) {
    const size_t yi = g.output.offset(b, c, oh, ow);
    std::vector<size_t> inside;
    for (int i = 0; i < g.window_h; ++i)
      for (int j = 0; j < g.window_w; ++j) {
        const int ih = oh * g.stride_h - g.pad_h + i, iw = ow * g.stride_w - g.pad_w + j;
        if (ih >= 0 && ih < g.input.h && iw >= 0 && iw < g.input.w)
          inside.push_back(g.input.offset(b, c, ih, iw));
      }
    if (g.mode == PoolMode::max) {
      size_t best = inside[0];
      for (size_t at : inside) best = x[at] > x[best] ? at : best;
      y[yi] = x[best];
      dx[best] += dy[yi];
      return;
    }
    const double divisor = g.mode == PoolMode::average_include_padding
                               ? double(g.window_h * g.window_w)
                               : double(inside.size());
    for (size_t at : inside) {
      y[yi] += x[at] / divisor;
      dx[at] += dy[yi] / divisor;
    }
  });
}

Tensor4 with_type(Tensor4 t, DataType type) {
  t.type = type;
  return t;
}

// Runs batch norm forward (with or without the fused ReLU) at x, gamma and beta, then checks
// batch_norm_backward against the finite-difference gradient of sum(weights * y) in each of them,
// to 1e-3. With x in [-1, 1) inv_std ~ 2, so y's derivatives grow ~2x per order; after Richardson
// the error is O(h^4 * 2^5) ~ 1e-7 at h = 1/64. The float noise of y (24 values below ~5, each
// rounded by < 3e-7) over a step of 1/32 is ~1e-5. 1e-3 leaves room and still catches any missing
// term of the formula (each is of order 0.1 or more here). Returns y at the given values.
std::vector<float> check_batch_norm_gradient(const Tensor4& t, std::vector<float>& x,
                                             std::vector<float>& gamma, std::vector<float>& beta,
                                             uint64_t weights_stream, bool relu) {
  ReferenceBackend ops;
  const float epsilon = 1e-3f;
  const std::vector<float> weights = random_values(t.count(), weights_stream);  // d loss / dy
  std::vector<float> y(t.count()), mean(t.c), inv_std(t.c);
  auto loss = [&] {
    ops.batch_norm_forward_training(t, x.data(), gamma.data(), beta.data(), epsilon, relu,
                                    y.data(), mean.data(), inv_std.data(), nullptr, nullptr);
    return weighted_sum(y, weights);
  };
  loss();
  const std::vector<float> y_at_start = y;
  std::vector<float> dx(t.count()), dgamma(t.c), dbeta(t.c);
  ops.batch_norm_backward(t, x.data(), y.data(), weights.data(), gamma.data(), mean.data(),
                          inv_std.data(), epsilon, relu, dx.data(), dgamma.data(), dbeta.data(),
                          nullptr, nullptr);
  std::vector<double> fd_x(x.size()), fd_gamma(t.c), fd_beta(t.c);
  for (size_t i = 0; i < x.size(); ++i) fd_x[i] = finite_difference(x[i], 1.0 / 64, loss);
  for (int c = 0; c < t.c; ++c) {
    fd_gamma[c] = finite_difference(gamma[c], 1.0 / 64, loss);
    fd_beta[c] = finite_difference(beta[c], 1.0 / 64, loss);
  }
  check_close(dx, fd_x, 1e-3, 1e-3, "dx");
  check_close(dgamma, fd_gamma, 1e-3, 1e-3, "dgamma");
  check_close(dbeta, fd_beta, 1e-3, 1e-3, "dbeta");
  return y_at_start;
}

}  // namespace

TEST_CASE("reference channel bias: add and gradient per channel", "[reference_cnn]") {
  ReferenceBackend ops;
  for (DataFormat format : kFormats) {
    INFO(data_format_name(format));
    const Tensor4 t{2, 3, 4, 5, format};
    const std::vector<float> x = random_values(t.count(), 21);
    const std::vector<float> bias = random_values(t.c, 22);
    std::vector<float> y = x;
    ops.add_channel_bias(t, y.data(), bias.data(), false);
    std::vector<double> expected_y(t.count()), expected_dbias(t.c, 0.0);
    for_each_element(t, [&](int b, int c, int h, int w) {
      const size_t i = t.offset(b, c, h, w);
      expected_y[i] = double(x[i]) + bias[c];
      expected_dbias[c] += x[i];
    });
    // y: one float add each, so within half an ulp; dbias: 40 terms of size <= 1 summed in double.
    check_close(y, expected_y, 0.0, 1e-7, "add_channel_bias");
    std::vector<float> dbias(t.c, std::numeric_limits<float>::quiet_NaN());
    std::vector<float> dy = x;
    ops.channel_bias_gradient(t, y.data(), dy.data(), dbias.data(), false, nullptr);
    check_close(dbias, expected_dbias, 1e-6, 1e-6, "channel_bias_gradient");
    CHECK(dy == x);  // without the ReLU dy is left alone

    // Fused ReLU: y = max(0, x + bias); the gradient is masked where y <= 0, in dy and the sum.
    std::vector<float> y_relu = x;
    ops.add_channel_bias(t, y_relu.data(), bias.data(), true);
    std::vector<float> dy_relu = random_values(t.count(), 23);
    std::vector<double> expected_masked_dbias(t.c, 0.0);
    std::vector<float> expected_dy = dy_relu;
    for_each_element(t, [&](int b, int c, int h, int w) {
      const size_t i = t.offset(b, c, h, w);
      CHECK(y_relu[i] == std::max(0.0f, y[i]));
      if (!(y_relu[i] > 0.0f)) expected_dy[i] = 0.0f;
      expected_masked_dbias[c] += expected_dy[i];
    });
    ops.channel_bias_gradient(t, y_relu.data(), dy_relu.data(), dbias.data(), true, nullptr);
    CHECK(dy_relu == expected_dy);
    check_close(dbias, expected_masked_dbias, 1e-6, 1e-6, "channel_bias_gradient with relu");
  }
}

TEST_CASE("reference batch norm: forward statistics by hand", "[reference_cnn]") {
  ReferenceBackend ops;
  // One channel holding 1, 2, 3, 4 in two images: mean 2.5, biased variance 1.25.
  const Tensor4 t{2, 1, 1, 2, DataFormat::nhwc};
  const std::vector<float> x = {1, 2, 3, 4}, gamma = {2}, beta = {0.5f};
  std::vector<float> y(4), mean(1), inv_std(1);
  ops.batch_norm_forward_training(t, x.data(), gamma.data(), beta.data(), 0.0f, /*relu=*/false,
                                  y.data(), mean.data(), inv_std.data(), nullptr, nullptr);
  const double s = 1.0 / std::sqrt(1.25);
  CHECK(mean[0] == 2.5f);
  CHECK(inv_std[0] == Approx(s).epsilon(1e-7));
  check_close(y, std::vector<double>{0.5 - 3 * s, 0.5 - s, 0.5 + s, 0.5 + 3 * s}, 0, 1e-6, "y");
  // The fused ReLU zeroes the two negative outputs (0.5 - s < 0) and keeps the rest.
  ops.batch_norm_forward_training(t, x.data(), gamma.data(), beta.data(), 0.0f, /*relu=*/true,
                                  y.data(), mean.data(), inv_std.data(), nullptr, nullptr);
  check_close(y, std::vector<double>{0, 0, 0.5 + s, 0.5 + 3 * s}, 0, 1e-6, "y with relu");
  CHECK(ops.batch_norm_workspace_bytes(t) == 0);
}

TEST_CASE("reference batch norm: forward and backward match the definition", "[reference_cnn]") {
  ReferenceBackend ops;
  const float epsilon = 1e-3f;
  for (bool relu : {false, true}) {
    for (DataFormat format : kFormats) {
      INFO(data_format_name(format) << (relu ? " with relu" : ""));
      const Tensor4 t{3, 4, 5, 3, format};
      const std::vector<float> x = random_values(t.count(), 31, -2.0f, 3.0f);
      const std::vector<float> gamma = random_values(t.c, 32, 0.5f, 1.5f);
      const std::vector<float> beta = random_values(t.c, 33);
      const std::vector<float> dy = random_values(t.count(), 34);
      std::vector<float> y(t.count()), mean(t.c), inv_std(t.c);
      ops.batch_norm_forward_training(t, x.data(), gamma.data(), beta.data(), epsilon, relu,
                                      y.data(), mean.data(), inv_std.data(), nullptr, nullptr);
      BatchNormExpected e = direct_batch_norm(t, x, gamma, beta, epsilon);
      if (relu) {
        for (double& value : e.y) value = std::max(value, 0.0);
      }
      // Statistics in double, rounded once to float: 1e-6 relative (|y| stays below ~4).
      check_close(mean, e.mean, 1e-7, 1e-6, "saved_mean");
      check_close(inv_std, e.inv_std, 0, 1e-6, "saved_inv_std");
      check_close(y, e.y, 1e-6, 1e-6, "y");

      std::vector<float> dx(t.count()), dgamma(t.c), dbeta(t.c);
      ops.batch_norm_backward(t, x.data(), y.data(), dy.data(), gamma.data(), mean.data(),
                              inv_std.data(), epsilon, relu, dx.data(), dgamma.data(),
                              dbeta.data(), nullptr, nullptr);
      // The documented formula, from the saved float statistics, in double; with relu the
      // gradient only passes where the output is positive.
      const double m = double(t.n) * t.h * t.w;
      std::vector<double> sum_dy(t.c, 0.0), sum_dy_xhat(t.c, 0.0), expected_dx(t.count());
      auto xhat = [&](size_t i, int c) { return (double(x[i]) - mean[c]) * inv_std[c]; };
      auto passed_dy = [&](size_t i) { return relu && !(e.y[i] > 0.0) ? 0.0 : double(dy[i]); };
      size_t masked = 0;
      for_each_element(t, [&](int b, int c, int h, int w) {
        const size_t i = t.offset(b, c, h, w);
        sum_dy[c] += passed_dy(i);
        sum_dy_xhat[c] += passed_dy(i) * xhat(i, c);
        masked += passed_dy(i) == 0.0;
      });
      if (relu) CHECK(masked > t.count() / 4);  // the mask really removes gradient
      for_each_element(t, [&](int b, int c, int h, int w) {
        const size_t i = t.offset(b, c, h, w);
        expected_dx[i] = gamma[c] * inv_std[c] / m *
                         (m * passed_dy(i) - sum_dy[c] - xhat(i, c) * sum_dy_xhat[c]);
      });
      check_close(dx, expected_dx, 1e-6, 1e-5, "dx");
      check_close(dgamma, sum_dy_xhat, 1e-6, 1e-6, "dgamma");
      check_close(dbeta, sum_dy, 1e-6, 1e-6, "dbeta");
    }
  }
}

TEST_CASE("reference batch norm: backward is the finite-difference gradient", "[reference_cnn]") {
  for (DataFormat format : kFormats) {
    INFO(data_format_name(format));
    const Tensor4 t{2, 3, 2, 2, format};  // 8 values per channel
    std::vector<float> x = random_values(t.count(), 41);
    std::vector<float> gamma = random_values(t.c, 42, 0.5f, 1.5f);
    std::vector<float> beta = random_values(t.c, 43);
    check_batch_norm_gradient(t, x, gamma, beta, 44, /*relu=*/false);
  }
}

TEST_CASE("reference batch norm with ReLU: backward is the finite-difference gradient",
          "[reference_cnn]") {
  for (DataFormat format : kFormats) {
    INFO(data_format_name(format));
    const Tensor4 t{2, 3, 2, 2, format};  // 8 values per channel
    // A difference quotient across the ReLU's kink is meaningless, so every channel holds
    // +-{0.3, 0.7, 1.1, 1.5} (jittered by at most 0.05, in a different order per channel): the
    // mean stays within 0.05 of 0 and the std near 1, so |x_hat| >= 0.2 and, with gamma >= 0.5
    // and beta = 0, every output is at least 0.1 from the kink. A step of 2h = 1/32 in x, gamma
    // or beta moves an output by less than 0.06: no output changes sides.
    const float levels[] = {-1.5f, -1.1f, -0.7f, -0.3f, 0.3f, 0.7f, 1.1f, 1.5f};
    const std::vector<float> jitter = random_values(t.count(), 45, -0.05f, 0.05f);
    std::vector<float> x(t.count());
    for_each_element(t, [&](int b, int c, int h, int w) {
      const int within_channel = (b * t.h + h) * t.w + w;  // 0..7
      const size_t i = t.offset(b, c, h, w);
      x[i] = levels[(within_channel * 3 + c) % 8] + jitter[i];
    });
    std::vector<float> gamma = random_values(t.c, 46, 0.5f, 1.5f);
    std::vector<float> beta(t.c, 0.0f);
    // Away from the kink the loss is smooth with inv_std ~ 1, so the error budget of
    // check_batch_norm_gradient applies (with room to spare).
    const std::vector<float> y = check_batch_norm_gradient(t, x, gamma, beta, 47, /*relu=*/true);
    size_t zeros = 0;
    for (float value : y) zeros += value == 0.0f;
    CHECK(zeros == y.size() / 2);  // half the outputs are cut by the ReLU
  }
}

TEST_CASE("reference pooling: max and both averages match the direct loops", "[reference_cnn]") {
  struct PoolCase {
    PoolMode mode;
    int window_h, window_w, stride_h, stride_w, pad_h, pad_w;
  };
  const PoolCase cases[] = {
      {PoolMode::max, 3, 3, 2, 2, 1, 1},  // ResNet's stem pool: overlapping windows
      {PoolMode::max, 2, 2, 2, 2, 0, 0},  // VGG
      {PoolMode::max, 3, 2, 1, 2, 1, 0},
      {PoolMode::average_include_padding, 3, 3, 1, 1, 1, 1},  // Inception's branch pools
      {PoolMode::average_exclude_padding, 3, 3, 1, 1, 1, 1},
      {PoolMode::average_exclude_padding, 3, 2, 2, 1, 1, 1},
      {PoolMode::average_include_padding, 5, 5, 3, 3, 0, 0},  // Inception's aux head
      {PoolMode::average_include_padding, 7, 7, 1, 1, 0, 0},  // ResNet's global average pool
  };
  ReferenceBackend ops;
  for (const PoolCase& pc : cases) {
    for (DataFormat format : kFormats) {
      const PoolGeometry g = make_pool_geometry(Tensor4{2, 3, 7, 7, format}, pc.mode, pc.window_h,
                                                pc.window_w, pc.stride_h, pc.stride_w,
                                                Padding::explicit_symmetric, pc.pad_h, pc.pad_w);
      INFO(describe(g.input) << " -> " << describe(g.output) << " mode " << int(pc.mode));
      const std::vector<float> x = random_values(g.input.count(), 51);
      const std::vector<float> dy = random_values(g.output.count(), 52);
      std::vector<float> y(g.output.count()), dx(g.input.count());
      ops.pool_forward(g, x.data(), y.data());
      ops.pool_backward(g, x.data(), y.data(), dy.data(), dx.data());
      std::vector<double> expected_y, expected_dx;
      direct_pool(g, x, dy, expected_y, expected_dx);
      // Sums of at most 49 terms below 1, rounded to float once.
      check_close(y, expected_y, 1e-6, 1e-6, "forward");
      check_close(dx, expected_dx, 1e-6, 1e-6, "backward");
    }
  }
}

TEST_CASE("reference pooling: padding and ties, by hand", "[reference_cnn]") {
  ReferenceBackend ops;
  // 3x3 windows with pad 1 over a 2x2 image: every window covers all four values (sum 10).
  const Tensor4 small{1, 1, 2, 2, DataFormat::nchw};
  const std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> y(4), dx(4);
  const PoolGeometry include = make_pool_geometry(small, PoolMode::average_include_padding, 3, 3,
                                                  1, 1, Padding::same);
  ops.pool_forward(include, x.data(), y.data());
  CHECK(y == std::vector<float>(4, 10.0f / 9.0f));
  PoolGeometry exclude = include;
  exclude.mode = PoolMode::average_exclude_padding;
  ops.pool_forward(exclude, x.data(), y.data());
  CHECK(y == std::vector<float>(4, 2.5f));
  const std::vector<float> ones(4, 1.0f);
  ops.pool_backward(exclude, x.data(), y.data(), ones.data(), dx.data());
  CHECK(dx == std::vector<float>(4, 1.0f));  // four windows, a quarter from each

  // Max pool ties: the gradient goes to the first maximum, lowest h then lowest w.
  const Tensor4 image{1, 1, 3, 3, DataFormat::nhwc};
  const std::vector<float> tied = {1, 3, 3,
                                   3, 3, 1,
                                   0, 0, 0};
  const PoolGeometry max = make_pool_geometry(image, PoolMode::max, 2, 2, 1, 1, Padding::valid);
  ops.pool_forward(max, tied.data(), y.data());
  CHECK(y == std::vector<float>{3, 3, 3, 3});
  const std::vector<float> dy = {1, 2, 3, 4};
  std::vector<float> dx9(9);
  ops.pool_backward(max, tied.data(), y.data(), dy.data(), dx9.data());
  // windows at (0,0) and (0,1) both pick (0,1); (1,0) picks (1,0); (1,1) picks (1,1)
  CHECK(dx9 == std::vector<float>{0, 3, 0,
                                  3, 4, 0,
                                  0, 0, 0});
}

TEST_CASE("reference max pooling after a ReLU masks the gradient as relu_backward would", "[reference_cnn]") {
  // relu_input: pool_backward, then relu_backward with y = x, bit for bit, in every type; on a
  // ReLU's output (zeros and ties) with 2x2/2 and overlapping 3x3/2 windows.
  ReferenceBackend ops;
  for (DataType type : kAllTypes) {
    for (int window : {2, 3}) {
      INFO(data_type_name(type) << " window " << window);
      const Tensor4 input{2, 3, 8, 8, DataFormat::nhwc, type};
      PoolGeometry g = make_pool_geometry(input, PoolMode::max, window, window, 2, 2, Padding::valid);
      std::vector<float> x = random_values(input.count(), 331);
      for (float& v : x) v = std::max(v, 0.0f);
      // Image 0's top-left 3x3 pixels all clipped: its first window's maximum is 0.
      for (int h = 0; h < 3; ++h)
        for (int w = 0; w < 3; ++w)
          for (int c = 0; c < 3; ++c) x[static_cast<size_t>((h * 8 + w) * 3 + c)] = 0.0f;
      const TypedBuffer x_typed(type, x), dy(type, random_values(g.output.count(), 332));
      TypedBuffer y(type, g.output.count(), 0.0f), separate(type, input.count(), 0.0f), fused(type, input.count(), 0.0f);
      ops.pool_forward(g, x_typed.data(), y.data());
      ops.pool_backward(g, x_typed.data(), y.data(), dy.data(), separate.data());
      ops.relu_backward(type, x_typed.data(), separate.data(), separate.data(), input.count());
      g.relu_input = true;
      ops.pool_backward(g, x_typed.data(), y.data(), dy.data(), fused.data());
      check_same_bits(fused.values(), separate.values(), "dx");
      // A window whose maximum is 0 passed nothing (the plain backward sends its gradient on).
      const std::vector<float> plain_dx = [&] {
        PoolGeometry plain = g;
        plain.relu_input = false;
        TypedBuffer dx(type, input.count(), 0.0f);
        ops.pool_backward(plain, x_typed.data(), y.data(), dy.data(), dx.data());
        return dx.values();
      }();
      CHECK(plain_dx != fused.values());
    }
  }
}

TEST_CASE("reference pooling: average backward is the finite-difference gradient",
          "[reference_cnn]") {
  ReferenceBackend ops;
  for (PoolMode mode : {PoolMode::average_include_padding, PoolMode::average_exclude_padding}) {
    for (DataFormat format : kFormats) {
      const PoolGeometry g = make_pool_geometry(Tensor4{1, 2, 5, 5, format}, mode, 3, 3, 2, 2,
                                                Padding::same);
      INFO(data_format_name(format) << " mode " << int(mode));
      std::vector<float> x = random_values(g.input.count(), 61);
      const std::vector<float> weights = random_values(g.output.count(), 62);
      std::vector<float> y(g.output.count()), dx(g.input.count());
      auto loss = [&] {
        ops.pool_forward(g, x.data(), y.data());
        return weighted_sum(y, weights);
      };
      ops.pool_backward(g, x.data(), y.data(), weights.data(), dx.data());
      // Linear in x: no truncation error; float noise of 18 outputs below 1 over a step of 1/4
      // is ~1e-6, so 1e-4 is generous yet far below one window's share (>= 1/9 of a weight).
      std::vector<double> fd(x.size());
      for (size_t i = 0; i < x.size(); ++i) fd[i] = finite_difference(x[i], 0.125, loss);
      check_close(dx, fd, 1e-4, 1e-4, "dx");
    }
  }
}

TEST_CASE("reference dropout: mask statistics and reuse", "[reference_cnn]") {
  ReferenceBackend ops;
  const size_t n = 100000;
  const float rate = 0.3f;
  const uint64_t seed = 7;
  const std::vector<float> x = random_values(n, 71, 0.5f, 1.5f);  // never 0: zeros mean dropped
  auto forward = [&](int32_t step) {
    std::vector<float> y(n);
    ops.dropout_forward(DataType::f32, x.data(), y.data(), n, rate, seed, 0, &step);
    return y;
  };
  const std::vector<float> y = forward(5);
  size_t kept = 0;
  bool values_ok = true;
  for (size_t i = 0; i < n; ++i) {
    if (y[i] != 0.0f) ++kept;
    values_ok = values_ok && (y[i] == 0.0f || y[i] == x[i] * dropout_keep_scale(rate));
  }
  CHECK(values_ok);
  // Binomial(1e5, 0.7) has a standard deviation of 0.0014 in the fraction: 0.01 is 7 sigma.
  CHECK(double(kept) / n == Approx(1.0 - rate).margin(0.01));

  // Backward regenerates the forward's mask: with dy = x, dx must equal y exactly.
  std::vector<float> dx(n);
  const int32_t step = 5;
  ops.dropout_backward(DataType::f32, x.data(), dx.data(), n, rate, seed, 0, &step);
  CHECK(dx == y);

  CHECK(forward(5) == y);  // the same step draws the same mask
  const std::vector<float> other = forward(6);
  size_t differ = 0;
  for (size_t i = 0; i < n; ++i) differ += (other[i] == 0.0f) != (y[i] == 0.0f);
  CHECK(differ > n / 4);  // independent masks disagree on 2 * 0.7 * 0.3 = 42% of elements

  // Rate 0 keeps everything unchanged.
  std::vector<float> unchanged(n);
  ops.dropout_forward(DataType::f32, x.data(), unchanged.data(), n, 0.0f, seed, 0, &step);
  CHECK(unchanged == x);
}

TEST_CASE("dropout's integer keep rule is the pair's 24-bit draw times 2^-24 >= rate for every rate",
          "[reference_cnn][dropout]") {
  // dropout_threshold(rate) must be the least 24-bit u with u * 2^-24 >= rate (2^24: none), so
  // that dropout_keeps draws exactly the mask the rule of engine/backend/counter_random.h defines: index
  // 2m draws the top 24 bits of counter_hash(seed, kRandomStreamDropout + step, m), index 2m + 1
  // its bits 8 to 31; and dropout_keeps_pair gives both of a pair as dropout_keeps does.
  const float tiny = std::numeric_limits<float>::denorm_min();
  const float rates[] = {0.0f,  -0.5f, tiny,  1e-10f, 0x1p-24f, 0x1.8p-24f, 0.1f,
                         0.3f,  0.5f,  0.7f,  0.9f,   std::nextafter(1.0f, 0.0f), 1.0f, 1.5f,
                         std::numeric_limits<float>::quiet_NaN()};
  for (const float rate : rates) {
    INFO("rate " << rate);
    const uint32_t threshold = dropout_threshold(rate);
    REQUIRE(threshold <= (1u << 24));
    if (threshold < (1u << 24)) CHECK(static_cast<float>(threshold) * 0x1p-24f >= rate);
    if (threshold > 0) CHECK_FALSE(static_cast<float>(threshold - 1) * 0x1p-24f >= rate);
    const int32_t step = 4;
    size_t disagreements = 0;
    size_t pair_disagreements = 0;
    const uint64_t key = dropout_stream_key(31, step);
    for (uint64_t index = 0; index < 20000; ++index) {
      const uint64_t hash = counter_hash(31, kRandomStreamDropout + step, index / 2);
      const uint64_t draw = index % 2 == 0 ? hash >> 40 : (hash >> 8) & 0xFFFFFF;
      const bool by_definition = static_cast<float>(draw) * 0x1p-24f >= rate;
      disagreements += dropout_keeps(31, step, index, rate) != by_definition;
      if (index % 2 == 0) {
        bool even = false, odd = false;
        dropout_keeps_pair(key, index, threshold, even, odd);
        pair_disagreements += (even != dropout_keeps(31, step, index, rate)) +
                              (odd != dropout_keeps(31, step, index + 1, rate));
      }
    }
    CHECK(disagreements == 0);
    CHECK(pair_disagreements == 0);
  }
}

TEST_CASE("reference channel slices: concatenate and split round trip", "[reference_cnn]") {
  ReferenceBackend ops;
  for (DataFormat format : kFormats) {
    INFO(data_format_name(format));
    const Tensor4 a_shape{2, 2, 3, 4, format}, b_shape{2, 3, 3, 4, format};
    const Tensor4 whole_shape{2, 5, 3, 4, format};
    const std::vector<float> a = random_values(a_shape.count(), 81);
    const std::vector<float> b = random_values(b_shape.count(), 82);
    std::vector<float> whole(whole_shape.count(), std::numeric_limits<float>::quiet_NaN());
    ops.copy_into_channels(a_shape, a.data(), whole_shape, whole.data(), 0);
    ops.copy_into_channels(b_shape, b.data(), whole_shape, whole.data(), 2);
    bool placed = true;
    for_each_element(whole_shape, [&](int n, int c, int h, int w) {
      const float want = c < 2 ? a[a_shape.offset(n, c, h, w)] : b[b_shape.offset(n, c - 2, h, w)];
      placed = placed && whole[whole_shape.offset(n, c, h, w)] == want;
    });
    CHECK(placed);

    std::vector<float> a_back(a.size()), b_back(b.size());
    ops.copy_from_channels(whole_shape, whole.data(), 0, a_shape, a_back.data());
    ops.copy_from_channels(whole_shape, whole.data(), 2, b_shape, b_back.data());
    CHECK(a_back == a);
    CHECK(b_back == b);

    CHECK_THROWS_AS(ops.copy_into_channels(b_shape, b.data(), whole_shape, whole.data(), 3),
                    RuntimeError);
    const Tensor4 other_format{2, 2, 3, 4,
                               format == DataFormat::nchw ? DataFormat::nhwc : DataFormat::nchw};
    CHECK_THROWS_AS(
        ops.copy_from_channels(whole_shape, whole.data(), 0, other_format, a_back.data()),
        RuntimeError);
  }
}

TEST_CASE("reference dropout: a mask is placed by global index, whichever buffer holds it",
          "[reference_cnn]") {
  // Replica r's buffer starts at element first_index of the global batch: dropping out a shard
  // must give exactly the matching slice of dropping out the whole batch.
  ReferenceBackend ops;
  const size_t whole = 4000, offset = 1500, part = 1000;
  const std::vector<float> x = random_values(whole, 72, 0.5f, 1.5f);
  const int32_t step = 3;
  std::vector<float> y_whole(whole), y_part(part);
  ops.dropout_forward(DataType::f32, x.data(), y_whole.data(), whole, 0.5f, 11, 0, &step);
  ops.dropout_forward(DataType::f32, x.data() + offset, y_part.data(), part, 0.5f, 11, offset,
                      &step);
  CHECK(std::vector<float>(y_whole.begin() + offset, y_whole.begin() + offset + part) == y_part);
}

// ---- fp16 and bf16 ------------------------------------------------------------------------------

TEST_CASE("reference channel bias in fp16 and bf16", "[reference_cnn]") {
  ReferenceBackend ops;
  for (DataType type : kHalfTypes) {
    for (DataFormat format : kFormats) {
      for (bool relu : {false, true}) {
        INFO(data_type_name(type) << " " << data_format_name(format) << (relu ? " relu" : ""));
        const Tensor4 t32{2, 3, 4, 5, format};
        const Tensor4 t = with_type(t32, type);
        const TypedBuffer x16(type, random_values(t.count(), 24));
        const TypedBuffer dy16(type, random_values(t.count(), 25));
        const std::vector<float> bias = random_values(t.c, 26);
        std::vector<float> y = x16.values();
        ops.add_channel_bias(t32, y.data(), bias.data(), relu);
        REQUIRE(changed_by_rounding(type, y) > y.size() / 4);
        TypedBuffer y16 = x16;
        ops.add_channel_bias(t, y16.data(), bias.data(), relu);
        check_same_bits(y16.values(), rounded(type, y), "add_channel_bias");

        // The gradient masks (in place) and sums the stored dy by the stored y.
        std::vector<float> dy = dy16.values(), dbias(t.c), dbias16(t.c);
        const std::vector<float> stored_y = y16.values();
        ops.channel_bias_gradient(t32, stored_y.data(), dy.data(), dbias.data(), relu, nullptr);
        TypedBuffer masked16 = dy16;
        ops.channel_bias_gradient(t, y16.data(), masked16.data(), dbias16.data(), relu, nullptr);
        check_same_bits(masked16.values(), dy, "masked dy");
        check_same_bits(dbias16, dbias, "dbias");
      }
    }
  }
}

TEST_CASE("reference batch norm in fp16 and bf16: fp32 statistics of the stored x, y rounded",
          "[reference_cnn]") {
  ReferenceBackend ops;
  const float epsilon = 1e-3f;
  for (DataType type : kHalfTypes) {
    for (bool relu : {false, true}) {
      for (DataFormat format : kFormats) {
        INFO(data_type_name(type) << " " << data_format_name(format) << (relu ? " relu" : ""));
        const Tensor4 t32{3, 4, 5, 3, format};
        const Tensor4 t = with_type(t32, type);
        const TypedBuffer x16(type, random_values(t.count(), 31, -2.0f, 3.0f));
        const TypedBuffer dy16(type, random_values(t.count(), 34));
        const std::vector<float> gamma = random_values(t.c, 32, 0.5f, 1.5f);
        const std::vector<float> beta = random_values(t.c, 33);
        const std::vector<float> x = x16.values(), dy = dy16.values();

        std::vector<float> y(t.count()), mean(t.c), inv_std(t.c);
        ops.batch_norm_forward_training(t32, x.data(), gamma.data(), beta.data(), epsilon, relu,
                                        y.data(), mean.data(), inv_std.data(), nullptr, nullptr);
        REQUIRE(changed_by_rounding(type, y) > y.size() / 4);
        TypedBuffer y16(type, t.count(), 0.0f);
        std::vector<float> mean16(t.c), inv_std16(t.c);
        ops.batch_norm_forward_training(t, x16.data(), gamma.data(), beta.data(), epsilon, relu,
                                        y16.data(), mean16.data(), inv_std16.data(), nullptr, nullptr);
        check_same_bits(mean16, mean, "saved_mean");
        check_same_bits(inv_std16, inv_std, "saved_inv_std");
        check_same_bits(y16.values(), rounded(type, y), "y");

        // Backward from the stored y (the ReLU mask) and dy; dx rounded, dgamma and dbeta fp32.
        const std::vector<float> stored_y = y16.values();
        std::vector<float> dx(t.count()), dgamma(t.c), dbeta(t.c);
        ops.batch_norm_backward(t32, x.data(), stored_y.data(), dy.data(), gamma.data(),
                                mean.data(), inv_std.data(), epsilon, relu, dx.data(),
                                dgamma.data(), dbeta.data(), nullptr, nullptr);
        REQUIRE(changed_by_rounding(type, dx) > dx.size() / 4);
        TypedBuffer dx16(type, t.count(), 0.0f);
        std::vector<float> dgamma16(t.c), dbeta16(t.c);
        ops.batch_norm_backward(t, x16.data(), y16.data(), dy16.data(), gamma.data(),
                                mean16.data(), inv_std16.data(), epsilon, relu, dx16.data(),
                                dgamma16.data(), dbeta16.data(), nullptr, nullptr);
        check_same_bits(dx16.values(), rounded(type, dx), "dx");
        check_same_bits(dgamma16, dgamma, "dgamma");
        check_same_bits(dbeta16, dbeta, "dbeta");

        // dx may alias dy.
        TypedBuffer in_place = dy16;
        ops.batch_norm_backward(t, x16.data(), y16.data(), in_place.data(), gamma.data(),
                                mean16.data(), inv_std16.data(), epsilon, relu, in_place.data(),
                                dgamma16.data(), dbeta16.data(), nullptr, nullptr);
        check_same_bits(in_place.values(), dx16.values(), "dx in place");
      }
    }
  }
}

TEST_CASE("reference batch norm: the fused ReLU equals batch norm then ReLU, bit for bit",
          "[reference_cnn]") {
  ReferenceBackend ops;
  const float epsilon = 1e-5f;
  for (DataType type : {DataType::f32, DataType::f16, DataType::bf16}) {
    for (DataFormat format : kFormats) {
      INFO(data_type_name(type) << " " << data_format_name(format));
      const Tensor4 t = with_type(Tensor4{2, 5, 3, 4, format}, type);
      const TypedBuffer x(type, random_values(t.count(), 91, -1.0f, 2.0f));
      const TypedBuffer dy(type, random_values(t.count(), 94));
      const std::vector<float> gamma = random_values(t.c, 92, 0.5f, 1.5f);
      const std::vector<float> beta = random_values(t.c, 93);
      std::vector<float> mean(t.c), inv_std(t.c);
      const size_t n = t.count();

      TypedBuffer bn(type, n, 0.0f), separate_y(type, n, 0.0f), fused_y(type, n, 0.0f);
      ops.batch_norm_forward_training(t, x.data(), gamma.data(), beta.data(), epsilon, false,
                                      bn.data(), mean.data(), inv_std.data(), nullptr, nullptr);
      ops.relu_forward(type, bn.data(), separate_y.data(), n);
      ops.batch_norm_forward_training(t, x.data(), gamma.data(), beta.data(), epsilon, true,
                                      fused_y.data(), mean.data(), inv_std.data(), nullptr, nullptr);
      check_same_bits(fused_y.values(), separate_y.values(), "forward");

      TypedBuffer relu_dx(type, n, 0.0f), separate_dx(type, n, 0.0f), fused_dx(type, n, 0.0f);
      std::vector<float> dgamma(t.c), dbeta(t.c), fused_dgamma(t.c), fused_dbeta(t.c);
      ops.relu_backward(type, separate_y.data(), dy.data(), relu_dx.data(), n);
      ops.batch_norm_backward(t, x.data(), bn.data(), relu_dx.data(), gamma.data(), mean.data(),
                              inv_std.data(), epsilon, false, separate_dx.data(), dgamma.data(),
                              dbeta.data(), nullptr, nullptr);
      ops.batch_norm_backward(t, x.data(), fused_y.data(), dy.data(), gamma.data(), mean.data(),
                              inv_std.data(), epsilon, true, fused_dx.data(), fused_dgamma.data(),
                              fused_dbeta.data(), nullptr, nullptr);
      check_same_bits(fused_dx.values(), separate_dx.values(), "dx");
      check_same_bits(fused_dgamma, dgamma, "dgamma");
      check_same_bits(fused_dbeta, dbeta, "dbeta");

      // dx may alias dy.
      TypedBuffer in_place = dy;
      ops.batch_norm_backward(t, x.data(), fused_y.data(), in_place.data(), gamma.data(),
                              mean.data(), inv_std.data(), epsilon, true, in_place.data(),
                              fused_dgamma.data(), fused_dbeta.data(), nullptr, nullptr);
      check_same_bits(in_place.values(), fused_dx.values(), "dx in place");
    }
  }
}

namespace {

// Calls check(type, format, relu) for every storage type and layout, with and without the ReLU,
// each named in the test's output.
template <typename Check>
void for_each_type_layout_relu(Check check) {
  for (DataType type : {DataType::f32, DataType::f16, DataType::bf16}) {
    for (DataFormat format : kFormats) {
      for (bool relu : {false, true}) {
        INFO(data_type_name(type) << " " << data_format_name(format) << (relu ? " relu" : ""));
        check(type, format, relu);
      }
    }
  }
}

}  // namespace

TEST_CASE("reference batch norm with a residual equals batch norm then the residual add", "[reference_cnn]") {
  // A ResNet join in one op: y = act(bn(x) + z), rounded once; backward, z's gradient is the
  // masked dy and dx what batch norm's backward makes of it, exactly as the add's backward and
  // then batch norm's would (the same masked values go in).
  ReferenceBackend ops;
  const float epsilon = 1e-5f;
  for_each_type_layout_relu([&](DataType type, DataFormat format, bool relu) {
    const Tensor4 t = with_type(Tensor4{2, 5, 3, 4, format}, type);
    const size_t n = t.count();
    const TypedBuffer x(type, random_values(n, 81, -1.0f, 2.0f));
    const TypedBuffer z(type, random_values(n, 82, -1.0f, 1.0f));
    const TypedBuffer dy(type, random_values(n, 83));
    const std::vector<float> gamma = random_values(t.c, 84, 0.5f, 1.5f);
    const std::vector<float> beta = random_values(t.c, 85);
    std::vector<float> mean(t.c), inv_std(t.c), joined_mean(t.c), joined_inv_std(t.c);

    TypedBuffer bn(type, n, 0.0f), separate_y(type, n, 0.0f), joined_y(type, n, 0.0f);
    ops.batch_norm_forward_training(t, x.data(), gamma.data(), beta.data(), epsilon, false, bn.data(),
                                    mean.data(), inv_std.data(), nullptr, nullptr);
    ops.add_tensors(type, bn.data(), z.data(), separate_y.data(), n, relu);
    ops.batch_norm_forward_training(t, x.data(), gamma.data(), beta.data(), epsilon, relu, joined_y.data(),
                                    joined_mean.data(), joined_inv_std.data(), nullptr, z.data());
    check_same_bits(joined_mean, mean, "saved_mean");
    check_same_bits(joined_inv_std, inv_std, "saved_inv_std");
    // One rounding instead of two (bn's, then the sum's): within one unit of the type.
    const double unit = type == DataType::f32 ? 1e-6 : type == DataType::f16 ? 0x1p-10 : 0x1p-7;
    const std::vector<float> joined = joined_y.values(), separate = separate_y.values();
    for (size_t i = 0; i < n; ++i) {
      INFO("element " << i);
      CHECK(std::fabs(double(joined[i]) - separate[i]) <= unit * (1.0 + std::fabs(double(separate[i]))));
      if (relu) CHECK(joined[i] >= 0.0f);
    }

    // Backward from the joined y (its mask), both ways.
    TypedBuffer dz_add(type, n, 7.0f), dbn(type, n, 7.0f), separate_dx(type, n, 0.0f);
    TypedBuffer joined_dx(type, n, 0.0f), joined_dz(type, n, 7.0f);
    std::vector<float> dgamma(t.c), dbeta(t.c), joined_dgamma(t.c), joined_dbeta(t.c);
    ops.add_tensors_backward(type, joined_y.data(), dy.data(), relu, dbn.data(), dz_add.data(), n);
    ops.batch_norm_backward(t, x.data(), bn.data(), dbn.data(), gamma.data(), mean.data(), inv_std.data(),
                            epsilon, false, separate_dx.data(), dgamma.data(), dbeta.data(), nullptr, nullptr);
    ops.batch_norm_backward(t, x.data(), joined_y.data(), dy.data(), gamma.data(), mean.data(), inv_std.data(),
                            epsilon, relu, joined_dx.data(), joined_dgamma.data(), joined_dbeta.data(), nullptr,
                            joined_dz.data());
    check_same_bits(joined_dz.values(), dz_add.values(), "dz");
    check_same_bits(joined_dx.values(), separate_dx.values(), "dx");
    check_same_bits(joined_dgamma, dgamma, "dgamma");
    check_same_bits(joined_dbeta, dbeta, "dbeta");

    // dx may alias dy with the residual's gradient written too.
    TypedBuffer in_place = dy, in_place_dz(type, n, 7.0f);
    ops.batch_norm_backward(t, x.data(), joined_y.data(), in_place.data(), gamma.data(), mean.data(),
                            inv_std.data(), epsilon, relu, in_place.data(), joined_dgamma.data(),
                            joined_dbeta.data(), nullptr, in_place_dz.data());
    check_same_bits(in_place.values(), separate_dx.values(), "dx in place");
    check_same_bits(in_place_dz.values(), dz_add.values(), "dz with dx in place");

    // Or the residual's gradient may be written over dy (a join's shortcut gradient over its
    // output's), dx apart.
    TypedBuffer dz_over_dy = dy, dx_apart(type, n, 0.0f);
    ops.batch_norm_backward(t, x.data(), joined_y.data(), dz_over_dy.data(), gamma.data(), mean.data(),
                            inv_std.data(), epsilon, relu, dx_apart.data(), joined_dgamma.data(),
                            joined_dbeta.data(), nullptr, dz_over_dy.data());
    check_same_bits(dz_over_dy.values(), dz_add.values(), "dz over dy");
    check_same_bits(dx_apart.values(), separate_dx.values(), "dx with dz over dy");
    check_same_bits(joined_dgamma, dgamma, "dgamma with dz over dy");
  });
}

TEST_CASE("reference batch norm pair equals the shortcut's batch norm then the join", "[reference_cnn]") {
  // A downsampling block's join in training: y = act(bn(x) + bn_z(z)) in one pass, rounded once,
  // with both batch norms' statistics saved as their own calls save them.
  ReferenceBackend ops;
  const float epsilon = 1e-5f;
  for_each_type_layout_relu([&](DataType type, DataFormat format, bool relu) {
    const Tensor4 t = with_type(Tensor4{2, 5, 3, 4, format}, type);
    const size_t n = t.count();
    const TypedBuffer x(type, random_values(n, 71, -1.0f, 2.0f)), z(type, random_values(n, 72, -2.0f, 1.0f));
    const std::vector<float> gamma = random_values(t.c, 73, 0.5f, 1.5f), beta = random_values(t.c, 74);
    const std::vector<float> z_gamma = random_values(t.c, 75, 0.5f, 1.5f), z_beta = random_values(t.c, 76);
    std::vector<float> mean(t.c), inv_std(t.c), z_mean(t.c), z_inv_std(t.c);
    std::vector<float> pair_mean(t.c), pair_inv_std(t.c), pair_z_mean(t.c), pair_z_inv_std(t.c);
    TypedBuffer z_normalised(type, n, 0.0f), separate_y(type, n, 0.0f), pair_y(type, n, 0.0f);
    ops.batch_norm_forward_training(t, z.data(), z_gamma.data(), z_beta.data(), epsilon, false, z_normalised.data(),
                                    z_mean.data(), z_inv_std.data(), nullptr, nullptr);
    ops.batch_norm_forward_training(t, x.data(), gamma.data(), beta.data(), epsilon, relu, separate_y.data(),
                                    mean.data(), inv_std.data(), nullptr, z_normalised.data());
    ops.batch_norm_pair_forward_training(t, x.data(), gamma.data(), beta.data(), pair_mean.data(),
                                         pair_inv_std.data(), z.data(), z_gamma.data(), z_beta.data(),
                                         pair_z_mean.data(), pair_z_inv_std.data(), epsilon, relu, pair_y.data(),
                                         nullptr);
    check_same_bits(pair_mean, mean, "saved_mean");
    check_same_bits(pair_inv_std, inv_std, "saved_inv_std");
    check_same_bits(pair_z_mean, z_mean, "shortcut saved_mean");
    check_same_bits(pair_z_inv_std, z_inv_std, "shortcut saved_inv_std");
    // One rounding instead of two (bn_z's, then the join's): within one unit of the type.
    const double unit = type == DataType::f32 ? 1e-6 : type == DataType::f16 ? 0x1p-10 : 0x1p-7;
    const std::vector<float> pair = pair_y.values(), separate = separate_y.values();
    for (size_t i = 0; i < n; ++i) {
      INFO("element " << i);
      CHECK(std::fabs(double(pair[i]) - separate[i]) <= unit * (2.0 + std::fabs(double(separate[i]))));
      if (relu) CHECK(pair[i] >= 0.0f);
    }
  });
}

TEST_CASE("reference batch norm in fp16: the ReLU mask is the rounded y", "[reference_cnn]") {
  // Channel 1's gamma is so small that every output is below half fp16's smallest subnormal
  // (2^-25): in fp32 half of them are positive, stored in fp16 all are zero, so the fused ReLU's
  // backward must pass no gradient there. Channel 0 is ordinary.
  ReferenceBackend ops;
  const float epsilon = 1e-3f;
  for (DataFormat format : kFormats) {
    INFO(data_format_name(format));
    const Tensor4 t32{2, 2, 2, 2, format};
    const Tensor4 t = with_type(t32, DataType::f16);
    const TypedBuffer x16(DataType::f16, random_values(t.count(), 35));
    const TypedBuffer dy16(DataType::f16, random_values(t.count(), 36, 0.5f, 1.0f));
    const std::vector<float> x = x16.values(), dy = dy16.values();
    const std::vector<float> gamma = {1.0f, 1.0e-9f}, beta = {0.1f, 0.0f};

    std::vector<float> y(t.count()), mean(t.c), inv_std(t.c), dx(t.count()), dgamma(t.c),
        dbeta(t.c);
    ops.batch_norm_forward_training(t32, x.data(), gamma.data(), beta.data(), epsilon, true,
                                    y.data(), mean.data(), inv_std.data(), nullptr, nullptr);
    ops.batch_norm_backward(t32, x.data(), y.data(), dy.data(), gamma.data(), mean.data(),
                            inv_std.data(), epsilon, true, dx.data(), dgamma.data(), dbeta.data(),
                            nullptr, nullptr);
    TypedBuffer y16(DataType::f16, t.count(), 0.0f), dx16(DataType::f16, t.count(), 1.0f);
    std::vector<float> dgamma16(t.c), dbeta16(t.c);
    ops.batch_norm_forward_training(t, x16.data(), gamma.data(), beta.data(), epsilon, true,
                                    y16.data(), mean.data(), inv_std.data(), nullptr, nullptr);
    ops.batch_norm_backward(t, x16.data(), y16.data(), dy16.data(), gamma.data(), mean.data(),
                            inv_std.data(), epsilon, true, dx16.data(), dgamma16.data(),
                            dbeta16.data(), nullptr, nullptr);
    const std::vector<float> stored_y = y16.values(), stored_dx = dx16.values();
    size_t fp32_positive = 0, fp16_positive = 0, fp16_passed = 0;
    for_each_element(t, [&](int b, int c, int h, int w) {
      if (c != 1) return;
      const size_t i = t.offset(b, c, h, w);
      fp32_positive += y[i] > 0.0f;
      fp16_positive += stored_y[i] > 0.0f;
      fp16_passed += stored_dx[i] != 0.0f;
    });
    CHECK(fp32_positive > 0);  // the unrounded y would let gradient through
    CHECK(dbeta[1] != 0.0f);
    CHECK(fp16_positive == 0);
    CHECK(fp16_passed == 0);
    CHECK(dbeta16[1] == 0.0f);
    CHECK(dgamma16[1] == 0.0f);
    CHECK(dbeta16[0] != 0.0f);  // the ordinary channel still learns
  }
}

TEST_CASE("reference pooling in fp16 and bf16: the fp32 pool on the stored values, rounded",
          "[reference_cnn]") {
  struct PoolCase {
    PoolMode mode;
    int window, stride, pad;
  };
  const PoolCase cases[] = {{PoolMode::max, 3, 2, 1},
                            {PoolMode::max, 2, 2, 0},
                            {PoolMode::average_include_padding, 3, 1, 1},
                            {PoolMode::average_exclude_padding, 3, 2, 1},
                            {PoolMode::average_include_padding, 7, 1, 0}};
  ReferenceBackend ops;
  for (DataType type : kHalfTypes) {
    for (const PoolCase& pc : cases) {
      for (DataFormat format : kFormats) {
        const PoolGeometry g32 =
            make_pool_geometry(Tensor4{2, 3, 7, 7, format}, pc.mode, pc.window, pc.window,
                               pc.stride, pc.stride, Padding::explicit_symmetric, pc.pad, pc.pad);
        const PoolGeometry g = make_pool_geometry(
            with_type(g32.input, type), pc.mode, pc.window, pc.window, pc.stride, pc.stride,
            Padding::explicit_symmetric, pc.pad, pc.pad);
        INFO(data_type_name(type) << " " << describe(g.input) << " -> " << describe(g.output)
                                  << " mode " << int(pc.mode));
        const TypedBuffer x16(type, random_values(g.input.count(), 51));
        const TypedBuffer dy16(type, random_values(g.output.count(), 52));
        const std::vector<float> x = x16.values(), dy = dy16.values();
        std::vector<float> y(g.output.count()), dx(g.input.count());
        ops.pool_forward(g32, x.data(), y.data());
        ops.pool_backward(g32, x.data(), y.data(), dy.data(), dx.data());
        if (pc.mode != PoolMode::max) {
          REQUIRE(changed_by_rounding(type, y) > y.size() / 4);
          REQUIRE(changed_by_rounding(type, dx) > dx.size() / 4);
        }
        TypedBuffer y16(type, g.output.count(), 0.0f), dx16(type, g.input.count(), 0.0f);
        ops.pool_forward(g, x16.data(), y16.data());
        ops.pool_backward(g, x16.data(), y16.data(), dy16.data(), dx16.data());
        check_same_bits(y16.values(), rounded(type, y), "forward");
        check_same_bits(dx16.values(), rounded(type, dx), "backward");
      }
    }
  }
}

TEST_CASE("reference max pooling in fp16 and bf16: values tied by rounding go to the first",
          "[reference_cnn]") {
  // 1 and 1 + 2^-12 differ in fp32 but are both 1 in fp16 and bf16: the window's gradient goes
  // to the first of the stored maxima, not to the element that was larger before rounding.
  ReferenceBackend ops;
  const std::vector<float> values = {1.0f, 1.0f + std::ldexp(1.0f, -12), -1.0f, 0.5f};
  const std::vector<float> dy = {2.0f};
  for (DataType type : kHalfTypes) {
    INFO(data_type_name(type));
    const PoolGeometry g = make_pool_geometry(Tensor4{1, 1, 2, 2, DataFormat::nchw, type},
                                              PoolMode::max, 2, 2, 2, 2, Padding::valid);
    const TypedBuffer x16(type, values), dy16(type, dy);
    REQUIRE(x16.values()[0] == x16.values()[1]);
    TypedBuffer y16(type, 1, 0.0f), dx16(type, 4, -1.0f);
    ops.pool_forward(g, x16.data(), y16.data());
    ops.pool_backward(g, x16.data(), y16.data(), dy16.data(), dx16.data());
    CHECK(y16.values() == std::vector<float>{1.0f});
    CHECK(dx16.values() == std::vector<float>{2.0f, 0.0f, 0.0f, 0.0f});
  }
}

TEST_CASE("reference dropout in fp16 and bf16: the fp32 dropout of the stored values, rounded",
          "[reference_cnn]") {
  ReferenceBackend ops;
  const size_t n = 5000;
  const float rate = 0.3f;
  const int32_t step = 2;
  for (DataType type : kHalfTypes) {
    INFO(data_type_name(type));
    const TypedBuffer x16(type, random_values(n, 73, 0.5f, 1.5f));
    const std::vector<float> x = x16.values();
    std::vector<float> y(n);
    ops.dropout_forward(DataType::f32, x.data(), y.data(), n, rate, 9, 100, &step);
    REQUIRE(changed_by_rounding(type, y) > n / 4);
    TypedBuffer y16(type, n, 0.0f), dx16(type, n, 0.0f);
    ops.dropout_forward(type, x16.data(), y16.data(), n, rate, 9, 100, &step);
    check_same_bits(y16.values(), rounded(type, y), "forward");
    ops.dropout_backward(type, x16.data(), dx16.data(), n, rate, 9, 100, &step);
    check_same_bits(dx16.values(), rounded(type, y), "backward");
    TypedBuffer in_place = x16;  // out may alias in
    ops.dropout_forward(type, in_place.data(), in_place.data(), n, rate, 9, 100, &step);
    check_same_bits(in_place.values(), rounded(type, y), "in place");
  }
}

TEST_CASE("reference channel slices in fp16 and bf16", "[reference_cnn]") {
  ReferenceBackend ops;
  for (DataType type : kHalfTypes) {
    for (DataFormat format : kFormats) {
      INFO(data_type_name(type) << " " << data_format_name(format));
      const Tensor4 a_shape{2, 2, 3, 4, format, type}, b_shape{2, 3, 3, 4, format, type};
      const Tensor4 whole_shape{2, 5, 3, 4, format, type};
      const TypedBuffer a(type, random_values(a_shape.count(), 83));
      const TypedBuffer b(type, random_values(b_shape.count(), 84));
      TypedBuffer whole(type, whole_shape.count(), std::numeric_limits<float>::quiet_NaN());
      ops.copy_into_channels(a_shape, a.data(), whole_shape, whole.data(), 0);
      ops.copy_into_channels(b_shape, b.data(), whole_shape, whole.data(), 2);
      const std::vector<float> a_values = a.values(), b_values = b.values();
      const std::vector<float> whole_values = whole.values();
      bool placed = true;
      for_each_element(whole_shape, [&](int n, int c, int h, int w) {
        const float want = c < 2 ? a_values[a_shape.offset(n, c, h, w)]
                                 : b_values[b_shape.offset(n, c - 2, h, w)];
        placed = placed && whole_values[whole_shape.offset(n, c, h, w)] == want;
      });
      CHECK(placed);
      TypedBuffer b_back(type, b_shape.count(), 0.0f);
      ops.copy_from_channels(whole_shape, whole.data(), 2, b_shape, b_back.data());
      check_same_bits(b_back.values(), b_values, "copy_from_channels");

      // A slice of another element type would be copied as the wrong bytes: refused.
      const Tensor4 a_fp32 = with_type(a_shape, DataType::f32);
      std::vector<float> a_back(a_shape.count());
      CHECK_THROWS_AS(
          ops.copy_from_channels(whole_shape, whole.data(), 0, a_fp32, a_back.data()),
          RuntimeError);
      CHECK_THROWS_AS(
          ops.copy_into_channels(a_fp32, a_back.data(), whole_shape, whole.data(), 0),
          RuntimeError);
    }
  }
}
