// [gpu] The CUDA backend's cuDNN convolutions against the reference backend in both data formats
// and in fp32, fp16 and bf16, with algorithms timed and chosen by heuristics, plus the
// per-geometry cache of algorithm choices (types included) and the workspace contract.
//
// Comparison: |gpu - ref| <= atol + rtol * |ref| per element. The reference accumulates in double,
// so the tolerances only cover the GPU's fp32 rounding; each says where it comes from.
// eps = 2^-23 (fp32 machine epsilon). Inputs are uniform in [-1, 1].
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

// An fp32 sum of `terms` products whose magnitudes average `mean_term`: rounding errors behave
// like a random walk (Higham & Mary), about sqrt(terms) * eps * sum|terms|. cuDNN's algorithms
// are not all direct sums: Winograd and FFT round transformed values a few more times per term,
// so the margin is 8 rather than the 2 the GEMM test uses.
double sum_tolerance(double terms, double mean_term) {
  return 8.0 * std::sqrt(terms) * kEps * terms * mean_term + 8 * kEps;
}

// The same sum over 16-bit inputs. The inputs are values the type holds exactly and their
// products are exact in fp32 (11 + 11 significant bits for fp16, 8 + 8 for bf16), so the GPU's
// result is an fp32 accumulation rounded once to the type, and the reference's the double
// accumulation rounded once (through fp32) to the type. Tensor cores accumulate in fp32 but need
// not round each addition to nearest (they may truncate when aligning addends), so instead of the
// random-walk estimate the accumulation gets the worst-case bound, terms * eps * sum|terms|, with
// margin 2. Rounding two values that close to the type then adds at most one unit in its last
// place, storage_rtol (and fp16's subnormal spacing).
struct Tolerance {
  double atol, rtol;
};
Tolerance conv_tolerance(DataType type, double terms, double mean_term) {
  if (type == DataType::f32) return {sum_tolerance(terms, mean_term), 4 * kEps};
  return {2.0 * terms * kEps * terms * mean_term + 8 * kEps + storage_atol(type),
          4 * kEps + storage_rtol(type)};
}

struct ConvCase {
  int n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w;
};

// 1x1, 3x3, 5x3, 7x7, 1x7 and 7x1; strides 1 to 3; batch 1 and more; odd channel counts.
const ConvCase kConvCases[] = {
    {1, 3, 7, 7, 5, 1, 1, 1, 1, 0, 0},      {2, 3, 17, 15, 13, 3, 3, 1, 1, 1, 1},
    {3, 5, 19, 23, 7, 3, 3, 2, 2, 1, 1},    {2, 3, 29, 31, 10, 7, 7, 2, 2, 3, 3},
    {1, 12, 9, 11, 6, 1, 7, 1, 1, 0, 3},    {2, 7, 11, 9, 9, 7, 1, 1, 1, 3, 0},
    {4, 17, 8, 8, 33, 3, 3, 1, 2, 0, 1},    {1, 9, 6, 10, 4, 5, 3, 3, 1, 2, 0},
    {2, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1},  {5, 24, 7, 7, 40, 1, 1, 2, 2, 0, 0},
};

ConvGeometry conv_geometry(const ConvCase& c, DataFormat format,
                           DataType type = DataType::f32) {
  return make_conv_geometry(Tensor4{c.n, c.c, c.h, c.w, format, type}, c.k, c.r, c.s, c.stride_h,
                            c.stride_w, Padding::explicit_symmetric, c.pad_h, c.pad_w);
}

}  // namespace

TEST_CASE("cuda convolutions match the reference in both formats, timed or heuristic algorithms",
          "[gpu]") {
  ReferenceBackend reference;
  for (bool benchmark : {true, false}) {
    auto gpu = make_gpu();
    set_cudnn_benchmark(*gpu, benchmark);
    Backend& ops = gpu->ops();
    uint64_t stream = 100;
    for (DataType type : kAllTypes) {
      for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
        for (const ConvCase& c : kConvCases) {
          const ConvGeometry g = conv_geometry(c, format, type);
          const std::string what =
              describe(g) + (benchmark ? " (timed algorithms)" : " (heuristic algorithms)");
          const std::vector<float> x = rounded(type, random_vector(g.input.count(), stream++));
          const std::vector<float> w = rounded(type, random_vector(g.filter.count(), stream++));
          const std::vector<float> dy = rounded(type, random_vector(g.output.count(), stream++));

          const size_t workspace_bytes = ops.conv2d_workspace_bytes(g);
          Buffer workspace = gpu->allocate(workspace_bytes, kTestWorkspace);
          std::vector<unsigned char> reference_workspace(reference.conv2d_workspace_bytes(g));
          GpuTensor x_gpu(*gpu, type, x), w_gpu(*gpu, type, w), dy_gpu(*gpu, type, dy);
          // Outputs start as garbage: every pass must overwrite, not accumulate.
          GpuTensor y_gpu(*gpu, type, random_vector(g.output.count(), 1));
          GpuTensor dx_gpu(*gpu, type, random_vector(g.input.count(), 2));
          GpuTensor dw_gpu(*gpu, type, random_vector(g.filter.count(), 3));

          ops.conv2d_forward(g, x_gpu.data(), w_gpu.data(), y_gpu.data(), workspace.data(),
                             workspace_bytes);
          ops.conv2d_backward_data(g, dy_gpu.data(), w_gpu.data(), dx_gpu.data(),
                                   workspace.data(), workspace_bytes);
          ops.conv2d_backward_filter(g, x_gpu.data(), dy_gpu.data(), dw_gpu.data(),
                                     workspace.data(), workspace_bytes);

          HostTensor x_ref(type, x), w_ref(type, w), dy_ref(type, dy),
              y_ref(type, g.output.count()), dx_ref(type, g.input.count()),
              dw_ref(type, g.filter.count());
          reference.conv2d_forward(g, x_ref.data(), w_ref.data(), y_ref.data(),
                                   reference_workspace.data(), reference_workspace.size());
          reference.conv2d_backward_data(g, dy_ref.data(), w_ref.data(), dx_ref.data(),
                                         reference_workspace.data(), reference_workspace.size());
          reference.conv2d_backward_filter(g, x_ref.data(), dy_ref.data(), dw_ref.data(),
                                           reference_workspace.data(),
                                           reference_workspace.size());

          // Products of two uniform [-1, 1] values average 1/4 in magnitude. An output sums at
          // most C*R*S of them, an input gradient at most K*R*S, a filter gradient N*P*Q (the
          // output's positions). Padding only removes terms, so these are upper bounds.
          const double filter_terms = static_cast<double>(c.c) * c.r * c.s;
          const double data_terms = static_cast<double>(c.k) * c.r * c.s;
          const double weight_terms = static_cast<double>(g.output.n) * g.output.h * g.output.w;
          const Tolerance forward = conv_tolerance(type, filter_terms, 0.25);
          const Tolerance backward_data = conv_tolerance(type, data_terms, 0.25);
          const Tolerance backward_filter = conv_tolerance(type, weight_terms, 0.25);
          check_close(y_gpu.values(), y_ref.values(), forward.atol, forward.rtol,
                      "conv2d_forward " + what);
          check_close(dx_gpu.values(), dx_ref.values(), backward_data.atol, backward_data.rtol,
                      "conv2d_backward_data " + what);
          check_close(dw_gpu.values(), dw_ref.values(), backward_filter.atol,
                      backward_filter.rtol, "conv2d_backward_filter " + what);

          // accumulate (beta = 1): dx += the gradient, onto a gradient already there (random,
          // |dx| <= 1, the same on both sides). In fp32 the sum is formed before the one rounding,
          // so the tolerance is the pass's own plus one eps-rounding of |dx| <= 1. In 16-bit,
          // cuDNN rounds the new gradient to the type before adding (seen on an H200, cuDNN 9.14:
          // up to 18 fp16 units of a small sum whose addends were near 1), so the sum also carries
          // one storage rounding at the magnitude of its addends, not of the result.
          const std::vector<float> earlier = rounded(type, random_vector(g.input.count(), 5));
          dx_gpu.upload(earlier);
          HostTensor accumulated_ref(type, earlier);
          ops.conv2d_backward_data(g, dy_gpu.data(), w_gpu.data(), dx_gpu.data(),
                                   workspace.data(), workspace_bytes, /*accumulate=*/true);
          reference.conv2d_backward_data(g, dy_ref.data(), w_ref.data(), accumulated_ref.data(),
                                         reference_workspace.data(), reference_workspace.size(),
                                         /*accumulate=*/true);
          double largest_addend = 1.0;
          for (float value : dx_ref.values()) largest_addend = std::max(largest_addend, 1.0 + std::fabs(value));
          const double addend_rounding = type == DataType::f32 ? 0.0 : storage_rtol(type) * largest_addend;
          check_close(dx_gpu.values(), accumulated_ref.values(),
                      backward_data.atol + 2 * kEps + addend_rounding, backward_data.rtol,
                      "conv2d_backward_data accumulating " + what);
        }
      }
    }
  }
}

TEST_CASE("cuda convolution algorithms are chosen once per geometry", "[gpu]") {
  auto gpu = make_gpu();
  Backend& ops = gpu->ops();
  const ConvGeometry g = conv_geometry(kConvCases[2], DataFormat::nchw);
  const size_t before = conv_algorithm_searches(ops);
  const size_t first = ops.conv2d_workspace_bytes(g);
  CHECK(conv_algorithm_searches(ops) == before + 1);
  const size_t second = ops.conv2d_workspace_bytes(g);
  CHECK(second == first);
  CHECK(conv_algorithm_searches(ops) == before + 1);

  // Running the passes looks the plan up; it never searches again.
  GpuArray<float> x(*gpu, random_vector(g.input.count(), 5));
  GpuArray<float> w(*gpu, random_vector(g.filter.count(), 6));
  GpuArray<float> y(*gpu, g.output.count());
  Buffer workspace = gpu->allocate(first, kTestBuffer);
  for (int step = 0; step < 3; ++step) {
    ops.conv2d_forward(g, x.data(), w.data(), y.data(), workspace.data(), first);
    ops.conv2d_backward_data(g, y.data(), w.data(), x.data(), workspace.data(), first);
    ops.conv2d_backward_filter(g, x.data(), y.data(), w.data(), workspace.data(), first);
  }
  gpu->synchronize();
  CHECK(conv_algorithm_searches(ops) == before + 1);

  // The same shape in the other layout is another geometry with its own plan, and so is the
  // same shape in another type (fp16 and bf16 need their own descriptors and algorithms).
  ops.conv2d_workspace_bytes(conv_geometry(kConvCases[2], DataFormat::nhwc));
  CHECK(conv_algorithm_searches(ops) == before + 2);
  ops.conv2d_workspace_bytes(conv_geometry(kConvCases[2], DataFormat::nchw, DataType::f16));
  CHECK(conv_algorithm_searches(ops) == before + 3);
  ops.conv2d_workspace_bytes(conv_geometry(kConvCases[2], DataFormat::nchw, DataType::bf16));
  CHECK(conv_algorithm_searches(ops) == before + 4);
  ops.conv2d_workspace_bytes(conv_geometry(kConvCases[2], DataFormat::nchw, DataType::f16));
  CHECK(conv_algorithm_searches(ops) == before + 4);
  // Each stream's backend keeps its own cache.
  CHECK(conv_algorithm_searches(gpu->ops(StreamKind::communication)) == 0);
}

TEST_CASE("a cuda convolution given less workspace than it asked for throws", "[gpu]") {
  auto gpu = make_gpu();
  Backend& ops = gpu->ops();
  // Layers whose fastest algorithms (FFT, Winograd, split-K reductions) usually need workspace.
  const ConvCase candidates[] = {{8, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1},
                                 {8, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3},
                                 {8, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1},
                                 {32, 128, 28, 28, 128, 5, 5, 1, 1, 2, 2}};
  bool tested = false;
  for (const ConvCase& c : candidates) {
    const ConvGeometry g = conv_geometry(c, DataFormat::nchw);
    const size_t needed = ops.conv2d_workspace_bytes(g);
    if (needed == 0) continue;
    GpuArray<float> x(*gpu, g.input.count()), w(*gpu, g.filter.count()), y(*gpu, g.output.count());
    Buffer workspace = gpu->allocate(needed, kTestBuffer);
    INFO(describe(g) << " needs " << needed << " bytes");
    CHECK_THROWS_AS(ops.conv2d_forward(g, x.data(), w.data(), y.data(), workspace.data(),
                                       needed - 1),
                    RuntimeError);
    CHECK_THROWS_AS(ops.conv2d_backward_data(g, y.data(), w.data(), x.data(), nullptr, 0),
                    RuntimeError);
    CHECK_THROWS_AS(ops.conv2d_backward_filter(g, x.data(), y.data(), w.data(), workspace.data(),
                                               needed / 2),
                    RuntimeError);
    // Refusing touched nothing: the device goes on working with the right workspace.
    ops.conv2d_forward(g, x.data(), w.data(), y.data(), workspace.data(), needed);
    gpu->synchronize();
    tested = true;
    break;
  }
  if (!tested) WARN("no candidate geometry needed a workspace; the refusal went untested");
}


// conv2d_forward_bias: one graph-API kernel (convolution, bias, ReLU) where it timed faster than
// the chosen forward plus the bias pass, else the two; either way the result of the reference's
// conv2d_forward then add_channel_bias. The fused kernel rounds once where the two passes round
// the convolution and then the sum, so 16-bit results may differ by one more unit of the type.
TEST_CASE("cuda conv2d_forward_bias matches the reference convolution then bias and ReLU", "[gpu]") {
  ReferenceBackend reference;
  auto gpu = make_gpu();
  Backend& ops = gpu->ops();
  uint64_t stream = 700;
  int fused = 0, compared = 0;
  for (DataType type : kAllTypes) {
    for (DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
      for (const ConvCase& c : kConvCases) {
        for (const bool relu : {true, false}) {
          const ConvGeometry g = conv_geometry(c, format, type);
          const size_t workspace_bytes = ops.conv2d_bias_workspace_bytes(g, relu);
          const bool fused_here = ops.conv2d_forward_bias_fused(g, relu);
          const std::string what = describe(g) + (relu ? " with ReLU" : " without ReLU") +
                                   (fused_here ? " (fused)" : " (two passes)");
          CHECK((relu || !fused_here));  // the fused kernel always applies the ReLU
          fused += fused_here;
          const std::vector<float> x = rounded(type, random_vector(g.input.count(), stream++));
          const std::vector<float> w = rounded(type, random_vector(g.filter.count(), stream++));
          const std::vector<float> bias = random_vector(static_cast<size_t>(g.output.c), stream++);
          Buffer workspace = gpu->allocate(std::max<size_t>(workspace_bytes, 1), kTestWorkspace);
          std::vector<unsigned char> reference_workspace(reference.conv2d_workspace_bytes(g));
          GpuTensor x_gpu(*gpu, type, x), w_gpu(*gpu, type, w), bias_gpu(*gpu, DataType::f32, bias);
          GpuTensor y_gpu(*gpu, type, random_vector(g.output.count(), 1));
          ops.conv2d_forward_bias(g, x_gpu.data(), w_gpu.data(), static_cast<const float*>(bias_gpu.data()), relu,
                                  y_gpu.data(), workspace.data(), workspace_bytes);
          HostTensor x_ref(type, x), w_ref(type, w), y_ref(type, g.output.count());
          reference.conv2d_forward(g, x_ref.data(), w_ref.data(), y_ref.data(), reference_workspace.data(),
                                   reference_workspace.size());
          reference.add_channel_bias(g.output, y_ref.data(), bias.data(), relu);
          const Tolerance forward = conv_tolerance(type, static_cast<double>(c.c) * c.r * c.s, 0.25);
          // The bias (|b| <= 1) adds one fp32 rounding of a value up to the sum plus 1; 16-bit
          // adds a second storage rounding at that magnitude.
          const double extra = type == DataType::f32 ? 2 * kEps : 2 * storage_rtol(type) + storage_atol(type);
          check_close(y_gpu.values(), y_ref.values(), forward.atol + extra, forward.rtol + extra,
                      "conv2d_forward_bias " + what);
          ++compared;
        }
      }
    }
  }
  INFO(fused << " of " << compared << " cases ran fused");
  CHECK(compared == 3 * 2 * 10 * 2);
}
