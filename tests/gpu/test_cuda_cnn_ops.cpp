// [gpu] The CUDA backend's other image ops against the reference backend in both data formats and
// in fp32, fp16 and bf16 storage: pooling (cuDNN's and own kernels); own kernels for batch norm
// (with and without ReLU), channel bias, dropout and channel slices.
//
// Comparison: |gpu - ref| <= atol + rtol * |ref| per element. The reference accumulates in double,
// so the tolerances only cover the GPU's fp32 rounding; each says where it comes from.
// eps = 2^-23 (fp32 machine epsilon). Inputs are uniform in [-1, 1] unless said otherwise.
//
// 16-bit storage: inputs are values the type holds exactly, arithmetic is fp32 on both sides and
// each result is rounded once to the type. Both sides round values that differ by no more than
// the fp32 tolerance, so a stored result may differ by that tolerance plus one unit in the last
// place of the type (storage_rtol: 2^-10 relative for fp16, 2^-7 for bf16, plus fp16's subnormal
// spacing 2^-24, storage_atol). Ops that compute one exactly rounded fp32 value per element
// (bias add, masks, copies, dropout's scaling) must agree exactly in every type. Per-channel
// results (statistics, dgamma, dbeta, dbias) are fp32 in every type and keep fp32 tolerances.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/cuda/cuda_controls.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "tests/gpu/gpu_test_support.h"

using namespace dpbench;
using namespace dpbench::gpu_test;

namespace {

// How large the values of a batch-norm input and its gradient are, from the reference's results.
struct BatchNormScale {
  double condition = 1.0;     // max over channels of 1 + |mean| * inv_std: |x| / spread
  double mean_spread = 0.0;   // max over channels of |mean| + std
  double inv_std_max = 0.0;
  double x_hat_max = 0.0;     // max |x - mean| * inv_std
  double dy_abs_sum = 0.0;    // max over channels of sum |dy'| (dy' = dy after the ReLU mask)
};

BatchNormScale batch_norm_scale(const Tensor4& shape, const std::vector<float>& x,
                                const std::vector<float>& dy_passed,
                                const std::vector<float>& mean, const std::vector<float>& inv_std) {
  BatchNormScale scale;
  for (int ch = 0; ch < shape.c; ++ch) {
    const double centre = std::fabs(static_cast<double>(mean[ch]));
    scale.condition = std::max(scale.condition, 1.0 + centre * inv_std[ch]);
    scale.mean_spread = std::max(scale.mean_spread, centre + 1.0 / inv_std[ch]);
    scale.inv_std_max = std::max(scale.inv_std_max, static_cast<double>(inv_std[ch]));
    double abs_sum = 0.0;
    for (int b = 0; b < shape.n; ++b) {
      for (int y = 0; y < shape.h; ++y) {
        for (int x_pos = 0; x_pos < shape.w; ++x_pos) {
          const size_t at = shape.offset(b, ch, y, x_pos);
          scale.x_hat_max =
              std::max(scale.x_hat_max, std::fabs(double(x[at]) - mean[ch]) * inv_std[ch]);
          abs_sum += std::fabs(dy_passed[at]);
        }
      }
    }
    scale.dy_abs_sum = std::max(scale.dy_abs_sum, abs_sum);
  }
  return scale;
}

// A workspace of `bytes` full of NaN: the kernels must not depend on what it held.
GpuArray<float> batch_norm_workspace(Device& gpu, size_t bytes) {
  return GpuArray<float>(gpu, std::vector<float>(std::max<size_t>(bytes / sizeof(float), 1),
                                                 std::nanf("")));
}

// The rank-th of 384 distinct values in [-1, 1), each exact in bf16 (8 significant bits): the multiples
// of 2^-7, then the odd multiples of 2^-8 below 0.5 in magnitude.
float distinct_16bit_value(int rank) {
  if (rank < 256) return std::ldexp(static_cast<float>(rank - 128), -7);
  return std::ldexp(static_cast<float>(2 * (rank - 256 - 64) + 1), -8);
}

// Values for max pooling in 16-bit: each (image, channel) plane holds distinct values in [-1, 1)
// which fp16 and bf16 represent exactly. Rounding random values to bf16 would leave ties inside
// windows (8 significant bits), and which of two tied positions cuDNN's
// overlapping-window backward picks is not part of its contract; distinct values give every
// window one maximum, so the comparison judges the routing, not the tie rule. (dpbench's own
// backward kernels are tested on ties separately.)
std::vector<float> distinct_plane_values(const Tensor4& shape, uint64_t stream) {
  const size_t plane = static_cast<size_t>(shape.h) * shape.w;
  REQUIRE(plane <= 384);
  std::vector<float> values(shape.count());
  std::vector<int> order(plane);
  for (int b = 0; b < shape.n; ++b) {
    for (int c = 0; c < shape.c; ++c) {
      for (size_t i = 0; i < plane; ++i) order[i] = static_cast<int>(i);
      // Fisher-Yates with the counter generator: reproducible everywhere.
      const uint64_t plane_index = static_cast<uint64_t>(b) * shape.c + c;
      for (size_t i = plane - 1; i > 0; --i) {
        const size_t j = counter_uint(stream, plane_index, i) % (i + 1);
        std::swap(order[i], order[j]);
      }
      for (int y = 0; y < shape.h; ++y) {
        for (int x = 0; x < shape.w; ++x) {
          values[shape.offset(b, c, y, x)] =
              distinct_16bit_value(order[static_cast<size_t>(y) * shape.w + x]);
        }
      }
    }
  }
  return values;
}

// The statistics in a batch norm's saved array: its first c floats (batch_norm_saved_floats).
std::vector<float> saved_statistics(const GpuArray<float>& saved, int channels) {
  const std::vector<float> all = saved.download();
  return {all.begin(), all.begin() + channels};
}

// A saved array with `statistics` in place of its first c floats, the backend's own part kept.
std::vector<float> with_statistics(std::vector<float> saved, const std::vector<float>& statistics) {
  std::copy(statistics.begin(), statistics.end(), saved.begin());
  return saved;
}

}  // namespace

TEST_CASE("cuda batch norm matches the reference in both formats, with and without ReLU and a residual",
          "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  Backend& ops = gpu->ops();
  struct Case {
    Tensor4 shape;
    float centre = 0.5f;        // x uniform in centre +- half_width
    float half_width = 1.0f;
    size_t offset = 0;          // elements; 1: misaligned pointers, the scalar path on any shape
  };
  // At least 4 elements per channel (with 2 or 3 the variance may be near zero, which tests
  // epsilon more than arithmetic). c not a multiple of 4 and h*w not a multiple of 4 take the
  // scalar paths; (8, 64, 56, 56) has 25088 values per channel, split over hundreds of partial
  // results in NHWC; c = 2048 spreads channels over 16 tiles. Centre 100 with spread 1 puts the
  // mean far above the spread: E[x^2] - E[x]^2 in float would lose the variance entirely.
  const Case cases[] = {
      {{2, 3, 5, 7}},       {{1, 13, 9, 9}},       {{8, 16, 4, 4}},   {{4, 33, 1, 1}},
      {{16, 64, 14, 14}},   {{1, 5, 2, 3}},        {{2, 6, 8, 8}},    {{16, 256, 7, 7}},
      {{4, 2048, 2, 3}},    {{8, 64, 56, 56}},     {{8, 64, 56, 56}, 0.5f, 1.0f, 1},
      {{8, 16, 4, 4}, 0.5f, 1.0f, 1},              {{4, 36, 12, 12}, 100.0f, 1.0f},
      {{8, 64, 56, 56}, 100.0f, 1.0f},             {{3, 7, 9, 5}, -100.0f, 1.0f},
  };
  uint64_t stream = 200;
  for (DataType type : kAllTypes) {
    // Both epsilons in fp32; one suffices for the 16-bit types, whose arithmetic is the same.
    const std::vector<float> epsilons =
        type == DataType::f32 ? std::vector<float>{1e-3f, 1.001e-5f} : std::vector<float>{1e-3f};
    for (float epsilon : epsilons) {
      // A residual (a ResNet join: y = act(bn(x) + z), z's gradient the masked dy) with one epsilon.
      for (bool residual : {false, true}) {
        if (residual && epsilon != epsilons.front()) continue;
        for (bool relu : {false, true}) {
          for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
            for (const Case& test : cases) {
              Tensor4 shape = test.shape;
              shape.format = format;
              shape.type = type;
              const std::string what = describe(shape) + " epsilon " + std::to_string(epsilon) +
                                       (relu ? " relu" : "") + (residual ? " + z" : "") + " centre " +
                                       std::to_string(test.centre) +
                                       (test.offset ? " misaligned" : "");
              const int channels = shape.c;
              const size_t count = shape.count();
              const size_t m = count / channels;  // elements per channel
              const std::vector<float> x = rounded(
                  type, random_vector(count, stream++, test.centre - test.half_width,
                                      test.centre + test.half_width));
              const std::vector<float> gamma = random_vector(channels, stream++, 0.5f, 1.5f);
              const std::vector<float> beta = random_vector(channels, stream++, -0.5f, 0.5f);
              const std::vector<float> dy = rounded(type, random_vector(count, stream++));
              const std::vector<float> z = rounded(type, random_vector(count, stream++, -1.0f, 1.0f));

              HostTensor x_ref(type, x), y_ref(type, count), dy_ref(type, dy), dx_ref(type, count),
                  z_ref(type, z), dz_ref(type, count);
              std::vector<float> mean(channels), inv_std(channels), dgamma(channels),
                  dbeta(channels);
              reference.batch_norm_forward_training(shape, x_ref.data(), gamma.data(), beta.data(),
                                                    epsilon, relu, y_ref.data(), mean.data(),
                                                    inv_std.data(), nullptr, residual ? z_ref.data() : nullptr);
              const std::vector<float> y = y_ref.values();

              const size_t offset = test.offset;
              GpuTensor x_gpu(*gpu, type, x, offset), y_gpu(*gpu, type, count, offset),
                  dx_gpu(*gpu, type, random_vector(count, 3), offset),
                  dy_gpu(*gpu, type, dy, offset), z_gpu(*gpu, type, z, offset),
                  dz_gpu(*gpu, type, random_vector(count, 4), offset);
              GpuArray<float> gamma_gpu(*gpu, gamma), beta_gpu(*gpu, beta),
                  mean_gpu(*gpu, batch_norm_saved_floats(channels)),
                  inv_std_gpu(*gpu, batch_norm_saved_floats(channels)),
                  dgamma_gpu(*gpu, random_vector(channels, 1)),
                  dbeta_gpu(*gpu, random_vector(channels, 2));
              GpuArray<float> workspace =
                  batch_norm_workspace(*gpu, ops.batch_norm_workspace_bytes(shape));
              ops.batch_norm_forward_training(shape, x_gpu.data(), gamma_gpu.data(),
                                              beta_gpu.data(), epsilon, relu, y_gpu.data(),
                                              mean_gpu.data(), inv_std_gpu.data(), workspace.data(),
                                              residual ? z_gpu.data() : nullptr);
              // The backward is judged on its own arithmetic: both backends' backwards get the
              // reference's statistics, and both take relu's mask from the GPU's forward (the
              // reference from the GPU's y, the GPU from its saved arrays or its y), so the masks
              // agree even where an output is within rounding of 0.
              const std::vector<float> gpu_y = y_gpu.values();
              HostTensor gpu_y_ref(type, gpu_y);
              reference.batch_norm_backward(shape, x_ref.data(), gpu_y_ref.data(), dy_ref.data(),
                                            gamma.data(), mean.data(), inv_std.data(), epsilon,
                                            relu, dx_ref.data(), dgamma.data(), dbeta.data(),
                                            nullptr, residual ? dz_ref.data() : nullptr);
              GpuArray<float> backward_mean(*gpu, with_statistics(mean_gpu.download(), mean)),
                  backward_inv_std(*gpu, with_statistics(inv_std_gpu.download(), inv_std));
              ops.batch_norm_backward(shape, x_gpu.data(), y_gpu.data(), dy_gpu.data(),
                                      gamma_gpu.data(), backward_mean.data(),
                                      backward_inv_std.data(), epsilon, relu, dx_gpu.data(),
                                      dgamma_gpu.data(), dbeta_gpu.data(), workspace.data(),
                                      residual ? dz_gpu.data() : nullptr);

              std::vector<float> dy_passed = dy;
              if (relu) {
                for (size_t i = 0; i < count; ++i) dy_passed[i] = gpu_y[i] > 0.0f ? dy[i] : 0.0f;
              }
              const BatchNormScale scale = batch_norm_scale(shape, x, dy_passed, mean, inv_std);
              const double gamma_max = 1.5, beta_max = 0.5;
              const double y_rtol = 4 * kEps + storage_rtol(type);

              // Forward. The kernels accumulate in float only over short runs (a thread's items,
              // then a tree of at most 8 levels in the block; the partials are combined in
              // double), summing d = x - shift and d^2 with the channel's first element as the
              // shift, so |d| is at most twice a few std and E[d^2] - E[d]^2 cancels little.
              // Their rounding is a few eps relative to the values involved, |x| <=
              // |mean| + a few std: eps * condition relative to the spread. delta, 32 times that,
              // bounds the relative error of the variance and of inv_std; a naive float E[x^2] -
              // E[x]^2 would be off by ~sqrt(m) * eps * condition^2 (~1 for centre 100).
              const double delta = 32.0 * kEps * scale.condition;
              // The mean: a few eps of the values averaged, and a float rounding on either side.
              const double mean_atol = 8.0 * kEps * scale.mean_spread;
              check_close(saved_statistics(mean_gpu, channels), mean, mean_atol, 0.0, "saved mean " + what);
              check_close(saved_statistics(inv_std_gpu, channels), inv_std, 0.0, delta, "saved inv_std " + what);
              // y = gamma * x_hat + beta (then ReLU, which is 1-Lipschitz): x_hat carries
              // inv_std's relative error and the mean's error times inv_std; a few roundings of y
              // itself, and in 16-bit the final rounding to the type.
              check_close(y_gpu.values(), y,
                          gamma_max * (delta * scale.x_hat_max + mean_atol * scale.inv_std_max) +
                              4 * kEps * (gamma_max * scale.x_hat_max + beta_max + (residual ? 1.0 : 0.0)) +
                              storage_atol(type),
                          y_rtol, "batch norm y " + what);

              // Backward, from the same statistics. dbeta and dgamma / inv_std are sums of m
              // terms |dy'| and |dy' (x - mean)| <= |dy'| x_hat_max / inv_std; a float chain of at
              // most (items per thread + 8) additions, < sqrt(m) + 16 for these shapes, rounds
              // each by eps relative to the sum of magnitudes.
              const double chain = std::sqrt(static_cast<double>(m)) + 16.0;
              const double dbeta_atol = chain * kEps * scale.dy_abs_sum;
              const double dgamma_atol = 2.0 * chain * kEps * scale.dy_abs_sum * scale.x_hat_max;
              check_close(dbeta_gpu.download(), dbeta, dbeta_atol, 4 * kEps, "dbeta " + what);
              check_close(dgamma_gpu.download(), dgamma, dgamma_atol, 4 * kEps, "dgamma " + what);
              // dx = a dy' + b (x - mean) + c, a = gamma inv_std, b = -a inv_std dgamma / m,
              // c = -a dbeta / m: b (x - mean) inherits dgamma's error times x_hat / m, c dbeta's
              // over m; the three terms are at most a, a x_hat^2 and a, each rounded a few times.
              const double a_max = gamma_max * scale.inv_std_max;
              const double dx_atol =
                  a_max * ((scale.x_hat_max * dgamma_atol + dbeta_atol) / static_cast<double>(m) +
                           4 * kEps * (2.0 + scale.x_hat_max * scale.x_hat_max));
              check_close(dx_gpu.values(), dx_ref.values(), dx_atol + storage_atol(type), y_rtol,
                          "batch norm dx " + what);
              // The residual's gradient is the masked dy itself, exact in any type.
              if (residual) check_identical(dz_gpu.values(), dz_ref.values(), "batch norm dz " + what);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("cuda batch norm pair (a downsampling join in training) matches the reference", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  Backend& ops = gpu->ops();
  // Scalar and vector paths (c or h*w not a multiple of 4, a misaligned pointer), many chunks and
  // many channel tiles.
  const std::pair<Tensor4, size_t> cases[] = {{{2, 3, 5, 7}, 0},    {{8, 64, 14, 14}, 0}, {{4, 2048, 2, 3}, 0},
                                              {{8, 64, 56, 56}, 0}, {{8, 16, 4, 4}, 1},   {{1, 13, 9, 9}, 0}};
  uint64_t stream = 950;
  const float epsilon = 1e-5f;
  for (DataType type : kAllTypes) {
    for (bool relu : {false, true}) {
      for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
        for (const auto& [base, offset] : cases) {
          Tensor4 shape = base;
          shape.format = format;
          shape.type = type;
          const std::string what = "batch norm pair " + describe(shape) + (relu ? " relu" : "") +
                                   (offset ? " misaligned" : "");
          const size_t count = shape.count();
          const int channels = shape.c;
          const std::vector<float> x = rounded(type, random_vector(count, stream++, -0.5f, 1.5f));
          const std::vector<float> z = rounded(type, random_vector(count, stream++, -1.5f, 0.5f));
          std::vector<std::vector<float>> norms;  // gamma, beta; then z's
          for (int k = 0; k < 2; ++k) {
            norms.push_back(random_vector(channels, stream++, 0.5f, 1.5f));
            norms.push_back(random_vector(channels, stream++, -0.5f, 0.5f));
          }
          HostTensor x_ref(type, x), z_ref(type, z), y_ref(type, count);
          std::vector<float> mean(channels), inv_std(channels), z_mean(channels), z_inv_std(channels);
          reference.batch_norm_pair_forward_training(shape, x_ref.data(), norms[0].data(), norms[1].data(), mean.data(),
                                                     inv_std.data(), z_ref.data(), norms[2].data(), norms[3].data(),
                                                     z_mean.data(), z_inv_std.data(), epsilon, relu, y_ref.data(),
                                                     nullptr);
          GpuTensor x_gpu(*gpu, type, x, offset), z_gpu(*gpu, type, z, offset), y_gpu(*gpu, type, count, offset);
          std::vector<GpuArray<float>> arrays;
          arrays.reserve(norms.size());
          for (const std::vector<float>& values : norms) arrays.emplace_back(*gpu, values);
          const size_t saved = batch_norm_saved_floats(channels);
          GpuArray<float> mean_gpu(*gpu, saved), inv_std_gpu(*gpu, saved), z_mean_gpu(*gpu, saved),
              z_inv_std_gpu(*gpu, saved);
          GpuArray<float> workspace = batch_norm_workspace(*gpu, 2 * ops.batch_norm_workspace_bytes(shape));
          ops.batch_norm_pair_forward_training(shape, x_gpu.data(), arrays[0].data(), arrays[1].data(), mean_gpu.data(),
                                               inv_std_gpu.data(), z_gpu.data(), arrays[2].data(), arrays[3].data(),
                                               z_mean_gpu.data(), z_inv_std_gpu.data(), epsilon, relu, y_gpu.data(),
                                               workspace.data());
          // Inputs of spread 2 around +-0.5 (condition below 2): the statistics within 32 eps times
          // the condition, under 1e-5 relative (the single batch norm's test derives it); each
          // normalised value, |v| <= gamma * x_hat + beta < 3.2, inherits that and a few roundings,
          // under 4e-5, the sum of two under 1e-4; then one rounding to the type.
          check_close(saved_statistics(mean_gpu, channels), mean, 1e-6, 0.0, "saved mean " + what);
          check_close(saved_statistics(inv_std_gpu, channels), inv_std, 0.0, 2e-5, "saved inv_std " + what);
          check_close(saved_statistics(z_mean_gpu, channels), z_mean, 1e-6, 0.0, "shortcut saved mean " + what);
          check_close(saved_statistics(z_inv_std_gpu, channels), z_inv_std, 0.0, 2e-5,
                      "shortcut saved inv_std " + what);
          check_close(y_gpu.values(), y_ref.values(), 1e-4 + storage_atol(type), storage_rtol(type) + 8 * kEps,
                      "y " + what);
        }
      }
    }
  }
}

TEST_CASE("cuda batch norms from a convolution's sums match the reference from the same sums; a fused "
          "convolution makes those sums",
          "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  Backend& ops = gpu->ops();
  uint64_t stream = 1200;
  const float epsilon = 1e-5f;
  for (DataType type : {DataType::bf16, DataType::f16}) {
    const ConvGeometry g = make_conv_geometry(Tensor4{8, 16, 14, 14, DataFormat::nhwc, type}, 32, 3, 3, 1, 1,
                                              Padding::explicit_symmetric, 1, 1);
    const Tensor4& shape = g.output;
    const size_t count = shape.count();
    const int channels = shape.c;
    const std::string what = describe(g);
    // The sums in double of a tensor's stored values, rounded to fp32 as a convolution leaves them.
    auto sums_of = [&](const std::vector<float>& values) {
      std::vector<double> sums(2 * static_cast<size_t>(channels), 0.0);
      for (size_t i = 0; i < values.size(); ++i) {
        sums[i % channels] += values[i];
        sums[channels + i % channels] += static_cast<double>(values[i]) * values[i];
      }
      return std::vector<float>(sums.begin(), sums.end());
    };

    // The convolution with the sums in its epilogue, where the backend chose it (timed).
    const std::vector<float> x = rounded(type, random_vector(g.input.count(), stream++));
    const std::vector<float> w = rounded(type, random_vector(g.filter.count(), stream++));
    const size_t bytes = ops.conv2d_statistics_workspace_bytes(g);
    GpuTensor x_gpu(*gpu, type, x), w_gpu(*gpu, type, w), y_gpu(*gpu, type, count);
    GpuArray<float> workspace(*gpu, std::max<size_t>(1, (bytes + 3) / 4));
    GpuArray<float> conv_sums(*gpu, 2 * static_cast<size_t>(channels));
    if (ops.conv2d_forward_statistics_fused(g)) {
      ops.conv2d_forward_statistics(g, x_gpu.data(), w_gpu.data(), y_gpu.data(), conv_sums.data(), workspace.data(),
                                    bytes);
      const std::vector<float> y = y_gpu.values();
      const std::vector<float> expected = sums_of(y);
      const std::vector<float> got = conv_sums.download();
      // cuDNN may sum the fp32 results before their rounding: one storage rounding per term.
      for (int c = 0; c < 2 * channels; ++c) {
        double magnitude = 0.0;
        for (size_t i = static_cast<size_t>(c % channels); i < count; i += channels)
          magnitude += c < channels ? std::fabs(y[i]) : 2.0 * y[i] * y[i];
        INFO(what << " sum " << c);
        CHECK(std::fabs(got[c] - expected[c]) <= magnitude * (storage_rtol(type) + 8 * kEps) + 1e-6);
      }
    } else {
      WARN(what << ": the backend keeps the batch norm's own statistics pass (no fused engine, or it timed slower)");
    }
    // A shape without a fused plan is refused, not run without its sums.
    CHECK_THROWS_AS(ops.conv2d_forward_statistics(make_conv_geometry(Tensor4{2, 8, 6, 6, DataFormat::nhwc, type}, 8, 1,
                                                                     1, 1, 1, Padding::explicit_symmetric, 0, 0),
                                                  x_gpu.data(), w_gpu.data(), y_gpu.data(), conv_sums.data(),
                                                  workspace.data(), bytes),
                    RuntimeError);

    // Batch norm (single with a residual, and the pair) from given sums, against the reference
    // from the same sums: the same finalize arithmetic in double, then the normalise passes.
    for (bool relu : {false, true}) {
      const std::vector<float> a = rounded(type, random_vector(count, stream++, -0.5f, 1.5f));
      const std::vector<float> z = rounded(type, random_vector(count, stream++, -1.5f, 0.5f));
      const std::vector<float> a_sums = sums_of(a), z_sums = sums_of(z);
      std::vector<std::vector<float>> norms;
      for (int k = 0; k < 2; ++k) {
        norms.push_back(random_vector(channels, stream++, 0.5f, 1.5f));
        norms.push_back(random_vector(channels, stream++, -0.5f, 0.5f));
      }
      HostTensor a_ref(type, a), z_ref(type, z), single_ref(type, count), pair_ref(type, count);
      std::vector<float> mean(channels), inv_std(channels), z_mean(channels), z_inv_std(channels);
      reference.batch_norm_forward_training(shape, a_ref.data(), norms[0].data(), norms[1].data(), epsilon, relu,
                                            single_ref.data(), mean.data(), inv_std.data(), nullptr, z_ref.data(),
                                            a_sums.data());
      reference.batch_norm_pair_forward_training(shape, a_ref.data(), norms[0].data(), norms[1].data(), mean.data(),
                                                 inv_std.data(), z_ref.data(), norms[2].data(), norms[3].data(),
                                                 z_mean.data(), z_inv_std.data(), epsilon, relu, pair_ref.data(),
                                                 nullptr, a_sums.data(), z_sums.data());
      GpuTensor a_gpu(*gpu, type, a), z_gpu(*gpu, type, z), single_gpu(*gpu, type, count), pair_gpu(*gpu, type, count);
      std::vector<GpuArray<float>> arrays;
      arrays.reserve(norms.size());
      for (const std::vector<float>& values : norms) arrays.emplace_back(*gpu, values);
      GpuArray<float> a_sums_gpu(*gpu, a_sums), z_sums_gpu(*gpu, z_sums);
      const size_t saved = batch_norm_saved_floats(channels);
      GpuArray<float> mean_gpu(*gpu, saved), inv_std_gpu(*gpu, saved), z_mean_gpu(*gpu, saved),
          z_inv_std_gpu(*gpu, saved);
      GpuArray<float> norm_workspace = batch_norm_workspace(*gpu, 2 * ops.batch_norm_workspace_bytes(shape));
      ops.batch_norm_forward_training(shape, a_gpu.data(), arrays[0].data(), arrays[1].data(), epsilon, relu,
                                      single_gpu.data(), mean_gpu.data(), inv_std_gpu.data(), norm_workspace.data(),
                                      z_gpu.data(), a_sums_gpu.data());
      const std::string single = "single from sums " + what + (relu ? " relu" : "");
      check_close(saved_statistics(mean_gpu, channels), mean, 1e-7, 1e-7, "saved mean " + single);
      check_close(saved_statistics(inv_std_gpu, channels), inv_std, 0.0, 1e-6, "saved inv_std " + single);
      check_close(single_gpu.values(), single_ref.values(), 1e-4 + storage_atol(type), storage_rtol(type) + 8 * kEps,
                  "y " + single);
      ops.batch_norm_pair_forward_training(shape, a_gpu.data(), arrays[0].data(), arrays[1].data(), mean_gpu.data(),
                                           inv_std_gpu.data(), z_gpu.data(), arrays[2].data(), arrays[3].data(),
                                           z_mean_gpu.data(), z_inv_std_gpu.data(), epsilon, relu, pair_gpu.data(),
                                           norm_workspace.data(), a_sums_gpu.data(), z_sums_gpu.data());
      const std::string pair = "pair from sums " + what + (relu ? " relu" : "");
      check_close(saved_statistics(z_mean_gpu, channels), z_mean, 1e-7, 1e-7, "shortcut saved mean " + pair);
      check_close(saved_statistics(z_inv_std_gpu, channels), z_inv_std, 0.0, 1e-6, "shortcut saved inv_std " + pair);
      check_close(pair_gpu.values(), pair_ref.values(), 1e-4 + storage_atol(type), storage_rtol(type) + 8 * kEps,
                  "y " + pair);
    }
  }
}

TEST_CASE("cuda batch norm in inference matches the reference in both formats, in place too", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  Backend& ops = gpu->ops();
  // Scalar and vector paths (c or h*w not a multiple of 4, a misaligned pointer), many tiles.
  const std::pair<Tensor4, size_t> cases[] = {{{2, 3, 5, 7}, 0},    {{8, 64, 14, 14}, 0}, {{4, 2048, 2, 3}, 0},
                                              {{8, 64, 56, 56}, 0}, {{8, 16, 4, 4}, 1},   {{1, 13, 9, 9}, 0}};
  enum class Residual { none, plain, normalised };
  uint64_t stream = 900;
  for (DataType type : kAllTypes) {
    for (bool relu : {false, true}) {
      for (Residual residual : {Residual::none, Residual::plain, Residual::normalised}) {
        for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
          for (const auto& [base, offset] : cases) {
            Tensor4 shape = base;
            shape.format = format;
            shape.type = type;
            const std::string what = "inference batch norm " + describe(shape) + (relu ? " relu" : "") +
                                     (residual == Residual::plain ? " + z" : residual == Residual::normalised ? " + bn(z)" : "") +
                                     (offset ? " misaligned" : "");
            const size_t count = shape.count();
            const int channels = shape.c;
            const std::vector<float> x = rounded(type, random_vector(count, stream++, -2.0f, 2.0f));
            const std::vector<float> z = rounded(type, random_vector(count, stream++, -2.0f, 2.0f));
            std::vector<std::vector<float>> norms;  // gamma, beta, mean, variance; then z's
            for (int k = 0; k < 2; ++k) {
              norms.push_back(random_vector(channels, stream++, 0.5f, 1.5f));
              norms.push_back(random_vector(channels, stream++, -0.5f, 0.5f));
              norms.push_back(random_vector(channels, stream++, -1.0f, 1.0f));
              norms.push_back(random_vector(channels, stream++, 0.25f, 4.0f));
            }
            const float epsilon = 1.001e-5f;
            auto host_norm = [&](int k) {
              return InferenceNorm{norms[4 * k].data(), norms[4 * k + 1].data(), norms[4 * k + 2].data(),
                                   norms[4 * k + 3].data(), epsilon};
            };
            const InferenceNorm ref_z_norm = host_norm(1);
            HostTensor x_ref(type, x), z_ref(type, z), y_ref(type, count);
            reference.batch_norm_inference(shape, x_ref.data(), host_norm(0),
                                           residual == Residual::none ? nullptr : z_ref.data(),
                                           residual == Residual::normalised ? &ref_z_norm : nullptr, relu, y_ref.data());
            GpuTensor x_gpu(*gpu, type, x, offset), z_gpu(*gpu, type, z, offset), y_gpu(*gpu, type, count, offset);
            std::vector<GpuArray<float>> arrays;
            arrays.reserve(norms.size());
            for (const std::vector<float>& values : norms) arrays.emplace_back(*gpu, values);
            auto gpu_norm = [&](int k) {
              return InferenceNorm{arrays[4 * k].data(), arrays[4 * k + 1].data(), arrays[4 * k + 2].data(),
                                   arrays[4 * k + 3].data(), epsilon};
            };
            const InferenceNorm gpu_z_norm = gpu_norm(1);
            auto run = [&](void* out) {
              ops.batch_norm_inference(shape, x_gpu.data(), gpu_norm(0), residual == Residual::none ? nullptr : z_gpu.data(),
                                       residual == Residual::normalised ? &gpu_z_norm : nullptr, relu, out);
            };
            run(y_gpu.data());
            // rsqrtf and fmas in fp32 against double: a few fp32 ulps, then one rounding to T.
            const double rtol = storage_rtol(type) + 4e-6, atol = storage_atol(type) + 4e-6;
            check_close(y_gpu.values(), y_ref.values(), atol, rtol, what);
            run(x_gpu.data());  // in place over x
            check_identical(x_gpu.values(), y_gpu.values(), what + ", in place");
          }
        }
      }
    }
  }
}

TEST_CASE("cuda batch norm: dx may alias dy, and the passes replay as a CUDA graph", "[gpu]") {
  auto gpu = make_gpu();
  Backend& ops = gpu->ops();
  for (DataType type : kAllTypes) {
    for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
      const Tensor4 shape{8, 64, 28, 28, format, type};
      const std::string what = describe(shape);
      const size_t count = shape.count();
      const int channels = shape.c;
      const std::vector<float> gamma = random_vector(channels, 700, 0.5f, 1.5f);
      const std::vector<float> beta = random_vector(channels, 701, -0.5f, 0.5f);
      const std::vector<float> dy = rounded(type, random_vector(count, 703));
      GpuTensor x_gpu(*gpu, type, rounded(type, random_vector(count, 702))),
          dy_gpu(*gpu, type, dy), y_gpu(*gpu, type, count), dx_gpu(*gpu, type, count);
      GpuArray<float> gamma_gpu(*gpu, gamma), beta_gpu(*gpu, beta), mean_gpu(*gpu, batch_norm_saved_floats(channels)),
          inv_std_gpu(*gpu, batch_norm_saved_floats(channels)), dgamma_gpu(*gpu, channels), dbeta_gpu(*gpu, channels);
      GpuArray<float> workspace = batch_norm_workspace(*gpu, ops.batch_norm_workspace_bytes(shape));
      auto step = [&](void* dx) {
        ops.batch_norm_forward_training(shape, x_gpu.data(), gamma_gpu.data(), beta_gpu.data(),
                                        1e-5f, true, y_gpu.data(), mean_gpu.data(),
                                        inv_std_gpu.data(), workspace.data(), nullptr);
        ops.batch_norm_backward(shape, x_gpu.data(), y_gpu.data(), dy_gpu.data(), gamma_gpu.data(),
                                mean_gpu.data(), inv_std_gpu.data(), 1e-5f, true, dx,
                                dgamma_gpu.data(), dbeta_gpu.data(), workspace.data(), nullptr);
      };
      // Eager: the work is split by shape alone and summed in a fixed order, so a second run
      // gives the same bits.
      step(dx_gpu.data());
      const std::vector<float> y = y_gpu.values(), dx = dx_gpu.values(),
                               dgamma = dgamma_gpu.download(), dbeta = dbeta_gpu.download();
      step(dx_gpu.data());
      check_same_values(dx_gpu.values(), dx, "second eager run " + what);

      // In place: dx written over dy gives the same bits as a separate dx.
      step(dy_gpu.data());
      check_same_values(dy_gpu.values(), dx, "dx over dy " + what);
      check_identical(dgamma_gpu.download(), dgamma, "dgamma with dx over dy " + what);

      // Captured once, replayed with new input: nothing may depend on the capture-time data or
      // on state left by an earlier replay.
      dy_gpu.upload(dy);
      std::unique_ptr<CapturedWork> graph = gpu->capture([&] { step(dx_gpu.data()); });
      REQUIRE(graph != nullptr);
      for (int replay = 0; replay < 2; ++replay) {
        dx_gpu.upload(random_vector(count, 704));
        graph->launch();
        check_same_values(y_gpu.values(), y, "graph y " + what);
        check_same_values(dx_gpu.values(), dx, "graph dx " + what);
        check_identical(dbeta_gpu.download(), dbeta, "graph dbeta " + what);
      }
      x_gpu.upload(rounded(type, random_vector(count, 705, 2.0f, 5.0f)));
      graph->launch();
      const std::vector<float> replayed_y = y_gpu.values();
      CHECK(replayed_y != y);
      GpuTensor eager_y(*gpu, type, count);
      ops.batch_norm_forward_training(shape, x_gpu.data(), gamma_gpu.data(), beta_gpu.data(),
                                      1e-5f, true, eager_y.data(), mean_gpu.data(),
                                      inv_std_gpu.data(), workspace.data(), nullptr);
      check_same_values(replayed_y, eager_y.values(), "graph replay with new x " + what);
    }
  }
}

TEST_CASE("cuda batch norm's backward masks relu from x exactly as from the stored y, at the step's edge, "
          "and writes the residual's gradient over dy alike", "[gpu]") {
  auto gpu = make_gpu();
  Backend& ops = gpu->ops();
  // Without a residual the backward takes relu's mask from a threshold on x that the forward's
  // finalize found; with one it reads y. Given the same forward, the two backwards must agree bit
  // for bit. Each channel's beta puts the normalised value of its median x within rounding of 0,
  // so the mask there depends on every rounding of the forward. Channel 1 has gamma < 0 (the mask
  // falls with x), channels 2 and 3 gamma 0 (the same y for every x, above and below 0), channel 4
  // a gamma so small that in fp16 positive values next to the step round to 0.
  const Tensor4 shapes[] = {{4, 24, 10, 12}, {2, 7, 5, 9}};  // the vector paths, and the scalar ones
  uint64_t stream = 1500;
  for (DataType type : kAllTypes) {
    for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
      for (bool from_sums : {false, true}) {
        for (Tensor4 shape : shapes) {
          shape.format = format;
          shape.type = type;
          const std::string what = describe(shape) + (from_sums ? " from sums" : "");
          const size_t count = shape.count();
          const int channels = shape.c;
          const std::vector<float> x = rounded(type, random_vector(count, stream++));
          const std::vector<float> dy = rounded(type, random_vector(count, stream++));
          std::vector<float> gamma = random_vector(channels, stream++, 0.5f, 1.5f);
          std::vector<float> beta(channels, 0.0f);
          gamma[1] = -gamma[1];
          gamma[2] = gamma[3] = 0.0f;
          gamma[4] = 1e-7f;
          auto channel_of = [&](size_t i) {
            return format == DataFormat::nhwc ? static_cast<int>(i % channels)
                                              : static_cast<int>(i / (shape.h * shape.w) % channels);
          };
          std::vector<double> sums(2 * static_cast<size_t>(channels), 0.0);
          std::vector<std::vector<float>> channel_values(channels);
          for (size_t i = 0; i < count; ++i) {
            const int c = channel_of(i);
            sums[c] += x[i];
            sums[channels + c] += static_cast<double>(x[i]) * x[i];
            channel_values[c].push_back(x[i]);
          }
          GpuArray<float> sums_gpu(*gpu, std::vector<float>(sums.begin(), sums.end()));
          GpuTensor x_gpu(*gpu, type, x), y_gpu(*gpu, type, count), dy_gpu(*gpu, type, dy),
              dx_gpu(*gpu, type, count), residual_dx_gpu(*gpu, type, count), d_residual_gpu(*gpu, type, count);
          GpuArray<float> gamma_gpu(*gpu, gamma), mean_gpu(*gpu, batch_norm_saved_floats(channels)),
              inv_std_gpu(*gpu, batch_norm_saved_floats(channels)), dgamma_gpu(*gpu, channels),
              dbeta_gpu(*gpu, channels), residual_dgamma_gpu(*gpu, channels), residual_dbeta_gpu(*gpu, channels);
          GpuArray<float> workspace = batch_norm_workspace(*gpu, ops.batch_norm_workspace_bytes(shape));
          auto forward = [&](GpuArray<float>& beta_gpu) {
            ops.batch_norm_forward_training(shape, x_gpu.data(), gamma_gpu.data(), beta_gpu.data(), 1e-5f, true,
                                            y_gpu.data(), mean_gpu.data(), inv_std_gpu.data(), workspace.data(),
                                            nullptr, from_sums ? sums_gpu.data() : nullptr);
          };
          // The statistics do not depend on beta: a first forward gives them, then beta moves each
          // step onto an x of its channel.
          GpuArray<float> zero_beta(*gpu, beta);
          forward(zero_beta);
          const std::vector<float> mean = saved_statistics(mean_gpu, channels),
                                   inv_std = saved_statistics(inv_std_gpu, channels);
          for (int c = 0; c < channels; ++c) {
            std::vector<float>& values = channel_values[c];
            std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
            const double scale = static_cast<double>(gamma[c]) * inv_std[c];
            beta[c] = static_cast<float>(-scale * (values[values.size() / 2] - static_cast<double>(mean[c])));
          }
          beta[2] = 0.25f;
          beta[3] = -0.25f;
          GpuArray<float> beta_gpu(*gpu, beta);
          forward(beta_gpu);
          ops.batch_norm_backward(shape, x_gpu.data(), y_gpu.data(), dy_gpu.data(), gamma_gpu.data(), mean_gpu.data(),
                                  inv_std_gpu.data(), 1e-5f, true, dx_gpu.data(), dgamma_gpu.data(), dbeta_gpu.data(),
                                  workspace.data(), nullptr);
          ops.batch_norm_backward(shape, x_gpu.data(), y_gpu.data(), dy_gpu.data(), gamma_gpu.data(), mean_gpu.data(),
                                  inv_std_gpu.data(), 1e-5f, true, residual_dx_gpu.data(),
                                  residual_dgamma_gpu.data(), residual_dbeta_gpu.data(), workspace.data(),
                                  d_residual_gpu.data());
          const std::vector<float> y = y_gpu.values();
          std::vector<float> masked = dy;
          for (size_t i = 0; i < count; ++i) masked[i] = y[i] > 0.0f ? dy[i] : 0.0f;
          check_identical(d_residual_gpu.values(), masked, "dy masked by the stored y " + what);
          check_same_values(dx_gpu.values(), residual_dx_gpu.values(), "dx, mask from x against from y " + what);
          check_identical(dgamma_gpu.download(), residual_dgamma_gpu.download(), "dgamma " + what);
          check_identical(dbeta_gpu.download(), residual_dbeta_gpu.download(), "dbeta " + what);
          // d_residual over dy itself, as a join writes its shortcut's gradient: the same answers.
          GpuTensor shared_gpu(*gpu, type, dy), shared_dx_gpu(*gpu, type, count);
          ops.batch_norm_backward(shape, x_gpu.data(), y_gpu.data(), shared_gpu.data(), gamma_gpu.data(),
                                  mean_gpu.data(), inv_std_gpu.data(), 1e-5f, true, shared_dx_gpu.data(),
                                  dgamma_gpu.data(), dbeta_gpu.data(), workspace.data(), shared_gpu.data());
          check_identical(shared_gpu.values(), masked, "d_residual over dy " + what);
          check_identical(shared_dx_gpu.values(), residual_dx_gpu.values(), "dx with d_residual over dy " + what);
          check_identical(dgamma_gpu.download(), residual_dgamma_gpu.download(), "dgamma, d_residual over dy " + what);
          check_identical(dbeta_gpu.download(), residual_dbeta_gpu.download(), "dbeta, d_residual over dy " + what);
          // Not vacuous: the steps have both sides; gamma 0 passes everything above 0 and nothing
          // below; in fp16 the tiny-gamma channel has positive values that rounded to 0.
          size_t passed[8] = {}, rounded_away = 0;
          for (size_t i = 0; i < count; ++i) {
            const int c = channel_of(i);
            if (c < 8) passed[c] += y[i] > 0.0f;
            const double value = static_cast<double>(gamma[c]) * inv_std[c] * (x[i] - static_cast<double>(mean[c])) +
                                 beta[c];
            if (c == 4 && value > 0.0 && y[i] == 0.0f) ++rounded_away;
          }
          const size_t per_channel = count / channels;
          for (int c : {0, 1, 4, 5}) {
            INFO(what << " channel " << c);
            CHECK(passed[c] > 0);
            CHECK(passed[c] < per_channel);
          }
          CHECK(passed[2] == per_channel);
          CHECK(passed[3] == 0);
          if (type == DataType::f16) CHECK(rounded_away > 0);
        }
      }
    }
  }
}

TEST_CASE("cuda pooling matches the reference in both formats", "[gpu]") {
  auto gpu = make_gpu();
  // --deterministic always runs dpbench's kernels, forward and backward (elsewhere each runs
  // where it times faster than cuDNN's): the reference's windows, order and arithmetic, so the
  // same bits. Max pooling's backward there is the two-pass kernel (positions, then the gather),
  // or for windows of more than 255 positions the gather that rescans them.
  auto exact = make_gpu();
  set_deterministic(*exact, true);
  ReferenceBackend reference;
  struct PoolCase {
    PoolMode mode;
    int window_h, window_w, stride_h, stride_w;
    Padding padding;
  };
  const PoolCase cases[] = {
      {PoolMode::max, 3, 3, 2, 2, Padding::valid},  // Inception's reductions
      {PoolMode::max, 3, 3, 2, 2, Padding::same},   // ResNet's stem (pad 1)
      {PoolMode::max, 2, 2, 2, 2, Padding::valid},  // VGG
      {PoolMode::max, 3, 2, 1, 2, Padding::same},
      // disjoint windows (own backward kernel): with padding, and with gaps between windows
      {PoolMode::max, 3, 3, 3, 3, Padding::same},
      {PoolMode::max, 2, 3, 3, 3, Padding::valid},
      {PoolMode::average_include_padding, 3, 3, 1, 1, Padding::same},
      {PoolMode::average_exclude_padding, 3, 3, 1, 1, Padding::same},
      {PoolMode::average_exclude_padding, 5, 3, 3, 2, Padding::same},
      {PoolMode::average_include_padding, 7, 7, 1, 1, Padding::valid},  // global average
      // More positions than a byte holds: the backward rescans the windows instead of reading
      // each one's first maximum from the two-pass kernel's buffer.
      {PoolMode::max, 16, 16, 2, 2, Padding::valid},
  };
  // {2, 32, 8, 6} and {1, 3, 6, 4} tile exactly under VGG's 2x2/2 (the own one-thread-per-window
  // kernel), with a channel count that allows 16-byte packs and one that does not; 6 channels
  // give 16-bit kernels pairs.
  const Tensor4 shapes[] = {{1, 5, 7, 7}, {3, 17, 11, 13}, {2, 64, 8, 9}, {2, 32, 8, 6},
                            {1, 3, 6, 4}, {2, 16, 19, 18}, {2, 6, 9, 8}};
  uint64_t stream = 300;
  for (DataType type : kAllTypes) {
    for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
      for (Tensor4 input : shapes) {
        input.format = format;
        input.type = type;
        for (const PoolCase& c : cases) {
          if (c.window_h > input.h || c.window_w > input.w) continue;
          const PoolGeometry g = make_pool_geometry(input, c.mode, c.window_h, c.window_w,
                                                    c.stride_h, c.stride_w, c.padding);
          std::ostringstream what;
          what << describe(input) << " mode " << static_cast<int>(c.mode) << " window "
               << c.window_h << "x" << c.window_w << " stride " << c.stride_h << "x"
               << c.stride_w << " pad " << g.pad_h << "x" << g.pad_w;
          const std::vector<float> x = type == DataType::f32
                                           ? random_vector(g.input.count(), stream++)
                                           : distinct_plane_values(g.input, stream++);
          const std::vector<float> dy = rounded(type, random_vector(g.output.count(), stream++));
          GpuTensor x_gpu(*gpu, type, x), dy_gpu(*gpu, type, dy),
              y_gpu(*gpu, type, g.output.count()),
              dx_gpu(*gpu, type, random_vector(g.input.count(), 4));
          gpu->ops().pool_forward(g, x_gpu.data(), y_gpu.data());
          gpu->ops().pool_backward(g, x_gpu.data(), y_gpu.data(), dy_gpu.data(), dx_gpu.data());
          HostTensor x_ref(type, x), dy_ref(type, dy), y_ref(type, g.output.count()),
              dx_ref(type, g.input.count());
          reference.pool_forward(g, x_ref.data(), y_ref.data());
          reference.pool_backward(g, x_ref.data(), y_ref.data(), dy_ref.data(), dx_ref.data());

          const double window = static_cast<double>(c.window_h) * c.window_w;
          // Windows overlapping one input element: it gathers that many gradients.
          const double overlap = std::ceil(static_cast<double>(c.window_h) / c.stride_h) *
                                 std::ceil(static_cast<double>(c.window_w) / c.stride_w);
          const double rtol = storage_rtol(type), atol = storage_atol(type);
          if (c.mode == PoolMode::max) {
            // A maximum is exact, in any type. Its gradient sums up to `overlap` values
            // |dy| <= 1 in some order, then is rounded to the type.
            check_same_values(y_gpu.values(), y_ref.values(), "max pool forward " + what.str());
            check_close(dx_gpu.values(), dx_ref.values(), 2.0 * overlap * kEps + atol, rtol,
                        "max pool backward " + what.str());
          } else {
            // A window's sum of |x| <= 1 rounds up to `window` times, then one division (or a
            // multiplication by a rounded reciprocal); the gradient sums `overlap` such
            // quotients. In 16-bit each result is then rounded to the type.
            check_close(y_gpu.values(), y_ref.values(), 2.0 * (window + 2) * kEps + atol, rtol,
                        "average pool forward " + what.str());
            check_close(dx_gpu.values(), dx_ref.values(), 4.0 * (overlap + 2) * kEps + atol, rtol,
                        "average pool backward " + what.str());
          }
          // dpbench's own kernels, forward and backward, bit for bit; for max pooling also with ties
          // everywhere (after a ReLU most values are 0): each window's gradient must still go to
          // its first maximum, as the reference's.
          std::vector<float> tied = x;
          for (float& v : tied) v = v < 0.0f ? 0.0f : (v > 0.25f ? 1.0f : 0.0f);
          for (const std::vector<float>* input : {&x, static_cast<const std::vector<float>*>(&tied)}) {
            if (input == &tied && c.mode != PoolMode::max) continue;
            GpuTensor exact_x(*exact, type, *input), exact_dy(*exact, type, dy),
                exact_y(*exact, type, g.output.count()), exact_dx(*exact, type, random_vector(g.input.count(), 5));
            HostTensor input_ref(type, *input);
            exact->ops().pool_forward(g, exact_x.data(), exact_y.data());
            exact->ops().pool_backward(g, exact_x.data(), exact_y.data(), exact_dy.data(), exact_dx.data());
            reference.pool_forward(g, input_ref.data(), y_ref.data());
            reference.pool_backward(g, input_ref.data(), y_ref.data(), dy_ref.data(), dx_ref.data());
            check_same_values(exact_y.values(), y_ref.values(),
                              "own pool forward" + std::string(input == &tied ? " with ties " : " ") + what.str());
            check_same_values(exact_dx.values(), dx_ref.values(),
                              "own pool backward" + std::string(input == &tied ? " with ties " : " ") + what.str());
          }
          if (c.mode == PoolMode::max) {
            // The backward of the ReLU before the pool in the same pass (relu_input): as
            // pool_backward then relu_backward on x, on inputs a ReLU made (zeros, ties among them).
            PoolGeometry after_relu = g;
            after_relu.relu_input = true;
            std::vector<float> relu_x = x;
            for (float& v : relu_x) v = std::max(v, 0.0f);
            HostTensor rx_ref(type, relu_x), ry_ref(type, g.output.count()), rdx_ref(type, g.input.count());
            reference.pool_forward(after_relu, rx_ref.data(), ry_ref.data());
            reference.pool_backward(after_relu, rx_ref.data(), ry_ref.data(), dy_ref.data(), rdx_ref.data());
            for (Device* device : {gpu.get(), exact.get()}) {
              GpuTensor rx(*device, type, relu_x), rdy(*device, type, dy), ry(*device, type, g.output.count()),
                  rdx(*device, type, random_vector(g.input.count(), 6));
              device->ops().pool_forward(after_relu, rx.data(), ry.data());
              device->ops().pool_backward(after_relu, rx.data(), ry.data(), rdy.data(), rdx.data());
              if (device == exact.get()) {  // the ReLU's mask inside dpbench's kernels, bit for bit
                check_same_values(rdx.values(), rdx_ref.values(), "own max pool backward after a ReLU " + what.str());
              } else {
                check_close(rdx.values(), rdx_ref.values(), 2.0 * overlap * kEps + atol, rtol,
                            "max pool backward after a ReLU " + what.str());
              }
            }
          }
        }
      }
    }
  }
  // The deterministic device ran every pooling on dpbench's kernels, and max pooling's overlapping
  // windows of up to 255 positions through the two-pass kernel (the plans kept their buffers).
  const nlohmann::json pooling = math_paths(*exact)["pooling"];
  CHECK(pooling["own_forward"] == pooling["shapes"]);
  CHECK(pooling["own_backward"] == pooling["shapes"]);
  CHECK(pooling["two_pass_backward"].get<int>() > 0);
}

TEST_CASE("cuda channel bias and its gradient match the reference in both formats", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  // Many partial sums per channel: (16, 64, 32, 32) and (32, 64, 14, 14); channels that fill no
  // whole tile: 33 and 70.
  const Tensor4 shapes[] = {{1, 1, 1, 1},    {2, 3, 5, 7},     {4, 33, 9, 9},   {1, 1000, 1, 1},
                            {32, 64, 14, 14}, {16, 64, 32, 32}, {3, 70, 17, 19}};
  uint64_t stream = 400;
  for (DataType type : kAllTypes) {
    for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
      for (Tensor4 shape : shapes) {
        shape.format = format;
        shape.type = type;
        const std::vector<float> y = rounded(type, random_vector(shape.count(), stream++));
        const std::vector<float> bias = random_vector(shape.c, stream++);
        for (const bool relu : {false, true}) {
          const std::string what = describe(shape) + (relu ? " +relu" : "");
          GpuTensor out_gpu(*gpu, type, y);
          GpuArray<float> bias_gpu(*gpu, bias);
          HostTensor out_ref(type, y);
          gpu->ops().add_channel_bias(shape, out_gpu.data(), bias_gpu.data(), relu);
          reference.add_channel_bias(shape, out_ref.data(), bias.data(), relu);
          // One fp32 addition (and a comparison) per element, rounded once to the type: both
          // round the same exact sum.
          check_same_values(out_gpu.values(), out_ref.values(), "add_channel_bias " + what);

          const std::vector<float> dy = rounded(type, random_vector(shape.count(), stream++));
          GpuTensor dy_gpu(*gpu, type, dy);
          HostTensor dy_ref(type, dy);
          GpuArray<float> dbias_gpu(*gpu, random_vector(shape.c, 3));  // must be overwritten
          Buffer workspace =
              gpu->allocate(std::max<size_t>(gpu->ops().channel_bias_workspace_bytes(shape), 1), kTestWorkspace);
          gpu->ops().channel_bias_gradient(shape, out_gpu.data(), dy_gpu.data(), dbias_gpu.data(),
                                           relu, workspace.data());
          std::vector<float> dbias(shape.c);
          reference.channel_bias_gradient(shape, out_ref.data(), dy_ref.data(), dbias.data(), relu,
                                          nullptr);
          // The mask is a comparison: dy must match exactly.
          check_same_values(dy_gpu.values(), dy_ref.values(), "channel_bias_gradient mask " + what);
          // m = n*h*w terms of size <= 1 per channel, summed in float within a part and in
          // double across parts: random-walk error sqrt(m) * eps * m at worst, margin 2. dbias
          // is fp32 in every type.
          const double m = static_cast<double>(shape.count()) / shape.c;
          check_close(dbias_gpu.download(), dbias, 2.0 * std::sqrt(m) * kEps * m + kEps, 4 * kEps,
                      "channel_bias_gradient " + what);
        }
      }
    }
  }
}

TEST_CASE("cuda dropout is bit-identical to the reference and draws a new mask each step",
          "[gpu]") {
  // The kept values are x * dropout_keep_scale(rate) in fp32, rounded once to the type: equal on
  // both sides.
  auto gpu = make_gpu();
  ReferenceBackend reference;
  for (DataType type : kAllTypes) {
    for (size_t n : {size_t{1}, size_t{1000}, (size_t{1} << 20) + 3}) {
      for (float rate : {0.1f, 0.5f, 0.7f}) {
        const std::string what =
            "n=" + std::to_string(n) + " rate=" + std::to_string(rate) + type_suffix(type);
        const std::vector<float> x = rounded(type, random_vector(n, 500));
        const std::vector<float> dy = rounded(type, random_vector(n, 501));
        GpuTensor x_gpu(*gpu, type, x), dy_gpu(*gpu, type, dy), y_gpu(*gpu, type, n),
            dx_gpu(*gpu, type, n);
        const HostTensor x_ref(type, x), dy_ref(type, dy);
        std::vector<float> previous_y;
        for (int32_t step : {5, 6}) {
          GpuArray<int32_t> step_gpu(*gpu, std::vector<int32_t>{step});
          gpu->ops().dropout_forward(type, x_gpu.data(), y_gpu.data(), n, rate, 1234, 777,
                                     step_gpu.data());
          gpu->ops().dropout_backward(type, dy_gpu.data(), dx_gpu.data(), n, rate, 1234, 777,
                                      step_gpu.data());
          HostTensor y_ref(type, n), dx_ref(type, n);
          reference.dropout_forward(type, x_ref.data(), y_ref.data(), n, rate, 1234, 777, &step);
          reference.dropout_backward(type, dy_ref.data(), dx_ref.data(), n, rate, 1234, 777,
                                     &step);
          const std::vector<float> y_from_gpu = y_gpu.values();
          check_same_values(y_from_gpu, y_ref.values(), "dropout forward " + what);
          check_same_values(dx_gpu.values(), dx_ref.values(), "dropout backward " + what);

          if (n >= 1000) {
            // The kept fraction is 1 - rate within 5 standard deviations of a binomial draw.
            size_t kept = 0;
            for (float v : y_from_gpu) kept += v != 0.0f;
            const double sigma = std::sqrt(n * rate * (1.0 - rate));
            CHECK(std::fabs(static_cast<double>(kept) - n * (1.0 - rate)) <= 5.0 * sigma + 1.0);
            if (!previous_y.empty()) {
              size_t changed = 0;
              for (size_t i = 0; i < n; ++i) {
                changed += (previous_y[i] == 0.0f) != (y_from_gpu[i] == 0.0f);
              }
              INFO(what);
              CHECK(changed > n / 10);  // ~2 rate (1 - rate) n of them for independent masks
            }
          }
          previous_y = y_from_gpu;
        }
      }
    }
  }
}

TEST_CASE("cuda dropout in place over a long grid-stride range is bit-identical to the reference",
          "[gpu]") {
  // The Transformer's feed-forward activations (12800 rows of 2048) and 5 more: each thread takes
  // several pairs of packs, the tail goes element by element; in place, as the model drops out;
  // first_index even (packs start on even indices) and odd.
  auto gpu = make_gpu();
  ReferenceBackend reference;
  const size_t n = size_t{12800} * 2048 + 5;
  const int32_t step = 9;
  GpuArray<int32_t> step_gpu(*gpu, std::vector<int32_t>{step});
  for (DataType type : kAllTypes) {
    for (const uint64_t first_index : {uint64_t{4096}, uint64_t{12345}}) {
      const std::string what = "dropout in place first_index " + std::to_string(first_index) + type_suffix(type);
      const std::vector<float> x = rounded(type, random_vector(n, 510));
      GpuTensor x_gpu(*gpu, type, x);
      gpu->ops().dropout_forward(type, x_gpu.data(), x_gpu.data(), n, 0.1f, 77, first_index, step_gpu.data());
      HostTensor x_ref(type, x);
      reference.dropout_forward(type, x_ref.data(), x_ref.data(), n, 0.1f, 77, first_index, &step);
      check_same_values(x_gpu.values(), x_ref.values(), what);
    }
  }
}

TEST_CASE("cuda channel slices copy in and out like the reference in both formats", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  struct SliceCase {
    int n, h, w, whole_channels, slice_channels, offset;
  };
  const SliceCase cases[] = {{1, 1, 1, 4, 1, 0},  {2, 5, 7, 11, 3, 0}, {2, 5, 7, 11, 3, 8},
                             {3, 8, 8, 64, 17, 20}, {4, 35, 35, 288, 64, 224}};
  uint64_t stream = 600;
  for (DataType type : kAllTypes) {
    for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
      for (const SliceCase& c : cases) {
        const Tensor4 whole{c.n, c.whole_channels, c.h, c.w, format, type};
        const Tensor4 slice{c.n, c.slice_channels, c.h, c.w, format, type};
        const std::string what = describe(slice) + " at channel " + std::to_string(c.offset) +
                                 " of " + describe(whole);
        // Into: the channels outside the slice must keep their values.
        const std::vector<float> destination = rounded(type, random_vector(whole.count(), stream++));
        const std::vector<float> source = rounded(type, random_vector(slice.count(), stream++));
        GpuTensor destination_gpu(*gpu, type, destination), source_gpu(*gpu, type, source);
        HostTensor destination_ref(type, destination), source_ref(type, source);
        gpu->ops().copy_into_channels(slice, source_gpu.data(), whole, destination_gpu.data(),
                                      c.offset);
        reference.copy_into_channels(slice, source_ref.data(), whole, destination_ref.data(),
                                     c.offset);
        check_same_values(destination_gpu.values(), destination_ref.values(),
                          "copy_into_channels " + what);

        GpuTensor extracted_gpu(*gpu, type, slice.count());
        gpu->ops().copy_from_channels(whole, destination_gpu.data(), c.offset, slice,
                                      extracted_gpu.data());
        HostTensor extracted_ref(type, slice.count());
        reference.copy_from_channels(whole, destination_ref.data(), c.offset, slice,
                                     extracted_ref.data());
        check_same_values(extracted_gpu.values(), extracted_ref.values(),
                          "copy_from_channels " + what);
        check_same_values(extracted_ref.values(), source, "round trip " + what);
      }
    }
  }
  // A slice that does not fit, or of another type, is refused before anything is launched.
  const Tensor4 whole{1, 4, 2, 2, DataFormat::nchw}, slice{1, 3, 2, 2, DataFormat::nchw};
  GpuArray<float> a(*gpu, whole.count()), b(*gpu, slice.count());
  CHECK_THROWS_AS(gpu->ops().copy_into_channels(slice, b.data(), whole, a.data(), 2), RuntimeError);
  Tensor4 bf16_slice = slice;
  bf16_slice.type = DataType::bf16;
  CHECK_THROWS_AS(gpu->ops().copy_into_channels(bf16_slice, b.data(), whole, a.data(), 0),
                  RuntimeError);
}
