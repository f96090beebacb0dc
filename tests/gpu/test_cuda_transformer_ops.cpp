// [gpu] The CUDA backend's Transformer ops against the reference backend: the row bias with its
// epilogue (ReLU, dropout, residual; or GELU) and the feed-forward activations' backward passes,
// layer norm (forward, backward, dx over dy), the positional encoding (in place too) and
// multi-head attention (forward and backward; causal or not, key lengths down to 1 and 0, packed
// Q/K/V slices with their strides, cross attention, head sizes 17 to 128, dropout with the
// reference's masks). Also: attention and layer norm give the same bits on every run, and
// attention replays from a captured CUDA graph drawing each step's own dropout masks.
//
// Comparison: |gpu - ref| <= atol + rtol * |ref| per element, TF32 off. The reference accumulates
// in double; the tolerances bound the GPU's fp32 rounding and each says where it comes from.
// eps = 2^-23. 16-bit storage: inputs are values the type holds exactly on both sides, the
// arithmetic is fp32 on both, and each result is rounded once to the type, so a result may differ
// by the fp32 bound plus one unit in the last place of the type (storage_rtol, storage_atol).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/attention_geometry.h"
#include "engine/cuda/cuda_controls.h"
#include "engine/reference/reference_backend.h"
#include "tests/gpu/attention_test_support.h"
#include "tests/gpu/gpu_test_support.h"

using namespace dpbench;
using namespace dpbench::gpu_test;

// ---- row bias ------------------------------------------------------------------------------------

TEST_CASE("cuda add_row_bias and its epilogue match the reference bit for bit", "[gpu][transformer]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  struct Shape {
    int rows, cols;
    size_t offset;
  };
  // 512 and 2048: the Transformer's d_model and feed-forward width; 7 and 13 leave rows unaligned
  // for packs; offset 1 misaligns the whole tensor.
  const Shape shapes[] = {{1, 1, 0}, {5, 7, 0}, {64, 512, 0}, {33, 2048, 0}, {9, 13, 1}, {16, 512, 1}};
  const int32_t step = 4;
  GpuArray<int32_t> step_gpu(*gpu, std::vector<int32_t>{step});
  uint64_t stream = 1100;
  for (DataType type : kAllTypes) {
    for (const Shape& s : shapes) {
      // ReLU alone (the feed-forward block in inference), ReLU + dropout (in training), the
      // output projection's dropout + residual, and the residual alone.
      for (int variant = 0; variant < 5; ++variant) {
        const bool relu = variant == 1 || variant == 2;
        const bool dropping = variant == 2 || variant == 3;
        const bool residual = variant >= 3;
        const size_t count = static_cast<size_t>(s.rows) * s.cols;
        const std::vector<float> y = random_of(type, count, stream++);
        const std::vector<float> skip = random_of(type, count, stream++);
        const std::vector<float> bias = random_vector(s.cols, stream++);
        GpuTensor y_gpu(*gpu, type, y, s.offset), skip_gpu(*gpu, type, skip, s.offset),
            out_gpu(*gpu, type, count, s.offset);
        GpuArray<float> bias_gpu(*gpu, bias);
        HostTensor y_ref(type, y), skip_ref(type, skip), out_ref(type, count);
        RowBiasEpilogue on_gpu, on_ref;
        on_gpu.relu = on_ref.relu = relu;
        if (dropping) {
          on_gpu.dropout.rate = on_ref.dropout.rate = 0.1f;
          on_gpu.dropout.seed = on_ref.dropout.seed = 4321;
          on_gpu.dropout.first_index = on_ref.dropout.first_index = 3 + count * (s.offset + 1);
          on_gpu.dropout.step = step_gpu.data();
          on_ref.dropout.step = &step;
        }
        if (residual) {
          on_gpu.residual = skip_gpu.data();
          on_gpu.out = out_gpu.data();
          on_ref.residual = skip_ref.data();
          on_ref.out = out_ref.data();
        }
        gpu->ops().add_row_bias(type, y_gpu.data(), bias_gpu.data(), s.rows, s.cols, on_gpu);
        reference.add_row_bias(type, y_ref.data(), bias.data(), s.rows, s.cols, on_ref);
        // fp32 additions, a comparison and a multiply per element, rounded to the type where the
        // separate ops store: the same operations in the same order on both sides.
        const std::string what = "add_row_bias " + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "+" +
                                 std::to_string(s.offset) + (relu ? " relu" : "") + (dropping ? " dropout" : "") +
                                 (residual ? " residual" : "") + type_suffix(type);
        if (residual) {
          check_same_values(out_gpu.values(), out_ref.values(), what);
        } else {
          check_same_values(y_gpu.values(), y_ref.values(), what);
        }
      }
    }
  }
}

TEST_CASE("cuda relu_dropout_backward matches the reference bit for bit", "[gpu][transformer]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  const int32_t step = 2;
  GpuArray<int32_t> step_gpu(*gpu, std::vector<int32_t>{step});
  uint64_t stream = 1200;
  for (DataType type : kAllTypes) {
    for (size_t n : {size_t{1}, size_t{37}, size_t{33 * 2048}}) {
      for (float rate : {0.0f, 0.1f}) {
        // y as the forward leaves it: ReLU, then dropout.
        std::vector<float> y = random_of(type, n, stream++);
        HostTensor y_ref(type, y);
        reference.relu_forward(type, y_ref.data(), y_ref.data(), n);
        reference.dropout_forward(type, y_ref.data(), y_ref.data(), n, rate, 99, 0, &step);
        y = y_ref.values();
        const std::vector<float> dy = random_of(type, n, stream++, -4.0f, 4.0f);
        GpuTensor y_gpu(*gpu, type, y), dx_gpu(*gpu, type, dy);
        HostTensor dx_ref(type, dy);
        gpu->ops().relu_dropout_backward(type, y_gpu.data(), dx_gpu.data(), dx_gpu.data(), n, rate);
        reference.relu_dropout_backward(type, y_ref.data(), dx_ref.data(), dx_ref.data(), n, rate);
        check_same_values(dx_gpu.values(), dx_ref.values(),
                          "relu_dropout_backward n " + std::to_string(n) + " rate " + std::to_string(rate) +
                              type_suffix(type));
      }
    }
  }
}

// ---- GELU ----------------------------------------------------------------------------------------
// Both backends evaluate engine/backend/gelu.h in fp32, but with their own tanhf (CUDA's within
// 2 ulps) and the GPU contracting products into fused multiply-adds: a few ulps apart, not bit for
// bit. Relative to GELU's value that is a few eps; in the negative tail, where 1 + tanh(u) cancels,
// tanh's ulps near -1 (2^-24 each) become an absolute error of about |x| 2^-24 per ulp: |x| <= 6
// here, 4 ulps: 1.5e-6. A 16-bit result may then round one unit apart (storage_rtol/atol).

namespace {

RowBiasEpilogue gelu_into(void* activated) {
  RowBiasEpilogue then;
  then.gelu = true;
  then.activated = activated;
  return then;
}

}  // namespace

TEST_CASE("cuda add_row_bias with gelu matches the reference", "[gpu][transformer]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  struct Shape {
    int rows, cols;
    size_t offset;
  };
  // 3072: GPT-2 124M's MLP width; 100 and 13 are not multiples of a 16-byte pack (4 fp32 or 8
  // 16-bit elements), and offset 1 misaligns whole tensors: the kernel's one-element path.
  const Shape shapes[] = {{37, 3072, 0}, {37, 100, 0}, {37, 3072, 1}, {9, 13, 0}, {1, 1, 0}};
  uint64_t stream = 1300;
  for (DataType type : kAllTypes) {
    for (const Shape& s : shapes) {
      const size_t count = static_cast<size_t>(s.rows) * s.cols;
      const std::vector<float> y = random_of(type, count, stream++, -5.0f, 5.0f);
      const std::vector<float> bias = random_vector(s.cols, stream++);
      GpuTensor y_gpu(*gpu, type, y, s.offset), activated_gpu(*gpu, type, count, s.offset);
      GpuArray<float> bias_gpu(*gpu, bias);
      HostTensor y_ref(type, y), activated_ref(type, count);
      gpu->ops().add_row_bias(type, y_gpu.data(), bias_gpu.data(), s.rows, s.cols, gelu_into(activated_gpu.data()));
      reference.add_row_bias(type, y_ref.data(), bias.data(), s.rows, s.cols, gelu_into(activated_ref.data()));
      const std::string what = "add_row_bias gelu " + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "+" +
                               std::to_string(s.offset) + type_suffix(type);
      // The pre-activation is one fp32 addition rounded to the type on both sides.
      check_same_values(y_gpu.values(), y_ref.values(), what + " y");
      check_close(activated_gpu.values(), activated_ref.values(), 1.5e-6 + storage_atol(type),
                  4 * kEps + storage_rtol(type), what + " activated");
    }
  }
}

TEST_CASE("cuda gelu_backward matches the reference", "[gpu][transformer]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  uint64_t stream = 1400;
  for (DataType type : kAllTypes) {
    // 37 x 3072 and 37 x 100 as the MLP's hidden tensors; + 3 leaves a tail after the packs.
    for (size_t n : {size_t{1}, size_t{37}, size_t{37 * 100}, size_t{37 * 3072}, size_t{37 * 3072 + 3}}) {
      for (size_t offset : {size_t{0}, size_t{1}}) {
        const std::vector<float> x = random_of(type, n, stream++, -6.0f, 6.0f);
        const std::vector<float> dy = random_of(type, n, stream++, -2.0f, 2.0f);
        GpuTensor x_gpu(*gpu, type, x, offset), dx_gpu(*gpu, type, dy, offset);
        HostTensor x_ref(type, x), dy_ref(type, dy), dx_ref(type, n);
        gpu->ops().gelu_backward(type, x_gpu.data(), dx_gpu.data(), dx_gpu.data(), n);  // dx over dy
        reference.gelu_backward(type, x_ref.data(), dy_ref.data(), dx_ref.data(), n);
        // dy times gelu'(x): tanh's ulps near +-1 (2^-24 each, 4 of them) times d gelu'/dt, at
        // most about 10 where t is not yet +-1 in fp32, times |dy| <= 2: 8e-6; a few eps of
        // gelu' otherwise.
        check_close(dx_gpu.values(), dx_ref.values(), 8e-6 + storage_atol(type), 4 * kEps + storage_rtol(type),
                    "gelu_backward n " + std::to_string(n) + "+" + std::to_string(offset) + type_suffix(type));
      }
    }
  }
}

// ---- layer norm ----------------------------------------------------------------------------------

namespace {

struct LayerNormShape {
  int rows, cols;
  size_t offset;  // elements: 1 misaligns x, y, dy and dx for 16-byte packs
};

// Where the backward writes dx: a buffer of its own, over dy, or added to a residual's gradient
// already in dx (a pre-norm block's).
enum class DxTarget { own_buffer, over_dy, accumulated };

void compare_layer_norm(Device& gpu, ReferenceBackend& reference, DataType type, const LayerNormShape& s,
                        DxTarget target, uint64_t stream) {
  const bool dx_over_dy = target == DxTarget::over_dy, accumulate = target == DxTarget::accumulated;
  Backend& ops = gpu.ops();
  const size_t count = static_cast<size_t>(s.rows) * s.cols;
  const float epsilon = 1e-5f;
  // x off centre (mean ~0.5): the two-pass statistics must not lose the spread to the mean.
  const std::vector<float> x = random_of(type, count, stream, -2.0f, 3.0f);
  const std::vector<float> dy = random_of(type, count, stream + 1);
  const std::vector<float> gamma = random_vector(s.cols, stream + 2, 0.5f, 1.5f);
  const std::vector<float> beta = random_vector(s.cols, stream + 3, -0.5f, 0.5f);
  const std::string what = std::to_string(s.rows) + "x" + std::to_string(s.cols) + "+" +
                           std::to_string(s.offset) + (dx_over_dy ? " dx over dy" : "") +
                           (accumulate ? " accumulated" : "") + type_suffix(type);
  // What dx holds before: with `accumulate`, a residual's gradient of dy's size.
  const std::vector<float> dx_before =
      accumulate ? random_of(type, count, stream + 4) : std::vector<float>(count, 0.0f);

  GpuTensor x_gpu(gpu, type, x, s.offset), y_gpu(gpu, type, count, s.offset), dy_gpu(gpu, type, dy, s.offset),
      dx_gpu(gpu, type, dx_before, s.offset);
  GpuArray<float> gamma_gpu(gpu, gamma), beta_gpu(gpu, beta), mean_gpu(gpu, s.rows), inv_std_gpu(gpu, s.rows),
      dgamma_gpu(gpu, random_vector(s.cols, 3)), dbeta_gpu(gpu, random_vector(s.cols, 4));  // overwritten
  Buffer workspace = allocate_at_least_one(gpu, ops.layer_norm_workspace_bytes(s.rows, s.cols));
  ops.layer_norm_forward(type, x_gpu.data(), gamma_gpu.data(), beta_gpu.data(), s.rows, s.cols, epsilon,
                         y_gpu.data(), mean_gpu.data(), inv_std_gpu.data());
  void* dx_target = dx_over_dy ? dy_gpu.data() : dx_gpu.data();
  ops.layer_norm_backward(type, x_gpu.data(), dy_gpu.data(), gamma_gpu.data(), mean_gpu.data(),
                          inv_std_gpu.data(), s.rows, s.cols, dx_target, dgamma_gpu.data(), dbeta_gpu.data(),
                          workspace.data(), accumulate);

  HostTensor x_ref(type, x), y_ref(type, count), dy_ref(type, dy), dx_ref(type, dx_before);
  std::vector<float> mean(s.rows), inv_std(s.rows), dgamma(s.cols), dbeta(s.cols);
  std::vector<unsigned char> ref_workspace(
      std::max<size_t>(reference.layer_norm_workspace_bytes(s.rows, s.cols), 1));
  reference.layer_norm_forward(type, x_ref.data(), gamma.data(), beta.data(), s.rows, s.cols, epsilon,
                               y_ref.data(), mean.data(), inv_std.data());
  reference.layer_norm_backward(type, x_ref.data(), dy_ref.data(), gamma.data(), mean.data(), inv_std.data(),
                                s.rows, s.cols, dx_ref.data(), dgamma.data(), dbeta.data(),
                                ref_workspace.data(), accumulate);

  // The GPU sums a row in fp32, cols / 32 terms a lane in order and then a 5-step butterfly: the
  // mean is within (cols / 32 + 8) eps of max |x|, the variance (a second pass over the
  // deviations) within as much of itself, inv_std within half that. Margin 4: e below.
  const double e = 4.0 * (s.cols / 32.0 + 8.0) * kEps;
  const double x_max = max_magnitude(x), dy_max = max_magnitude(dy);
  const double inv_std_max = max_magnitude(inv_std);
  const double gamma_max = 1.5, beta_max = 0.5;
  const double xhat_max = 2.0 * x_max * inv_std_max;  // |x - mean| <= 2 max |x|
  check_close(mean_gpu.download(), mean, e * x_max, 0.0, "layer_norm mean " + what);
  check_close(inv_std_gpu.download(), inv_std, 0.0, e, "layer_norm inv_std " + what);
  // y = gamma (x - mean) inv_std + beta: the mean's error times inv_std, xhat's relative error e,
  // and the last rounding of y (2 eps of it).
  const double y_atol =
      gamma_max * (e * x_max * inv_std_max + e * xhat_max) + 2.0 * kEps * (gamma_max * xhat_max + beta_max);
  check_close(y_gpu.values(), y_ref.values(), y_atol + storage_atol(type), storage_rtol(type),
              "layer_norm y " + what);
  // dx = inv_std (g - mean(g) - xhat mean(g xhat)), g = dy gamma: three terms of at most
  // |g| (1 + xhat_max), each within e of itself, times inv_std.
  const double dx_atol = 4.0 * e * inv_std_max * gamma_max * dy_max * (1.0 + xhat_max);
  const std::vector<float> dx_seen = dx_over_dy ? dy_gpu.values() : dx_gpu.values();
  check_close(dx_seen, dx_ref.values(), dx_atol + storage_atol(type), storage_rtol(type),
              "layer_norm dx " + what);
  // dgamma, dbeta: rows terms each at most dy_max (times xhat_max), summed in fp32 along chains
  // of at most rows_per_part / 8 steps a lane and 8 across lanes or warps within a part, then
  // parts / 16 steps and 16 across lanes between the parts (rows_per_part = max(32, rows / 256),
  // Note [column sums in parts]): under rows / 128 + 40 steps for any rows, so within
  // (rows / 128 + 40) eps of their sum. fp32 in every type.
  const double sum_e = 2.0 * (s.rows / 128.0 + 40.0) * kEps * s.rows * dy_max;
  check_close(dgamma_gpu.download(), dgamma, sum_e * (xhat_max + e * xhat_max), 4 * kEps,
              "layer_norm dgamma " + what);
  check_close(dbeta_gpu.download(), dbeta, sum_e, 4 * kEps, "layer_norm dbeta " + what);
}

const LayerNormShape kLayerNormShapes[] = {
    {1, 1, 0},        // a single column: variance 0, dx 0
    {3, 7, 0},        // no 16-byte pack fits a row
    {400, 512, 0},    // the Transformer's rows: held in registers, several parts of dgamma and dbeta
    {12800, 512, 0},  // a whole batch of them (128 sentences of 100 tokens): 256 parts
    {300, 256, 0},    // one 16-bit pack a lane, two in fp32
    {50, 136, 0},     // lanes holding different numbers of packs, some none
    {1000, 1024, 0},  // held in registers forward and backward (GPT-2 350m's width)
    {1100, 768, 0},   // GPT-2 124m's width held backward, 35 parts, the last part-filled
    {70, 1280, 0},    // GPT-2 774m's: five 16-bit packs a lane, ten fp32
    {45, 1600, 0},    // GPT-2 1558m's: seven 16-bit packs a lane (some lanes six), thirteen fp32
    {64, 1000, 0},    // held backward, lanes holding different numbers of packs
    {33, 770, 0},     // no 16-byte pack splits a 16-bit row: streamed
    {37, 2048, 0},    // rows of the feed-forward width: streamed
    {5, 4000, 0},     // a long row, many columns a lane
    {129, 13, 1},     // one row past a part; misaligned
    {16, 512, 1},     // misaligned: element by element
};

}  // namespace

TEST_CASE("cuda layer norm forward and backward match the reference", "[gpu][transformer]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  uint64_t stream = 1200;
  for (DataType type : kAllTypes) {
    for (const LayerNormShape& s : kLayerNormShapes) {
      for (DxTarget target : {DxTarget::own_buffer, DxTarget::over_dy, DxTarget::accumulated}) {
        compare_layer_norm(*gpu, reference, type, s, target, stream);
        stream += 5;
      }
    }
  }
}

TEST_CASE("cuda layer norm gives the same bits on every run and with dx over dy", "[gpu][transformer]") {
  auto gpu = make_exact_gpu();
  Backend& ops = gpu->ops();
  // 512: the Transformer's rows; 768 and 1600: GPT-2 124m's and 1558m's, held backward too.
  for (const int cols : {512, 768, 1600}) {
    for (DataType type : kAllTypes) {
      // 1000 rows: 32 parts of dgamma and dbeta; 12800: 256.
      for (const int rows : cols > 768 ? std::vector<int>{1000} : std::vector<int>{1000, 12800}) {
        const std::string what =
            " " + std::to_string(rows) + "x" + std::to_string(cols) + type_suffix(type);
        const size_t count = static_cast<size_t>(rows) * cols;
        const std::vector<float> dy = random_of(type, count, 1301);
        GpuTensor x_gpu(*gpu, type, random_of(type, count, 1300)), y_gpu(*gpu, type, count),
            dy_gpu(*gpu, type, dy), dx_gpu(*gpu, type, count);
        GpuArray<float> gamma_gpu(*gpu, random_vector(cols, 1302, 0.5f, 1.5f)),
            beta_gpu(*gpu, random_vector(cols, 1303)), mean_gpu(*gpu, rows), inv_std_gpu(*gpu, rows),
            dgamma_gpu(*gpu, cols), dbeta_gpu(*gpu, cols);
        Buffer workspace = allocate_at_least_one(*gpu, ops.layer_norm_workspace_bytes(rows, cols));
        auto run = [&](void* dx, bool accumulate) {
          ops.layer_norm_forward(type, x_gpu.data(), gamma_gpu.data(), beta_gpu.data(), rows, cols, 1e-5f,
                                 y_gpu.data(), mean_gpu.data(), inv_std_gpu.data());
          ops.layer_norm_backward(type, x_gpu.data(), dy_gpu.data(), gamma_gpu.data(), mean_gpu.data(),
                                  inv_std_gpu.data(), rows, cols, dx, dgamma_gpu.data(), dbeta_gpu.data(),
                                  workspace.data(), accumulate);
        };
        run(dx_gpu.data(), false);
        const std::vector<float> y = y_gpu.values(), dx = dx_gpu.values(), dgamma = dgamma_gpu.download(),
                                 dbeta = dbeta_gpu.download();
        run(dx_gpu.data(), false);
        check_same_values(y_gpu.values(), y, "layer_norm y, second run" + what);
        check_same_values(dx_gpu.values(), dx, "layer_norm dx, second run" + what);
        check_identical(dgamma_gpu.download(), dgamma, "layer_norm dgamma, second run" + what);
        check_identical(dbeta_gpu.download(), dbeta, "layer_norm dbeta, second run" + what);
        // Added to zeros (0 + g is g in fp32, rounded once as before): the same dx, and the same
        // sums, from the accumulating kernel.
        GpuTensor zeros_gpu(*gpu, type, count);
        run(zeros_gpu.data(), true);
        check_same_values(zeros_gpu.values(), dx, "layer_norm dx accumulated onto zeros" + what);
        check_identical(dgamma_gpu.download(), dgamma, "layer_norm dgamma accumulating" + what);
        check_identical(dbeta_gpu.download(), dbeta, "layer_norm dbeta accumulating" + what);
        run(dy_gpu.data(), false);
        check_same_values(dy_gpu.values(), dx, "layer_norm dx written over dy" + what);
        check_identical(dgamma_gpu.download(), dgamma, "layer_norm dgamma with dx over dy" + what);
        check_identical(dbeta_gpu.download(), dbeta, "layer_norm dbeta with dx over dy" + what);
      }
    }
  }
}

// ---- positional encoding -------------------------------------------------------------------------

TEST_CASE("cuda add_positional_encoding matches the reference and works in place", "[gpu][transformer]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  struct Shape {
    int seq_len, batch, dim;
    size_t offset;
  };
  // (100, 16, 512): the Transformer's shape at a smaller batch; 33 and 7: odd dims (the last
  // column a sine); 300 positions: angles up to 300; offset 1: misaligned.
  const Shape shapes[] = {{1, 1, 1, 0},    {100, 16, 512, 0}, {7, 3, 33, 0},
                          {300, 2, 64, 0}, {12, 5, 7, 1},     {20, 4, 512, 1}};
  uint64_t stream = 1400;
  for (DataType type : kAllTypes) {
    for (const Shape& s : shapes) {
      for (bool in_place : {false, true}) {
        const size_t count = static_cast<size_t>(s.seq_len) * s.batch * s.dim;
        const float scale = std::sqrt(static_cast<float>(s.dim));  // the embedding's scaling
        const std::vector<float> x = random_of(type, count, stream++);
        GpuTensor x_gpu(*gpu, type, x, s.offset), y_gpu(*gpu, type, count, s.offset);
        HostTensor x_ref(type, x), y_ref(type, count);
        void* target = in_place ? x_gpu.data() : y_gpu.data();
        gpu->ops().add_positional_encoding(type, x_gpu.data(), target, s.seq_len, s.batch, s.dim, scale);
        reference.add_positional_encoding(type, x_ref.data(), in_place ? x_ref.data() : y_ref.data(), s.seq_len,
                                          s.batch, s.dim, scale);
        // The GPU's table is computed in double and rounded once; a reference working in fp32
        // rounds the angle t * 10000^(-2i/dim) to within 2 eps of itself, which moves a sinusoid
        // by up to 2 eps * t: the bound for positions up to seq_len, with 2 ulp of sinf. Then the
        // sum x * scale + PE, rounded (2 eps of each term).
        const double pe_atol = 2.0 * kEps * (s.seq_len + 2);
        const double atol = pe_atol + 2.0 * kEps * (scale + 1.0);
        const std::string what = "positional encoding " + std::to_string(s.seq_len) + "x" +
                                 std::to_string(s.batch) + "x" + std::to_string(s.dim) + "+" +
                                 std::to_string(s.offset) + (in_place ? " in place" : "") + type_suffix(type);
        check_close(in_place ? x_gpu.values() : y_gpu.values(), in_place ? x_ref.values() : y_ref.values(),
                    atol + storage_atol(type), storage_rtol(type), what);
      }
    }
  }
}

// ---- attention -----------------------------------------------------------------------------------

namespace {

const AttentionCase kFp32Cases[] = {
    // Transformer-base's heads (8 x 64) at its sentence length, a smaller batch.
    {"self 100x100 h8 d64", 4, 8, 100, 100, 64},
    {"causal 100x100 h8 d64 lengths 100 37 1 64", 4, 8, 100, 100, 64, true, 0.0f, {100, 37, 1, 64}},
    {"cross 7x13 d64 lengths 13 1 6 dropout", 3, 2, 7, 13, 64, false, 0.1f, {13, 1, 6}},
    {"cross 13x7 d64", 2, 2, 13, 7, 64},
    {"packed causal 50x50 h4 d32 dropout", 2, 4, 50, 50, 32, true, 0.2f, {}, true},
    {"packed cross 30x70 h2 d128 dropout lengths", 2, 2, 30, 70, 128, false, 0.1f, {70, 41}, true},
    {"self 100x100 h2 d128 dropout lengths 100 55", 2, 2, 100, 100, 128, false, 0.1f, {100, 55}},
    {"misaligned cross 20x30 h3 d40", 2, 3, 20, 30, 40, false, 0.0f, {}, false, 1},
    {"packed misaligned self 33x33 h2 d17 causal", 2, 2, 33, 33, 17, true, 0.1f, {}, true, 1},
    {"lengths 0 and 9 self 9x9 d64", 2, 2, 9, 9, 64, false, 0.0f, {0, 9}},
    // Keys past two tiles: dQ from its own kernel, not beside dK and dV (under TF32).
    {"cross 40x200 h2 d64 dropout lengths 200 130", 2, 2, 40, 200, 64, false, 0.1f, {200, 130}},
    {"packed causal 1030x1030 h1 d64", 1, 1, 1030, 1030, 64, true, 0.0f, {}, true},
    // Under TF32, the mma.sync kernels past two key tiles (Note [register attention]): sequences
    // off the tile, masks, key lengths, dropout, heads narrower than their padding.
    {"self 300x300 h2 d64 dropout lengths 300 77", 2, 2, 300, 300, 64, false, 0.1f, {300, 77}},
    {"packed causal 200x200 h3 d48 dropout lengths 200 130", 2, 3, 200, 200, 48, true, 0.1f, {200, 130}, true},
    {"causal 300x300 h2 d32 dropout", 1, 2, 300, 300, 32, true, 0.1f},
    {"causal 77x77 h2 d64", 2, 2, 77, 77, 64, true},
};

const AttentionCase k16BitCases[] = {
    {"self 100x100 h8 d64", 2, 8, 100, 100, 64},
    {"packed causal 50x50 h4 d32 dropout lengths 50 1", 2, 4, 50, 50, 32, true, 0.2f, {50, 1}, true},
    {"cross 7x13 h2 d128 dropout", 2, 2, 7, 13, 128, false, 0.1f},
    {"misaligned self 20x20 d64", 1, 2, 20, 20, 64, false, 0.0f, {}, false, 1},
    // dQ beside dK and dV across two key tiles, causal, a sentence whose second tile holds one key.
    {"causal 128x128 h2 d64 dropout lengths 128 65", 2, 2, 128, 128, 64, true, 0.1f, {128, 65}},
    // Keys past two tiles: dQ from its own kernel.
    {"cross 40x200 h2 d64 dropout lengths 200 130", 2, 2, 40, 200, 64, false, 0.1f, {200, 130}},
    {"causal 150x150 h2 d64 lengths 150 70", 2, 2, 150, 150, 64, true, 0.0f, {150, 70}},
    // gpt's shape: packed QKV, causal, longer than its 1024 tokens and not a multiple of a tile.
    {"packed causal 1030x1030 h2 d64", 1, 2, 1030, 1030, 64, true, 0.0f, {}, true},
    {"self 300x300 h2 d64 dropout lengths 300 77", 2, 2, 300, 300, 64, false, 0.1f, {300, 77}},
    {"packed causal 200x200 h3 d48 dropout lengths 200 130", 2, 3, 200, 200, 48, true, 0.1f, {200, 130}, true},
    {"causal 300x300 h2 d32 dropout", 1, 2, 300, 300, 32, true, 0.1f},
    {"cross 77x1030 h2 d64 lengths 1030 300", 2, 2, 77, 1030, 64, false, 0.0f, {1030, 300}},
    {"causal 77x77 h2 d64", 2, 2, 77, 77, 64, true},
};

}  // namespace

TEST_CASE("cuda attention forward and backward match the reference in fp32", "[gpu][transformer]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  uint64_t stream = 1500;
  for (const AttentionCase& c : kFp32Cases) {
    compare_attention(*gpu, reference, c, DataType::f32, stream);
    stream += 16;
  }
}

TEST_CASE("cuda attention forward and backward match the reference in fp16 and bf16", "[gpu][transformer]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  uint64_t stream = 1700;
  for (DataType type : {DataType::f16, DataType::bf16}) {
    for (const AttentionCase& c : k16BitCases) {
      compare_attention(*gpu, reference, c, type, stream);
      stream += 16;
    }
  }
}

TEST_CASE("cuda attention under TF32 runs on tensor cores within TF32's rounding", "[gpu][transformer]") {
  // Pure fp32 attention lands near 1e-7 of the result's scale; TF32 rounds each product's inputs
  // by up to 2^-11, which moves o by ~1e-4 (random signs over head_dim and the keys). So an error
  // above 2e-6 shows the tensor cores ran, and every element stays within the TF32 budget. The
  // misaligned cases (odd heads or strides) stay on the fp32 kernels and are exact fp32 still.
  auto gpu = make_gpu();
  set_tf32(*gpu, true);
  ReferenceBackend reference;
  uint64_t stream = 2100;
  for (const AttentionCase& c : kFp32Cases) {
    const double error = compare_attention(*gpu, reference, c, DataType::f32, stream, true);
    stream += 16;
    INFO(c.name << ": relative L2 error of o " << error);
    if (c.offset == 0 && c.head_dim % 4 == 0) {
      CHECK(error > 2e-6);
    } else {
      CHECK(error < 2e-6);
    }
  }
}

TEST_CASE("cuda attention drops the same probabilities as the reference and new ones each step",
          "[gpu][transformer]") {
  // Values v_j = e_j (one-hot in the head's columns) make o_i's column j the kept probability
  // p'_ij itself: a zero exactly where the mask drops (no probability underflows at these
  // scores), so the masks compare directly.
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  AttentionCase c{"one-hot values 9x13 d32", 2, 2, 9, 13, 32, false, 0.5f};
  const AttentionGeometry g = geometry_of(c, DataType::f32);
  const int m = g.model_dim();
  const size_t q_rows = static_cast<size_t>(c.query_len) * c.batch,
               kv_rows = static_cast<size_t>(c.key_len) * c.batch;
  const std::vector<float> q = random_vector(q_rows * m, 1800), k = random_vector(kv_rows * m, 1801);
  std::vector<float> v(kv_rows * m, 0.0f);
  for (int j = 0; j < c.key_len; ++j) {
    for (int b = 0; b < c.batch; ++b) {
      for (int h = 0; h < c.heads; ++h)
        v[(static_cast<size_t>(j) * c.batch + b) * m + h * c.head_dim + j] = 1.0f;
    }
  }
  GpuArray<float> q_gpu(*gpu, q), k_gpu(*gpu, k), v_gpu(*gpu, v), o_gpu(*gpu, q_rows * m),
      lse_gpu(*gpu, g.lse_count());
  Buffer workspace = allocate_at_least_one(*gpu, gpu->ops().attention_workspace_bytes(g));
  std::vector<unsigned char> ref_workspace(std::max<size_t>(reference.attention_workspace_bytes(g), 1));
  std::vector<float> previous;
  for (int32_t step : {5, 6}) {
    GpuArray<int32_t> step_gpu(*gpu, std::vector<int32_t>{step});
    gpu->ops().attention_forward(g, q_gpu.data(), k_gpu.data(), v_gpu.data(), nullptr, step_gpu.data(),
                                 o_gpu.data(), lse_gpu.data(), workspace.data());
    std::vector<float> o_ref(q_rows * m), lse_ref(g.lse_count());
    reference.attention_forward(g, q.data(), k.data(), v.data(), nullptr, &step, o_ref.data(), lse_ref.data(),
                                ref_workspace.data());
    const std::vector<float> o = o_gpu.download();
    size_t pattern_differs = 0, dropped = 0, kept = 0;
    for (size_t r = 0; r < q_rows; ++r) {
      for (int h = 0; h < c.heads; ++h) {
        for (int j = 0; j < c.key_len; ++j) {
          const size_t at = r * m + h * c.head_dim + j;
          pattern_differs += (o[at] == 0.0f) != (o_ref[at] == 0.0f);
          (o[at] == 0.0f ? dropped : kept) += 1;
        }
      }
    }
    INFO("step " << step << ": " << dropped << " dropped, " << kept << " kept");
    CHECK(pattern_differs == 0);
    CHECK(dropped > (dropped + kept) / 4);  // rate 0.5: about half, far from none or all
    CHECK(kept > (dropped + kept) / 4);
    check_attention_result(o, o_ref, DataType::f32, attention_budget(g, 1.0),
                           "one-hot attention o, step " + std::to_string(step));
    if (!previous.empty()) CHECK(o != previous);  // a new step draws new masks
    previous = o;
  }
}

TEST_CASE(
    "cuda attention gives the same bits on every run and replays from a CUDA graph with each step's masks",
    "[gpu][transformer]") {
  // Forward and backward captured once; the step counter in device memory advances between
  // replays (as the runner's does), so each replay must draw that step's masks: it equals an
  // eager run at the same step bit for bit (every sum has a fixed order), and differs from the
  // replay before it. Transformer's length (dQ beside dK and dV) and one past two key tiles (the
  // mma.sync kernels), in every type and in fp32 under TF32.
  const AttentionCase cases[] = {{"graph", 4, 8, 100, 100, 64, true, 0.1f, {100, 80, 1, 57}, true},
                                 {"graph 300", 2, 4, 300, 300, 64, true, 0.1f, {300, 250}, true}};
  struct Run {
    DataType type;
    bool tf32;
  };
  const Run runs[] = {
      {DataType::f32, false}, {DataType::f32, true}, {DataType::f16, false}, {DataType::bf16, false}};
  for (const AttentionCase& c : cases) {
    for (const Run& each : runs) {
      const DataType type = each.type;
      const std::string what = " " + c.name + (each.tf32 ? " under tf32" : "") + type_suffix(type);
      auto gpu = make_gpu();
      set_tf32(*gpu, each.tf32);
      Backend& ops = gpu->ops();
      const AttentionGeometry g = geometry_of(c, type);
      const AttentionLayout layout = layout_of(c);
      const size_t rows = layout.rows[0];
      const int width = layout.widths[0];
      const size_t o_count = static_cast<size_t>(c.query_len) * c.batch * g.o_stride;
      const int m = g.model_dim();
      GpuTensor qkv(*gpu, type, random_of(type, rows * width, 1900, -2.0f, 2.0f)), dqkv(*gpu, type, rows * width),
          o(*gpu, type, o_count), d_o(*gpu, type, random_of(type, o_count, 1901));
      GpuArray<float> lse(*gpu, g.lse_count());
      GpuArray<int32_t> lengths(*gpu, c.key_lengths), step(*gpu, std::vector<int32_t>{0});
      Buffer workspace = allocate_at_least_one(*gpu, ops.attention_workspace_bytes(g));
      auto at = [&](GpuTensor& t, int column) {
        return static_cast<char*>(t.data()) + column * data_type_bytes(type);
      };
      auto run = [&] {
        ops.attention_forward(g, at(qkv, 0), at(qkv, m), at(qkv, 2 * m), lengths.data(), step.data(), o.data(),
                              lse.data(), workspace.data());
        ops.attention_backward(g, at(qkv, 0), at(qkv, m), at(qkv, 2 * m), o.data(), d_o.data(), lse.data(),
                               lengths.data(), step.data(), at(dqkv, 0), at(dqkv, m), at(dqkv, 2 * m),
                               workspace.data());
      };
      auto set_step = [&](int32_t value) { gpu->copy_from_host(step.data(), &value, sizeof(value)); };
      // The tensors' own columns (the buffers' padding is nobody's).
      const size_t o_rows = static_cast<size_t>(c.query_len) * c.batch;
      auto o_values = [&] { return columns_of(o.values(), o_rows, g.o_stride, 0, m); };
      auto gradient_values = [&] { return columns_of(dqkv.values(), rows, width, 0, 3 * m); };

      std::vector<std::vector<float>> eager_o, eager_grads;
      for (int32_t s : {3, 4}) {
        set_step(s);
        run();
        eager_o.push_back(o_values());
        eager_grads.push_back(gradient_values());
        run();
        check_same_values(o_values(), eager_o.back(), "attention o, second run" + what);
        check_same_values(gradient_values(), eager_grads.back(),
                          "attention gradients, second run" + what);
      }
      CHECK(eager_o[0] != eager_o[1]);
      CHECK(eager_grads[0] != eager_grads[1]);

      std::unique_ptr<CapturedWork> graph = gpu->capture(run);
      REQUIRE(graph != nullptr);
      for (int32_t s : {3, 4}) {
        set_step(s);
        o.upload(random_vector(o_count, 1902));  // cleared: the replay must write it again
        dqkv.upload(random_vector(rows * width, 1903));
        graph->launch();
        gpu->synchronize();
        check_same_values(o_values(), eager_o[s - 3],
                          "attention o, replay at step " + std::to_string(s) + what);
        check_same_values(gradient_values(), eager_grads[s - 3],
                          "attention gradients, replay at step " + std::to_string(s) + what);
      }
    }
  }
}
