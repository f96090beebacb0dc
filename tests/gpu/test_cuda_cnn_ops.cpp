// [gpu] The CUDA backend's other image ops against the reference backend in both data formats:
// cuDNN batch norm and pooling; own kernels for channel bias, dropout and channel slices.
//
// Comparison: |gpu - ref| <= atol + rtol * |ref| per element. The reference accumulates in double,
// so the tolerances only cover the GPU's fp32 rounding; each says where it comes from.
// eps = 2^-23 (fp32 machine epsilon). Inputs are uniform in [-1, 1] unless said otherwise.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cuda/cuda_controls.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "tests/gpu/gpu_test_support.h"

using namespace dpbench;
using namespace dpbench::gpu_test;

namespace {

// How large the normalised values of a batch-norm input are, from the reference's statistics.
struct BatchNormScale {
  double conditioning = 1.0;  // max over channels of E[x^2] / var
  double inv_std_max = 0.0;
  double x_hat_max = 0.0;     // max |x - mean| * inv_std
};

BatchNormScale batch_norm_scale(const Tensor4& shape, const std::vector<float>& x,
                                const std::vector<float>& mean, const std::vector<float>& inv_std) {
  BatchNormScale scale;
  for (int ch = 0; ch < shape.c; ++ch) {
    const double normalised_mean = static_cast<double>(mean[ch]) * inv_std[ch];
    scale.conditioning = std::max(scale.conditioning, 1.0 + normalised_mean * normalised_mean);
    scale.inv_std_max = std::max(scale.inv_std_max, static_cast<double>(inv_std[ch]));
    for (int b = 0; b < shape.n; ++b) {
      for (int y = 0; y < shape.h; ++y) {
        for (int x_pos = 0; x_pos < shape.w; ++x_pos) {
          const double value = x[shape.offset(b, ch, y, x_pos)];
          scale.x_hat_max =
              std::max(scale.x_hat_max, std::fabs(value - mean[ch]) * inv_std[ch]);
        }
      }
    }
  }
  return scale;
}

}  // namespace

TEST_CASE("cuda batch norm matches the reference in both formats", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  // At least 4 elements per channel: with 2 or 3 the sample variance may be near zero, which
  // tests cuDNN's epsilon handling more than its arithmetic.
  const Tensor4 shapes[] = {{2, 3, 5, 7}, {1, 13, 9, 9}, {8, 16, 4, 4}, {4, 33, 1, 1},
                            {16, 64, 14, 14}, {1, 5, 2, 3}};
  uint64_t stream = 200;
  for (float epsilon : {1e-3f, 1.001e-5f}) {
    for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
      for (Tensor4 shape : shapes) {
        shape.format = format;
        const std::string what = describe(shape) + " epsilon " + std::to_string(epsilon);
        const int channels = shape.c;
        const size_t m = shape.count() / channels;  // elements per channel
        // An offset mean (x in [-0.5, 1.5]) checks that the mean is really subtracted.
        const std::vector<float> x = random_vector(shape.count(), stream++, -0.5f, 1.5f);
        const std::vector<float> gamma = random_vector(channels, stream++, 0.5f, 1.5f);
        const std::vector<float> beta = random_vector(channels, stream++, -0.5f, 0.5f);
        const std::vector<float> dy = random_vector(shape.count(), stream++);

        GpuArray<float> x_gpu(*gpu, x), gamma_gpu(*gpu, gamma), beta_gpu(*gpu, beta),
            dy_gpu(*gpu, dy), y_gpu(*gpu, shape.count()), mean_gpu(*gpu, channels),
            inv_std_gpu(*gpu, channels), dx_gpu(*gpu, shape.count()),
            dgamma_gpu(*gpu, random_vector(channels, 1)), dbeta_gpu(*gpu, random_vector(channels, 2));
        Backend& ops = gpu->ops();
        ops.batch_norm_forward_training(shape, x_gpu.data(), gamma_gpu.data(), beta_gpu.data(),
                                        epsilon, y_gpu.data(), mean_gpu.data(), inv_std_gpu.data());
        ops.batch_norm_backward(shape, x_gpu.data(), dy_gpu.data(), gamma_gpu.data(),
                                mean_gpu.data(), inv_std_gpu.data(), epsilon, dx_gpu.data(),
                                dgamma_gpu.data(), dbeta_gpu.data());

        std::vector<float> y(shape.count()), mean(channels), inv_std(channels),
            dx(shape.count()), dgamma(channels), dbeta(channels);
        reference.batch_norm_forward_training(shape, x.data(), gamma.data(), beta.data(), epsilon,
                                              y.data(), mean.data(), inv_std.data());
        reference.batch_norm_backward(shape, x.data(), dy.data(), gamma.data(), mean.data(),
                                      inv_std.data(), epsilon, dx.data(), dgamma.data(),
                                      dbeta.data());

        // Every BN output derives from per-channel fp32 reductions over m = n*h*w elements, whose
        // relative error is about sqrt(m) * eps (random walk). A variance taken as
        // E[x^2] - mean^2 loses a further factor E[x^2] / var (the conditioning, ~1.75 for this
        // data); margin 16 for the handful of roundings in the formulas: delta is that relative
        // error. The scale of the normalised values comes from the reference's statistics.
        const BatchNormScale scale = batch_norm_scale(shape, x, mean, inv_std);
        const double delta =
            16.0 * std::sqrt(static_cast<double>(m)) * kEps * scale.conditioning;
        const double x_hat = scale.x_hat_max, inv_std_max = scale.inv_std_max, gamma_max = 1.5;
        // The mean's error is delta relative to the mean of |x| <= 1.5.
        check_close(mean_gpu.download(), mean, delta * 1.5, 0.0, "saved mean " + what);
        check_close(inv_std_gpu.download(), inv_std, 0.0, delta, "saved inv_std " + what);
        // y = gamma * x_hat + beta: x_hat carries the inv_std error (relative) and the mean error.
        check_close(y_gpu.download(), y, gamma_max * delta * (x_hat + 1.5 * inv_std_max) + 4 * kEps,
                    4 * kEps, "batch norm y " + what);
        // dbeta sums m terms |dy| <= 1, dgamma m terms |dy * x_hat| <= x_hat (x_hat itself off by
        // delta relative): both errors are delta-relative to a sum bounded by m * x_hat.
        const double parameter_atol = delta * static_cast<double>(m) * x_hat;
        check_close(dbeta_gpu.download(), dbeta, parameter_atol, 4 * kEps, "dbeta " + what);
        check_close(dgamma_gpu.download(), dgamma, parameter_atol, 4 * kEps, "dgamma " + what);
        // dx = gamma * inv_std * (dy - dbeta / m - x_hat * dgamma / m): the bracket's terms are
        // at most 1, 1 and x_hat^2, each off by about delta relative, and inv_std by delta.
        const double dx_atol =
            2.0 * gamma_max * inv_std_max * delta * (1.0 + x_hat) * (1.0 + x_hat) + 8 * kEps;
        check_close(dx_gpu.download(), dx, dx_atol, 8 * kEps, "batch norm dx " + what);
      }
    }
  }
}

TEST_CASE("cuda pooling matches the reference in both formats", "[gpu]") {
  auto gpu = make_gpu();
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
      {PoolMode::average_include_padding, 3, 3, 1, 1, Padding::same},
      {PoolMode::average_exclude_padding, 3, 3, 1, 1, Padding::same},
      {PoolMode::average_exclude_padding, 5, 3, 3, 2, Padding::same},
      {PoolMode::average_include_padding, 7, 7, 1, 1, Padding::valid},  // global average
  };
  const Tensor4 shapes[] = {{1, 5, 7, 7}, {3, 17, 11, 13}, {2, 64, 8, 9}};
  uint64_t stream = 300;
  for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
    for (Tensor4 input : shapes) {
      input.format = format;
      for (const PoolCase& c : cases) {
        if (c.window_h > input.h || c.window_w > input.w) continue;
        const PoolGeometry g = make_pool_geometry(input, c.mode, c.window_h, c.window_w,
                                                  c.stride_h, c.stride_w, c.padding);
        std::ostringstream what;
        what << describe(input) << " mode " << static_cast<int>(c.mode) << " window "
             << c.window_h << "x" << c.window_w << " stride " << c.stride_h << "x" << c.stride_w
             << " pad " << g.pad_h << "x" << g.pad_w;
        const std::vector<float> x = random_vector(g.input.count(), stream++);
        const std::vector<float> dy = random_vector(g.output.count(), stream++);
        GpuArray<float> x_gpu(*gpu, x), dy_gpu(*gpu, dy), y_gpu(*gpu, g.output.count()),
            dx_gpu(*gpu, random_vector(g.input.count(), 4));
        gpu->ops().pool_forward(g, x_gpu.data(), y_gpu.data());
        gpu->ops().pool_backward(g, x_gpu.data(), y_gpu.data(), dy_gpu.data(), dx_gpu.data());
        std::vector<float> y(g.output.count()), dx(g.input.count());
        reference.pool_forward(g, x.data(), y.data());
        reference.pool_backward(g, x.data(), y.data(), dy.data(), dx.data());

        const double window = static_cast<double>(c.window_h) * c.window_w;
        // Windows overlapping one input element: it gathers that many gradients.
        const double overlap = std::ceil(static_cast<double>(c.window_h) / c.stride_h) *
                               std::ceil(static_cast<double>(c.window_w) / c.stride_w);
        if (c.mode == PoolMode::max) {
          // A maximum is exact. Its gradient sums up to `overlap` values |dy| <= 1 in some order.
          check_close(y_gpu.download(), y, 0.0, 0.0, "max pool forward " + what.str());
          check_close(dx_gpu.download(), dx, 2.0 * overlap * kEps, 0.0,
                      "max pool backward " + what.str());
        } else {
          // A window's sum of |x| <= 1 rounds up to `window` times, then one division (or a
          // multiplication by a rounded reciprocal); the gradient sums `overlap` such quotients.
          check_close(y_gpu.download(), y, 2.0 * (window + 2) * kEps, 0.0,
                      "average pool forward " + what.str());
          check_close(dx_gpu.download(), dx, 4.0 * (overlap + 2) * kEps, 0.0,
                      "average pool backward " + what.str());
        }
      }
    }
  }
}

TEST_CASE("cuda channel bias and its gradient match the reference in both formats", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  // Many partial sums per channel: (16, 64, 32, 32) and (32, 64, 14, 14); channels that fill no
  // whole tile: 33 and 70.
  const Tensor4 shapes[] = {{1, 1, 1, 1},    {2, 3, 5, 7},     {4, 33, 9, 9},   {1, 1000, 1, 1},
                            {32, 64, 14, 14}, {16, 64, 32, 32}, {3, 70, 17, 19}};
  uint64_t stream = 400;
  for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
    for (Tensor4 shape : shapes) {
      shape.format = format;
      std::vector<float> y = random_vector(shape.count(), stream++);
      const std::vector<float> bias = random_vector(shape.c, stream++);
      for (const bool relu : {false, true}) {
        const std::string what = describe(shape) + (relu ? " +relu" : "");
        std::vector<float> out = y;
        GpuArray<float> out_gpu(*gpu, out), bias_gpu(*gpu, bias);
        gpu->ops().add_channel_bias(shape, out_gpu.data(), bias_gpu.data(), relu);
        reference.add_channel_bias(shape, out.data(), bias.data(), relu);
        // One fp32 addition (and a comparison) per element: both round the same exact sum.
        check_close(out_gpu.download(), out, 0.0, 0.0, "add_channel_bias " + what);

        std::vector<float> dy = random_vector(shape.count(), stream++);
        GpuArray<float> dy_gpu(*gpu, dy);
        GpuArray<float> dbias_gpu(*gpu, random_vector(shape.c, 3));  // must be overwritten
        Buffer workspace = gpu->allocate(std::max<size_t>(gpu->ops().channel_bias_workspace_bytes(shape), 1));
        gpu->ops().channel_bias_gradient(shape, out_gpu.data(), dy_gpu.data(), dbias_gpu.data(), relu,
                                         workspace.data());
        std::vector<float> dbias(shape.c);
        reference.channel_bias_gradient(shape, out.data(), dy.data(), dbias.data(), relu, nullptr);
        // The mask is a comparison: dy must match exactly.
        check_close(dy_gpu.download(), dy, 0.0, 0.0, "channel_bias_gradient mask " + what);
        // m = n*h*w terms of size <= 1 per channel, summed in float within a part and in double
        // across parts: random-walk error sqrt(m) * eps * m at worst, margin 2.
        const double m = static_cast<double>(shape.count()) / shape.c;
        check_close(dbias_gpu.download(), dbias, 2.0 * std::sqrt(m) * kEps * m + kEps, 4 * kEps,
                    "channel_bias_gradient " + what);
      }
    }
  }
}

TEST_CASE("cuda dropout is bit-identical to the reference and draws a new mask each step",
          "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  for (size_t n : {size_t{1}, size_t{1000}, (size_t{1} << 20) + 3}) {
    for (float rate : {0.1f, 0.5f, 0.7f}) {
      const std::string what = "n=" + std::to_string(n) + " rate=" + std::to_string(rate);
      const std::vector<float> x = random_vector(n, 500);
      const std::vector<float> dy = random_vector(n, 501);
      GpuArray<float> x_gpu(*gpu, x), dy_gpu(*gpu, dy), y_gpu(*gpu, n), dx_gpu(*gpu, n);
      std::vector<float> previous_y;
      for (int32_t step : {5, 6}) {
        GpuArray<int32_t> step_gpu(*gpu, std::vector<int32_t>{step});
        gpu->ops().dropout_forward(x_gpu.data(), y_gpu.data(), n, rate, 1234, 777, step_gpu.data());
        gpu->ops().dropout_backward(dy_gpu.data(), dx_gpu.data(), n, rate, 1234, 777, step_gpu.data());
        std::vector<float> y(n), dx(n);
        reference.dropout_forward(x.data(), y.data(), n, rate, 1234, 777, &step);
        reference.dropout_backward(dy.data(), dx.data(), n, rate, 1234, 777, &step);
        const std::vector<float> y_from_gpu = y_gpu.download();
        check_identical(y_from_gpu, y, "dropout forward " + what);
        check_identical(dx_gpu.download(), dx, "dropout backward " + what);

        if (n >= 1000) {
          // The kept fraction is 1 - rate within 5 standard deviations of a binomial draw.
          size_t kept = 0;
          for (float v : y_from_gpu) kept += v != 0.0f;
          const double sigma = std::sqrt(n * rate * (1.0 - rate));
          CHECK(std::fabs(static_cast<double>(kept) - n * (1.0 - rate)) <= 5.0 * sigma + 1.0);
          if (!previous_y.empty()) {
            size_t changed = 0;
            for (size_t i = 0; i < n; ++i) changed += (previous_y[i] == 0.0f) != (y_from_gpu[i] == 0.0f);
            INFO(what);
            CHECK(changed > n / 10);  // ~2 rate (1 - rate) n of them for independent masks
          }
        }
        previous_y = y_from_gpu;
      }
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
  for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
    for (const SliceCase& c : cases) {
      const Tensor4 whole{c.n, c.whole_channels, c.h, c.w, format};
      const Tensor4 slice{c.n, c.slice_channels, c.h, c.w, format};
      const std::string what = describe(slice) + " at channel " + std::to_string(c.offset) +
                               " of " + describe(whole);
      // Into: the channels outside the slice must keep their values.
      std::vector<float> destination = random_vector(whole.count(), stream++);
      const std::vector<float> source = random_vector(slice.count(), stream++);
      GpuArray<float> destination_gpu(*gpu, destination), source_gpu(*gpu, source);
      gpu->ops().copy_into_channels(slice, source_gpu.data(), whole, destination_gpu.data(),
                                    c.offset);
      reference.copy_into_channels(slice, source.data(), whole, destination.data(), c.offset);
      check_identical(destination_gpu.download(), destination, "copy_into_channels " + what);

      GpuArray<float> extracted_gpu(*gpu, slice.count());
      gpu->ops().copy_from_channels(whole, destination_gpu.data(), c.offset, slice,
                                    extracted_gpu.data());
      std::vector<float> extracted(slice.count());
      reference.copy_from_channels(whole, destination.data(), c.offset, slice, extracted.data());
      check_identical(extracted_gpu.download(), extracted, "copy_from_channels " + what);
      check_identical(extracted, source, "round trip " + what);
    }
  }
  // A slice that does not fit is refused before anything is launched.
  const Tensor4 whole{1, 4, 2, 2, DataFormat::nchw}, slice{1, 3, 2, 2, DataFormat::nchw};
  GpuArray<float> a(*gpu, whole.count()), b(*gpu, slice.count());
  CHECK_THROWS_AS(gpu->ops().copy_into_channels(slice, b.data(), whole, a.data(), 2), RuntimeError);
}
