// [gpu] The CUDA backend's linear layers (Backend::linear_forward, linear_backward) against the
// reference backend, which runs them as the plain ops: the bias, a residual and GELU fused into
// cuBLASLt's epilogue, the bias gradient in the weight gradient's GEMM, GELU's backward with the
// lower layer's bias gradient in the input gradient's GEMM; shapes cuBLASLt fuses (GPT-2's widths)
// and shapes it cannot (widths not a multiple of 8, ReLU and dropout epilogues), which run the
// plain ops on the GPU too. math_paths says which ran. By default each pass runs whichever of the
// two timed faster (Note [linear paths]): the tests force cuBLASLt's, check that the plain path
// plans nothing, and that the timed choice records its timings and keeps the results.
//
// Comparison: |gpu - ref| <= atol + rtol * max|ref| over the tensor, TF32 off. The products sum
// `in` (or `rows`) terms in another order on each side and the fused epilogue rounds the sum
// once where the plain ops round the product first, so a 16-bit result may sit a unit of the
// type or two from the reference's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/cuda/cuda_controls.h"
#include "engine/reference/reference_backend.h"
#include "tests/gpu/gpu_test_support.h"

using namespace dpbench;
using namespace dpbench::gpu_test;

namespace {

std::vector<float> random_of(DataType type, size_t n, uint64_t stream, float lo = -1.0f, float hi = 1.0f) {
  return rounded(type, random_vector(n, stream, lo, hi));
}

double largest(const std::vector<float>& values) {
  double result = 0.0;
  for (float v : values) result = std::max(result, std::fabs(static_cast<double>(v)));
  return result;
}

// Relative to the tensor's largest value: the products' rounding scales with the sums, not with
// each element (a cancelling sum near 0 keeps the others' absolute error). In fp32 cuBLASLt's
// GELU derivative sits up to 1.04e-5 of the largest dx from the tanh form's (measured on an H200
// at these shapes): `gelu` allows 3e-5 there.
void check_near(const std::vector<float>& gpu, const std::vector<float>& ref, DataType type, const std::string& what,
                bool gelu = false) {
  const double fp32 = gelu ? 3e-5 : 1e-5;
  const double tolerance = (type == DataType::f32 ? fp32 : type == DataType::f16 ? 4e-3 : 2e-2) * largest(ref);
  check_close(gpu, ref, tolerance, 0.0, what);
}

struct LinearShape {
  int rows, in, out;
};

// GPT-2 124m's QKV and MLP widths at 70 tokens (fused), and widths of 12 and 20 (not multiples
// of 8: the plain ops).
// And the small gpt of test_gpt_model_gpu.cpp's widths (32, 96, 128) over 210 rows.
const LinearShape kShapes[] = {{70, 768, 2304}, {70, 768, 3072}, {70, 3072, 768}, {33, 12, 20},
                               {210, 32, 96},   {210, 32, 128},  {210, 128, 32}};

}  // namespace

TEST_CASE("cuda linear_forward with its epilogues matches the reference", "[gpu][transformer][gpt]") {
  auto gpu = make_exact_gpu();
  set_linear_path(*gpu, "cublaslt");
  ReferenceBackend reference;
  uint64_t stream = 9100;
  for (DataType type : kAllTypes) {
    for (const LinearShape& s : kShapes) {
      const size_t x_count = static_cast<size_t>(s.rows) * s.in, y_count = static_cast<size_t>(s.rows) * s.out;
      const std::vector<float> x = random_of(type, x_count, stream++);
      const std::vector<float> w = random_of(type, static_cast<size_t>(s.out) * s.in, stream++, -0.1f, 0.1f);
      const std::vector<float> bias = random_vector(s.out, stream++);
      // What a fused epilogue adds: the bias in the layer's type, as the weight copy holds it.
      const std::vector<float> bias_copy = rounded(type, bias);
      const std::vector<float> residual = random_of(type, y_count, stream++);
      for (const std::string epilogue : {"bias", "residual", "gelu", "relu"}) {
        GpuTensor x_gpu(*gpu, type, x), w_gpu(*gpu, type, w), y_gpu(*gpu, type, y_count),
            residual_gpu(*gpu, type, residual), out_gpu(*gpu, type, y_count);
        GpuArray<float> bias_gpu(*gpu, bias);
        GpuTensor bias_copy_gpu(*gpu, type, bias_copy);
        HostTensor x_ref(type, x), w_ref(type, w), y_ref(type, y_count), residual_ref(type, residual),
            out_ref(type, y_count);
        RowBiasEpilogue on_gpu, on_ref;
        if (epilogue == "residual") {
          on_gpu.residual = residual_gpu.data();
          on_gpu.out = out_gpu.data();
          on_ref.residual = residual_ref.data();
          on_ref.out = out_ref.data();
        } else if (epilogue == "gelu") {
          on_gpu.gelu = on_ref.gelu = true;
          on_gpu.activated = out_gpu.data();
          on_ref.activated = out_ref.data();
        } else if (epilogue == "relu") {
          on_gpu.relu = on_ref.relu = true;
        }
        gpu->ops().linear_forward(type, x_gpu.data(), w_gpu.data(), bias_gpu.data(), bias_copy_gpu.data(), s.rows,
                                  s.in, s.out, y_gpu.data(), on_gpu);
        reference.linear_forward(type, x_ref.data(), w_ref.data(), bias.data(), nullptr, s.rows, s.in, s.out,
                                 y_ref.data(), on_ref);
        const std::string what = "linear_forward " + epilogue + " " + std::to_string(s.rows) + "x" +
                                 std::to_string(s.in) + "x" + std::to_string(s.out) + type_suffix(type);
        if (epilogue != "residual") check_near(y_gpu.values(), y_ref.values(), type, what + " y");
        if (epilogue == "residual" || epilogue == "gelu")
          check_near(out_gpu.values(), out_ref.values(), type, what + " out");
      }
    }
  }
  // The GPT widths ran on cuBLASLt's epilogues: 6 shapes x 3 epilogues x 3 types (ReLU and the
  // narrow shape are never planned).
  const nlohmann::json linear = math_paths(*gpu)["linear"];
  INFO(linear.dump());
  CHECK(linear["cublaslt_epilogues"].get<int>() == 54);
  // On the plain path nothing is planned.
  auto plain = make_exact_gpu();
  set_linear_path(*plain, "plain");
  std::vector<float> zeros(static_cast<size_t>(70) * 2304);
  GpuTensor x(*plain, DataType::bf16, std::vector<float>(70 * 768)), w(*plain, DataType::bf16, std::vector<float>(2304 * 768)),
      y(*plain, DataType::bf16, zeros), bias_copy(*plain, DataType::bf16, std::vector<float>(2304));
  GpuArray<float> bias(*plain, std::vector<float>(2304));
  plain->ops().linear_forward(DataType::bf16, x.data(), w.data(), bias.data(), bias_copy.data(), 70, 768, 2304, y.data(),
                              {});
  CHECK(math_paths(*plain)["linear"]["shapes"] == 0);
}

TEST_CASE("cuda linear_backward with and without GELU matches the reference", "[gpu][transformer][gpt]") {
  auto gpu = make_exact_gpu();
  set_linear_path(*gpu, "cublaslt");
  ReferenceBackend reference;
  uint64_t stream = 9300;
  for (DataType type : kAllTypes) {
    for (const LinearShape& s : kShapes) {
      const size_t x_count = static_cast<size_t>(s.rows) * s.in, y_count = static_cast<size_t>(s.rows) * s.out;
      const size_t w_count = static_cast<size_t>(s.out) * s.in;
      const std::vector<float> x = random_of(type, x_count, stream++);
      const std::vector<float> u = random_of(type, x_count, stream++, -4.0f, 4.0f);
      const std::vector<float> w = random_of(type, w_count, stream++, -0.1f, 0.1f);
      const std::vector<float> dy = random_of(type, y_count, stream++);
      const std::vector<float> dx_before = random_of(type, x_count, stream++);
      for (const std::string mode : {"plain", "accumulate", "gelu", "weights only"}) {
        GpuTensor x_gpu(*gpu, type, x), u_gpu(*gpu, type, u), w_gpu(*gpu, type, w), dy_gpu(*gpu, type, dy),
            dx_gpu(*gpu, type, dx_before);
        GpuArray<float> dw_gpu(*gpu, w_count), db_gpu(*gpu, static_cast<size_t>(s.out)),
            du_bias_gpu(*gpu, static_cast<size_t>(s.in));
        HostTensor x_ref(type, x), u_ref(type, u), w_ref(type, w), dy_ref(type, dy), dx_ref(type, dx_before);
        std::vector<float> dw_ref(w_count), db_ref(s.out), du_bias_ref(s.in);
        const bool gelu = mode == "gelu", wants_dx = mode != "weights only";
        const GeluInputGradient gelu_gpu = gelu ? GeluInputGradient{u_gpu.data(), du_bias_gpu.data()} : GeluInputGradient{};
        const GeluInputGradient gelu_ref = gelu ? GeluInputGradient{u_ref.data(), du_bias_ref.data()} : GeluInputGradient{};
        gpu->ops().linear_backward(type, x_gpu.data(), dy_gpu.data(), w_gpu.data(), s.rows, s.in, s.out, dw_gpu.data(),
                                   db_gpu.data(), wants_dx ? dx_gpu.data() : nullptr, mode == "accumulate", gelu_gpu);
        reference.linear_backward(type, x_ref.data(), dy_ref.data(), w_ref.data(), s.rows, s.in, s.out, dw_ref.data(),
                                  db_ref.data(), wants_dx ? dx_ref.data() : nullptr, mode == "accumulate", gelu_ref);
        const std::string what = "linear_backward " + mode + " " + std::to_string(s.rows) + "x" +
                                 std::to_string(s.in) + "x" + std::to_string(s.out) + type_suffix(type);
        check_near(dw_gpu.download(), dw_ref, type, what + " dweights");
        check_near(db_gpu.download(), db_ref, type, what + " dbias");
        check_near(dx_gpu.values(), dx_ref.values(), type, what + " dx", gelu);
        if (gelu) check_near(du_bias_gpu.download(), du_bias_ref, type, what + " u's bias gradient", gelu);
      }
    }
  }
  const nlohmann::json linear = math_paths(*gpu)["linear"];
  INFO(linear.dump());
  CHECK(linear["cublaslt_epilogues"].get<int>() >= 6);
}

TEST_CASE("cuda linear layers time cuBLASLt's fused passes against the plain ops and keep the faster",
          "[gpu][transformer][gpt]") {
  // gpt 124m's MLP at 2048 tokens: each pass is timed once, on the first call, both ways; the
  // results match the reference whichever ran, and a deterministic device times nothing.
  const int rows = 2048, in = 768, out = 3072;
  const DataType type = DataType::bf16;
  const size_t x_count = static_cast<size_t>(rows) * in, y_count = static_cast<size_t>(rows) * out;
  const size_t w_count = static_cast<size_t>(out) * in;
  const std::vector<float> x = random_of(type, x_count, 9500), w = random_of(type, w_count, 9501, -0.1f, 0.1f);
  const std::vector<float> bias = random_vector(out, 9502), dy = random_of(type, y_count, 9503);
  ReferenceBackend reference;
  HostTensor x_ref(type, x), w_ref(type, w), y_ref(type, y_count), act_ref(type, y_count), dy_ref(type, dy);
  RowBiasEpilogue gelu_ref;
  gelu_ref.gelu = true;
  gelu_ref.activated = act_ref.data();
  reference.linear_forward(type, x_ref.data(), w_ref.data(), bias.data(), nullptr, rows, in, out, y_ref.data(),
                           gelu_ref);
  std::vector<float> dw_ref(w_count), db_ref(out);
  reference.linear_backward(type, x_ref.data(), dy_ref.data(), w_ref.data(), rows, in, out, dw_ref.data(),
                            db_ref.data(), nullptr, false, {});

  for (const bool deterministic : {false, true}) {
    auto gpu = make_exact_gpu();
    set_deterministic(*gpu, deterministic);
    GpuTensor x_gpu(*gpu, type, x), w_gpu(*gpu, type, w), y_gpu(*gpu, type, y_count), act_gpu(*gpu, type, y_count),
        dy_gpu(*gpu, type, dy), bias_copy(*gpu, type, rounded(type, bias));
    GpuArray<float> bias_gpu(*gpu, bias), dw_gpu(*gpu, w_count), db_gpu(*gpu, static_cast<size_t>(out));
    RowBiasEpilogue then;
    then.gelu = true;
    then.activated = act_gpu.data();
    for (int call = 0; call < 2; ++call) {
      gpu->ops().linear_forward(type, x_gpu.data(), w_gpu.data(), bias_gpu.data(), bias_copy.data(), rows, in, out,
                                y_gpu.data(), then);
      gpu->ops().linear_backward(type, x_gpu.data(), dy_gpu.data(), w_gpu.data(), rows, in, out, dw_gpu.data(),
                                 db_gpu.data(), nullptr, false, {});
      const std::string what = std::string(deterministic ? "deterministic" : "timed") + " call " +
                               std::to_string(call);
      check_near(y_gpu.values(), y_ref.values(), type, what + " y");
      check_near(act_gpu.values(), act_ref.values(), type, what + " gelu");
      check_near(dw_gpu.download(), dw_ref, type, what + " dweights");
      check_near(db_gpu.download(), db_ref, type, what + " dbias");
    }
    const nlohmann::json linear = math_paths(*gpu)["linear"];
    INFO(linear.dump());
    if (deterministic) {
      CHECK(linear["shapes"].get<int>() == 0);
      continue;
    }
    // The forward with GELU and the weight gradient with the bias gradient, each timed once.
    REQUIRE(linear["timed"].size() == 2);
    int fused = 0;
    for (const nlohmann::json& pass : linear["timed"]) {
      CHECK(pass["plain_ms"].get<double>() > 0.0);
      CHECK(pass["fused_ms"].get<double>() > 0.0);
      const bool faster = pass["fused_ms"].get<double>() < pass["plain_ms"].get<double>();
      CHECK(pass["fused"].get<bool>() == faster);
      fused += faster;
      std::printf("linear %s %dx%dx%d: cuBLASLt fused %.3f ms, plain ops %.3f ms\n",
                  pass["pass"].get<std::string>().c_str(), rows, in, out, pass["fused_ms"].get<double>(),
                  pass["plain_ms"].get<double>());
    }
    CHECK(linear["cublaslt_epilogues"].get<int>() == fused);
  }
}
