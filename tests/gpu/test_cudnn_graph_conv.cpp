// [gpu] CudnnGraphConvolutions (engine/cuda/cudnn_graph_conv.h), convolutions through cuDNN's graph
// API, against the reference backend: the four passes in NHWC fp32 (no TF32), fp16 and bf16 and in
// NCHW, the fused bias + ReLU forward, batch norm's statistics in the forward's epilogue (with and
// without the input's scale, shift and ReLU in its prologue), backward data accumulating, the
// plan cache, capture into a CUDA graph, and the refusals (unprepared plans, short workspaces,
// impossible requests).
//
// Comparison: |gpu - ref| <= atol + rtol * |ref| per element, with the tolerances of
// test_cuda_conv_ops.cpp, whose comments derive them (the reference accumulates in double; the
// GPU's fp32 rounding, and for 16-bit data one rounding to the type, is what they cover).
// Inputs are uniform in [-1, 1].
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/cuda/cudnn_graph_conv.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "tests/gpu/gpu_test_support.h"

using namespace dpbench;
using namespace dpbench::gpu_test;

namespace {

// What prepare() may choose within; one buffer this size serves every plan of a test.
constexpr size_t kWorkspaceLimit = size_t{256} << 20;

struct Tolerance {
  double atol, rtol;
};

// test_cuda_conv_ops.cpp's conv_tolerance: a random-walk fp32 sum with margin 8 for fp32 data;
// for 16-bit data the worst-case fp32 accumulation with margin 2 plus one rounding to the type.
Tolerance conv_tolerance(DataType type, double terms, double mean_term) {
  if (type == DataType::f32) {
    return {8.0 * std::sqrt(terms) * kEps * terms * mean_term + 8 * kEps, 4 * kEps};
  }
  return {2.0 * terms * kEps * terms * mean_term + 8 * kEps + storage_atol(type),
          4 * kEps + storage_rtol(type)};
}

// Products of two uniform [-1, 1] values average 1/4 in magnitude. An output sums at most C*R*S
// of them, an input gradient K*R*S, a filter gradient N*P*Q; padding only removes terms.
Tolerance forward_tolerance(const ConvGeometry& g) {
  return conv_tolerance(g.input.type, static_cast<double>(g.filter.c) * g.filter.r * g.filter.s,
                        0.25);
}
Tolerance backward_data_tolerance(const ConvGeometry& g) {
  return conv_tolerance(g.input.type, static_cast<double>(g.filter.k) * g.filter.r * g.filter.s,
                        0.25);
}
Tolerance backward_filter_tolerance(const ConvGeometry& g) {
  return conv_tolerance(g.input.type,
                        static_cast<double>(g.output.n) * g.output.h * g.output.w, 0.25);
}

struct ConvCase {
  int n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w;
};

const ConvCase kGraphConvCases[] = {
    {2, 16, 14, 14, 32, 3, 3, 1, 1, 1, 1},  // 3x3 pad 1 stride 1 (VGG's layers)
    {2, 32, 9, 9, 24, 1, 1, 1, 1, 0, 0},    // 1x1 (Inception's branches)
    {2, 3, 35, 35, 16, 7, 7, 2, 2, 3, 3},   // 7x7 stride 2 pad 3 on 3 channels (ResNet's stem)
    {2, 24, 15, 15, 40, 3, 3, 2, 2, 0, 0},  // 3x3 stride 2 unpadded (Inception's reductions)
    {1, 3, 35, 35, 5, 3, 3, 1, 1, 1, 1},    // odd channel counts on both sides, 35x35
};

ConvGeometry conv_geometry(const ConvCase& c, DataFormat format, DataType type) {
  return make_conv_geometry(Tensor4{c.n, c.c, c.h, c.w, format, type}, c.k, c.r, c.s, c.stride_h,
                            c.stride_w, Padding::explicit_symmetric, c.pad_h, c.pad_w);
}

// Device tensors of one geometry for the tests that check plans rather than values: x and w
// random, y zero.
struct ConvTensors {
  GpuTensor x, w, y;
  ConvTensors(Device& gpu, const ConvGeometry& g, uint64_t stream)
      : x(gpu, g.input.type, rounded(g.input.type, random_vector(g.input.count(), stream))),
        w(gpu, g.input.type, rounded(g.input.type, random_vector(g.filter.count(), stream + 1))),
        y(gpu, g.input.type, g.output.count()) {}
};

// The four passes of `g` (forward, backward data overwriting and accumulating, backward filter)
// through `convs` and through the reference, compared.
void check_passes(Device& gpu, CudnnGraphConvolutions& convs, const ConvGeometry& g,
                  void* workspace, uint64_t& stream) {
  ReferenceBackend reference;
  const DataType type = g.input.type;
  const std::string what = describe(g) + type_suffix(type);
  const std::vector<float> x = rounded(type, random_vector(g.input.count(), stream++));
  const std::vector<float> w = rounded(type, random_vector(g.filter.count(), stream++));
  const std::vector<float> dy = rounded(type, random_vector(g.output.count(), stream++));
  GpuTensor x_gpu(gpu, type, x), w_gpu(gpu, type, w), dy_gpu(gpu, type, dy);
  GpuTensor y_gpu(gpu, type, g.output.count()), dx_gpu(gpu, type, g.input.count()),
      dw_gpu(gpu, type, g.filter.count());

  const size_t forward_bytes =
      convs.prepare(g, ConvPass::forward, ConvEpilogue::none, kWorkspaceLimit, x_gpu.data(),
                    w_gpu.data(), y_gpu.data(), nullptr, workspace);
  const size_t data_bytes =
      convs.prepare(g, ConvPass::backward_data, ConvEpilogue::none, kWorkspaceLimit,
                    dx_gpu.data(), w_gpu.data(), dy_gpu.data(), nullptr, workspace);
  const size_t accumulate_bytes =
      convs.prepare(g, ConvPass::backward_data, ConvEpilogue::accumulate, kWorkspaceLimit,
                    dx_gpu.data(), w_gpu.data(), dy_gpu.data(), nullptr, workspace);
  const size_t filter_bytes =
      convs.prepare(g, ConvPass::backward_filter, ConvEpilogue::none, kWorkspaceLimit,
                    x_gpu.data(), dw_gpu.data(), dy_gpu.data(), nullptr, workspace);
  INFO(what << ": forward " << convs.describe(g, ConvPass::forward, ConvEpilogue::none)
            << "; backward data "
            << convs.describe(g, ConvPass::backward_data, ConvEpilogue::none)
            << "; accumulating "
            << convs.describe(g, ConvPass::backward_data, ConvEpilogue::accumulate)
            << "; backward filter "
            << convs.describe(g, ConvPass::backward_filter, ConvEpilogue::none));

  // prepare() left its candidates' results in the outputs: garbage again, so that every pass
  // must overwrite them.
  y_gpu.upload(random_vector(g.output.count(), 1));
  dx_gpu.upload(random_vector(g.input.count(), 2));
  dw_gpu.upload(random_vector(g.filter.count(), 3));
  convs.forward(g, x_gpu.data(), w_gpu.data(), y_gpu.data(), workspace, forward_bytes);
  convs.backward_data(g, dy_gpu.data(), w_gpu.data(), dx_gpu.data(), workspace, data_bytes);
  convs.backward_filter(g, x_gpu.data(), dy_gpu.data(), dw_gpu.data(), workspace, filter_bytes);

  std::vector<unsigned char> reference_workspace(reference.conv2d_workspace_bytes(g));
  HostTensor x_ref(type, x), w_ref(type, w), dy_ref(type, dy), y_ref(type, g.output.count()),
      dx_ref(type, g.input.count()), dw_ref(type, g.filter.count());
  reference.conv2d_forward(g, x_ref.data(), w_ref.data(), y_ref.data(),
                           reference_workspace.data(), reference_workspace.size());
  reference.conv2d_backward_data(g, dy_ref.data(), w_ref.data(), dx_ref.data(),
                                 reference_workspace.data(), reference_workspace.size());
  reference.conv2d_backward_filter(g, x_ref.data(), dy_ref.data(), dw_ref.data(),
                                   reference_workspace.data(), reference_workspace.size());
  const Tolerance forward = forward_tolerance(g);
  const Tolerance backward_data = backward_data_tolerance(g);
  const Tolerance backward_filter = backward_filter_tolerance(g);
  check_close(y_gpu.values(), y_ref.values(), forward.atol, forward.rtol, "forward " + what);
  check_close(dx_gpu.values(), dx_ref.values(), backward_data.atol, backward_data.rtol,
              "backward data " + what);
  check_close(dw_gpu.values(), dw_ref.values(), backward_filter.atol, backward_filter.rtol,
              "backward filter " + what);

  // dx += the gradient, onto a gradient already there (|dx| <= 1, the same on both sides). As in
  // test_cuda_conv_ops.cpp: the pass's tolerance plus one fp32 rounding of |dx| <= 1, and in
  // 16-bit one storage rounding at the magnitude of the addends (cuDNN may round the new
  // gradient to the type before it adds).
  const std::vector<float> earlier = rounded(type, random_vector(g.input.count(), 5));
  dx_gpu.upload(earlier);
  HostTensor accumulated_ref(type, earlier);
  convs.backward_data(g, dy_gpu.data(), w_gpu.data(), dx_gpu.data(), workspace, accumulate_bytes,
                      /*accumulate=*/true);
  reference.conv2d_backward_data(g, dy_ref.data(), w_ref.data(), accumulated_ref.data(),
                                 reference_workspace.data(), reference_workspace.size(),
                                 /*accumulate=*/true);
  double largest_addend = 1.0;
  for (float value : dx_ref.values()) {
    largest_addend = std::max(largest_addend, 1.0 + std::fabs(value));
  }
  const double addend_rounding = storage_rtol(type) * largest_addend;
  check_close(dx_gpu.values(), accumulated_ref.values(),
              backward_data.atol + 2 * kEps + addend_rounding, backward_data.rtol,
              "backward data accumulating " + what);
}

}  // namespace

TEST_CASE("cudnn graph convolutions match the reference in NHWC fp32 fp16 and bf16", "[gpu]") {
  auto gpu = make_gpu();
  CudnnGraphConvolutions convs(*gpu, StreamKind::compute);  // fp32 without TF32
  Buffer workspace = gpu->allocate(kWorkspaceLimit, kTestWorkspace);
  uint64_t stream = 300;
  for (DataType type : kAllTypes) {
    for (const ConvCase& c : kGraphConvCases) {
      check_passes(*gpu, convs, conv_geometry(c, DataFormat::nhwc, type), workspace.data(),
                   stream);
    }
  }
}

TEST_CASE("cudnn graph convolutions match the reference in NCHW", "[gpu]") {
  auto gpu = make_gpu();
  CudnnGraphConvolutions convs(*gpu, StreamKind::compute);
  Buffer workspace = gpu->allocate(kWorkspaceLimit, kTestWorkspace);
  uint64_t stream = 400;
  for (DataType type : {DataType::f32, DataType::bf16}) {
    for (const ConvCase& c : {kGraphConvCases[0], kGraphConvCases[2], kGraphConvCases[4]}) {
      check_passes(*gpu, convs, conv_geometry(c, DataFormat::nchw, type), workspace.data(),
                   stream);
    }
  }
}

// The reference's conv2d_forward and add_channel_bias each round to the storage type; the fused
// plan rounds once, after the ReLU. So the reference here runs in fp32 on the same (already
// rounded) values and the result is rounded once to the type: the plain forward's tolerance then
// holds. Not every layout and type fuses (on an H100 with cuDNN 9.14 every NHWC case here did,
// fp32 too, and NCHW 16-bit found no engine at all); NHWC 16-bit with channel counts that are
// multiples of 8 (VGG's and Inception's layers) must fuse, the others may be refused, and a
// refusal must be clean and remembered. NCHW bf16 is here for that refusal.
TEST_CASE("cudnn graph fused conv bias relu matches reference conv then add_channel_bias",
          "[gpu]") {
  auto gpu = make_gpu();
  CudnnGraphConvolutions convs(*gpu, StreamKind::compute);
  ReferenceBackend reference;
  Buffer workspace = gpu->allocate(kWorkspaceLimit, kTestWorkspace);
  uint64_t stream = 500;
  const std::pair<DataFormat, DataType> layouts[] = {{DataFormat::nhwc, DataType::f32},
                                                     {DataFormat::nhwc, DataType::f16},
                                                     {DataFormat::nhwc, DataType::bf16},
                                                     {DataFormat::nchw, DataType::bf16}};
  for (const auto& [format, type] : layouts) {
    for (const ConvCase& c : kGraphConvCases) {
      const ConvGeometry g = conv_geometry(c, format, type);
      const std::string what = describe(g) + type_suffix(type);
      const std::vector<float> x = rounded(type, random_vector(g.input.count(), stream++));
      const std::vector<float> w = rounded(type, random_vector(g.filter.count(), stream++));
      const std::vector<float> bias = random_vector(static_cast<size_t>(c.k), stream++);
      GpuTensor x_gpu(*gpu, type, x), w_gpu(*gpu, type, w), y_gpu(*gpu, type, g.output.count());
      GpuArray<float> bias_gpu(*gpu, bias);

      size_t bytes = 0;
      try {
        bytes = convs.prepare(g, ConvPass::forward, ConvEpilogue::bias_relu, kWorkspaceLimit,
                              x_gpu.data(), w_gpu.data(), y_gpu.data(), bias_gpu.data(),
                              workspace.data());
      } catch (const GraphConvolutionUnsupported& unsupported) {
        const bool must_fuse = format == DataFormat::nhwc && type != DataType::f32 &&
                               c.c % 8 == 0 && c.k % 8 == 0;
        if (must_fuse) {
          FAIL_CHECK(what << ": " << unsupported.what());
        } else {
          WARN(what << " not fused: " << unsupported.what());
        }
        // The answer is kept: asking again builds nothing and says the same.
        const size_t built = convs.plans_built();
        CHECK_THROWS_AS(convs.prepare(g, ConvPass::forward, ConvEpilogue::bias_relu,
                                      kWorkspaceLimit, x_gpu.data(), w_gpu.data(), y_gpu.data(),
                                      bias_gpu.data(), workspace.data()),
                        GraphConvolutionUnsupported);
        CHECK(convs.plans_built() == built);
        const std::string description =
            convs.describe(g, ConvPass::forward, ConvEpilogue::bias_relu);
        CHECK(description.rfind("unsupported", 0) == 0);
        continue;
      }
      INFO(what << ": " << convs.describe(g, ConvPass::forward, ConvEpilogue::bias_relu));
      y_gpu.upload(random_vector(g.output.count(), 1));
      convs.forward_bias_relu(g, x_gpu.data(), w_gpu.data(), bias_gpu.data(), y_gpu.data(),
                              workspace.data(), bytes);

      const ConvGeometry g32 = conv_geometry(c, format, DataType::f32);
      std::vector<unsigned char> reference_workspace(reference.conv2d_workspace_bytes(g32));
      HostTensor x_ref(DataType::f32, x), w_ref(DataType::f32, w),
          y_ref(DataType::f32, g32.output.count());
      reference.conv2d_forward(g32, x_ref.data(), w_ref.data(), y_ref.data(),
                               reference_workspace.data(), reference_workspace.size());
      reference.add_channel_bias(g32.output, y_ref.data(), bias.data(), /*relu=*/true);
      const Tolerance forward = forward_tolerance(g);
      check_close(y_gpu.values(), rounded(type, y_ref.values()), forward.atol, forward.rtol,
                  "forward + bias + relu " + what);
    }
  }
}

namespace {

// The channel of element `index` of a tensor of `shape` stored in its format.
int channel_of(const Tensor4& shape, size_t index) {
  if (shape.format == DataFormat::nhwc) return static_cast<int>(index % static_cast<size_t>(shape.c));
  return static_cast<int>((index / (static_cast<size_t>(shape.h) * shape.w)) % static_cast<size_t>(shape.c));
}

}  // namespace

TEST_CASE("cudnn graph convolution statistics match the stored output's sums, with and without the "
          "input's scale bias relu",
          "[gpu]") {
  auto gpu = make_gpu();
  CudnnGraphConvolutions convs(*gpu, StreamKind::compute);
  ReferenceBackend reference;
  Buffer workspace = gpu->allocate(kWorkspaceLimit, kTestWorkspace);
  uint64_t stream = 900;
  const std::pair<DataFormat, DataType> layouts[] = {{DataFormat::nhwc, DataType::f16},
                                                     {DataFormat::nhwc, DataType::bf16},
                                                     {DataFormat::nhwc, DataType::f32}};
  for (const ConvEpilogue epilogue : {ConvEpilogue::statistics, ConvEpilogue::input_scale_bias_relu_statistics}) {
    const bool prologue = epilogue == ConvEpilogue::input_scale_bias_relu_statistics;
    for (const auto& [format, type] : layouts) {
      for (const ConvCase& c : kGraphConvCases) {
        const ConvGeometry g = conv_geometry(c, format, type);
        const std::string what = describe(g) + type_suffix(type) + (prologue ? " with the input's prologue" : "");
        const std::vector<float> x = rounded(type, random_vector(g.input.count(), stream++));
        const std::vector<float> w = rounded(type, random_vector(g.filter.count(), stream++));
        // A batch norm's scale (gamma / sigma) and shift: positive scales, shifts either side of 0
        // so the ReLU cuts some inputs and keeps others.
        // Both in x's type, as the graph takes them.
        const std::vector<float> scale = rounded(type, random_vector(static_cast<size_t>(c.c), stream++, 0.5f, 2.0f));
        const std::vector<float> shift = rounded(type, random_vector(static_cast<size_t>(c.c), stream++, -0.5f, 0.5f));
        GpuTensor x_gpu(*gpu, type, x), w_gpu(*gpu, type, w), y_gpu(*gpu, type, g.output.count());
        GpuArray<float> sum_gpu(*gpu, static_cast<size_t>(c.k)), square_sum_gpu(*gpu, static_cast<size_t>(c.k));
        GpuTensor scale_gpu(*gpu, type, scale), shift_gpu(*gpu, type, shift);
        ConvStatisticsBuffers buffers{sum_gpu.data(), square_sum_gpu.data(), prologue ? scale_gpu.data() : nullptr,
                                      prologue ? shift_gpu.data() : nullptr};
        size_t bytes = 0;
        try {
          bytes = convs.prepare_statistics(g, epilogue, kWorkspaceLimit, x_gpu.data(), w_gpu.data(), y_gpu.data(),
                                           buffers, workspace.data());
        } catch (const GraphConvolutionUnsupported& unsupported) {
          // NVIDIA's MLPerf ResNet-50 runs these graphs in NHWC 16-bit with channels in eights.
          const bool must_fuse = type != DataType::f32 && c.c % 8 == 0 && c.k % 8 == 0;
          if (must_fuse) {
            FAIL_CHECK(what << ": " << unsupported.what());
          } else {
            WARN(what << " not fused: " << unsupported.what());
          }
          continue;
        }
        INFO(what << ": " << convs.describe(g, ConvPass::forward, epilogue));
        y_gpu.upload(random_vector(g.output.count(), 1));
        convs.forward_statistics(g, epilogue, x_gpu.data(), w_gpu.data(), y_gpu.data(), buffers, workspace.data(),
                                 bytes);

        // y against the reference convolution of (the prologue applied to) x in fp32.
        std::vector<float> input = x;
        if (prologue) {
          for (size_t i = 0; i < input.size(); ++i) {
            const int channel = channel_of(g.input, i);
            input[i] = std::max(0.0f, x[i] * scale[static_cast<size_t>(channel)] + shift[static_cast<size_t>(channel)]);
          }
        }
        const ConvGeometry g32 = conv_geometry(c, format, DataType::f32);
        std::vector<unsigned char> reference_workspace(reference.conv2d_workspace_bytes(g32));
        HostTensor x_ref(DataType::f32, input), w_ref(DataType::f32, w), y_ref(DataType::f32, g32.output.count());
        reference.conv2d_forward(g32, x_ref.data(), w_ref.data(), y_ref.data(), reference_workspace.data(),
                                 reference_workspace.size());
        // The prologue's inputs reach 2.5 in magnitude (mean about 0.6 where kept), not 1; its
        // intermediates are x's type, so each input may be rounded twice (product, sum) before
        // the convolution multiplies it.
        const double terms = static_cast<double>(g.filter.c) * g.filter.r * g.filter.s;
        Tolerance forward = prologue ? conv_tolerance(type, terms, 0.6) : forward_tolerance(g);
        if (prologue) forward.atol += terms * 2.5 * 2 * storage_rtol(type);
        const std::vector<float> y = y_gpu.values();
        check_close(y, rounded(type, y_ref.values()), forward.atol, forward.rtol, "forward " + what);

        // The sums against the stored y's, in double: cuDNN may sum the fp32 results before their
        // rounding to the type, so each term may differ by one storage rounding, plus fp32
        // accumulation over (n, h, w).
        std::vector<double> sum(static_cast<size_t>(c.k), 0.0), square_sum(sum), magnitude(sum), square(sum);
        for (size_t i = 0; i < y.size(); ++i) {
          const size_t k = static_cast<size_t>(channel_of(g.output, i));
          sum[k] += y[i];
          square_sum[k] += static_cast<double>(y[i]) * y[i];
          magnitude[k] += std::fabs(y[i]);
        }
        const std::vector<float> sum_got = sum_gpu.download(), square_sum_got = square_sum_gpu.download();
        const double per_term = storage_rtol(type) + 8 * kEps;
        for (size_t k = 0; k < sum.size(); ++k) {
          INFO("channel " << k);
          CHECK(std::fabs(sum_got[k] - sum[k]) <= magnitude[k] * per_term + 1e-6);
          CHECK(std::fabs(square_sum_got[k] - square_sum[k]) <= square_sum[k] * 2.5 * per_term + 1e-6);
        }
      }
    }
  }
}

TEST_CASE("cudnn graph convolution plans are built once per geometry pass and epilogue",
          "[gpu]") {
  auto gpu = make_gpu();
  CudnnGraphConvolutions convs(*gpu, StreamKind::compute);
  Buffer workspace = gpu->allocate(kWorkspaceLimit, kTestWorkspace);
  const ConvGeometry g = conv_geometry(kGraphConvCases[1], DataFormat::nhwc, DataType::f16);
  ConvTensors tensors(*gpu, g, 7);
  GpuTensor &x = tensors.x, &w = tensors.w, &y = tensors.y;
  auto prepare = [&](const ConvGeometry& geometry, ConvPass pass, ConvEpilogue epilogue) {
    return convs.prepare(geometry, pass, epilogue, kWorkspaceLimit, x.data(), w.data(), y.data(),
                         nullptr, workspace.data());
  };
  const size_t first = prepare(g, ConvPass::forward, ConvEpilogue::none);
  CHECK(convs.plans_built() == 1);
  CHECK(prepare(g, ConvPass::forward, ConvEpilogue::none) == first);
  CHECK(convs.plans_built() == 1);
  CHECK(convs.describe(g, ConvPass::forward, ConvEpilogue::none).rfind("engine ", 0) == 0);
  // Running looks the plan up; it never builds.
  for (int step = 0; step < 3; ++step) {
    convs.forward(g, x.data(), w.data(), y.data(), workspace.data(), first);
  }
  gpu->synchronize();
  CHECK(convs.plans_built() == 1);

  // Each pass, epilogue, type and layout is a plan of its own.
  prepare(g, ConvPass::backward_data, ConvEpilogue::none);
  CHECK(convs.plans_built() == 2);
  prepare(g, ConvPass::backward_data, ConvEpilogue::accumulate);
  CHECK(convs.plans_built() == 3);
  prepare(g, ConvPass::backward_filter, ConvEpilogue::none);
  CHECK(convs.plans_built() == 4);
  prepare(conv_geometry(kGraphConvCases[1], DataFormat::nhwc, DataType::bf16), ConvPass::forward,
          ConvEpilogue::none);
  CHECK(convs.plans_built() == 5);
  prepare(conv_geometry(kGraphConvCases[1], DataFormat::nchw, DataType::f16), ConvPass::forward,
          ConvEpilogue::none);
  CHECK(convs.plans_built() == 6);
}

TEST_CASE("cudnn graph convolutions refuse unprepared plans and impossible requests", "[gpu]") {
  auto gpu = make_gpu();
  CudnnGraphConvolutions convs(*gpu, StreamKind::compute);
  Buffer workspace = gpu->allocate(kWorkspaceLimit, kTestWorkspace);
  const ConvGeometry g = conv_geometry(kGraphConvCases[0], DataFormat::nhwc, DataType::bf16);
  ConvTensors tensors(*gpu, g, 9);
  GpuTensor &x = tensors.x, &w = tensors.w, &y = tensors.y;
  GpuArray<float> bias(*gpu, random_vector(static_cast<size_t>(g.output.c), 11));

  CHECK_THROWS_AS(convs.forward(g, x.data(), w.data(), y.data(), workspace.data(), kWorkspaceLimit),
                  RuntimeError);
  CHECK_THROWS_AS(convs.describe(g, ConvPass::forward, ConvEpilogue::none), RuntimeError);
  // bias + relu belongs to the forward pass and needs a bias; accumulating to backward data.
  CHECK_THROWS_AS(convs.prepare(g, ConvPass::backward_data, ConvEpilogue::bias_relu,
                                kWorkspaceLimit, x.data(), w.data(), y.data(), bias.data(),
                                workspace.data()),
                  RuntimeError);
  CHECK_THROWS_AS(convs.prepare(g, ConvPass::forward, ConvEpilogue::bias_relu, kWorkspaceLimit,
                                x.data(), w.data(), y.data(), nullptr, workspace.data()),
                  RuntimeError);
  CHECK_THROWS_AS(convs.prepare(g, ConvPass::forward, ConvEpilogue::accumulate, kWorkspaceLimit,
                                x.data(), w.data(), y.data(), nullptr, workspace.data()),
                  RuntimeError);
  // The statistics need their sums (prepare_statistics), and the prologue its scale and bias.
  CHECK_THROWS_AS(convs.prepare(g, ConvPass::forward, ConvEpilogue::statistics, kWorkspaceLimit,
                                x.data(), w.data(), y.data(), nullptr, workspace.data()),
                  RuntimeError);
  GpuArray<float> sums(*gpu, static_cast<size_t>(2 * g.output.c));
  const ConvStatisticsBuffers no_scale{sums.data(), sums.data() + g.output.c, nullptr, nullptr};
  CHECK_THROWS_AS(convs.prepare_statistics(g, ConvEpilogue::input_scale_bias_relu_statistics, kWorkspaceLimit,
                                           x.data(), w.data(), y.data(), no_scale, workspace.data()),
                  RuntimeError);
  CHECK_THROWS_AS(convs.prepare_statistics(g, ConvEpilogue::bias_relu, kWorkspaceLimit, x.data(), w.data(),
                                           y.data(), no_scale, workspace.data()),
                  RuntimeError);
  // A filter whose channels are not the input's.
  ConvGeometry inconsistent = g;
  inconsistent.filter.c += 1;
  CHECK_THROWS_AS(convs.prepare(inconsistent, ConvPass::forward, ConvEpilogue::none,
                                kWorkspaceLimit, x.data(), w.data(), y.data(), nullptr,
                                workspace.data()),
                  RuntimeError);
  // Every plan is promised 16-byte aligned buffers; one element in, a bf16 buffer is not.
  GpuTensor misaligned(*gpu, DataType::bf16, g.input.count(), /*offset=*/1);
  CHECK_THROWS_AS(convs.prepare(g, ConvPass::forward, ConvEpilogue::none, kWorkspaceLimit,
                                misaligned.data(), w.data(), y.data(), nullptr, workspace.data()),
                  RuntimeError);
  CHECK(convs.plans_built() == 0);

  // A workspace smaller than prepare() asked for, where some geometry needs one at all.
  const ConvCase candidates[] = {{8, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1},
                                 {8, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1},
                                 {32, 128, 28, 28, 128, 5, 5, 1, 1, 2, 2}};
  bool tested = false;
  for (const ConvCase& c : candidates) {
    const ConvGeometry big = conv_geometry(c, DataFormat::nhwc, DataType::bf16);
    ConvTensors tensors_of_big(*gpu, big, 20);
    void* big_x = tensors_of_big.x.data();
    void* big_dw = tensors_of_big.w.data();
    void* big_dy = tensors_of_big.y.data();
    const size_t needed =
        convs.prepare(big, ConvPass::backward_filter, ConvEpilogue::none, kWorkspaceLimit, big_x,
                      big_dw, big_dy, nullptr, workspace.data());
    if (needed == 0) continue;
    INFO(describe(big) << " needs " << needed << " bytes");
    CHECK_THROWS_AS(
        convs.backward_filter(big, big_x, big_dy, big_dw, workspace.data(), needed - 1),
        RuntimeError);
    CHECK_THROWS_AS(convs.backward_filter(big, big_x, big_dy, big_dw, nullptr, 0), RuntimeError);
    // Refusing touched nothing: the device goes on working with the right workspace.
    convs.backward_filter(big, big_x, big_dy, big_dw, workspace.data(), needed);
    gpu->synchronize();
    tested = true;
    break;
  }
  if (!tested) WARN("no candidate geometry needed a workspace; the refusal went untested");
}

// The per-step calls are what a captured training step replays: once prepared, a plan runs inside
// a CUDA graph; preparing a new geometry inside one is refused (it would time, so synchronise).
TEST_CASE("cudnn graph convolutions run inside a captured cuda graph once prepared", "[gpu]") {
  auto gpu = make_gpu();
  CudnnGraphConvolutions convs(*gpu, StreamKind::compute);
  ReferenceBackend reference;
  Buffer workspace = gpu->allocate(kWorkspaceLimit, kTestWorkspace);
  const DataType type = DataType::bf16;
  const ConvGeometry g = conv_geometry(kGraphConvCases[0], DataFormat::nhwc, type);
  const std::vector<float> x = rounded(type, random_vector(g.input.count(), 12));
  const std::vector<float> w = rounded(type, random_vector(g.filter.count(), 13));
  GpuTensor x_gpu(*gpu, type, x), w_gpu(*gpu, type, w), y_gpu(*gpu, type, g.output.count());
  const size_t bytes = convs.prepare(g, ConvPass::forward, ConvEpilogue::none, kWorkspaceLimit,
                                     x_gpu.data(), w_gpu.data(), y_gpu.data(), nullptr,
                                     workspace.data());

  std::unique_ptr<CapturedWork> captured = gpu->capture(
      [&] { convs.forward(g, x_gpu.data(), w_gpu.data(), y_gpu.data(), workspace.data(), bytes); });
  REQUIRE(captured != nullptr);
  y_gpu.upload(random_vector(g.output.count(), 1));
  captured->launch();
  gpu->synchronize();
  std::vector<unsigned char> reference_workspace(reference.conv2d_workspace_bytes(g));
  HostTensor x_ref(type, x), w_ref(type, w), y_ref(type, g.output.count());
  reference.conv2d_forward(g, x_ref.data(), w_ref.data(), y_ref.data(),
                           reference_workspace.data(), reference_workspace.size());
  const Tolerance forward = forward_tolerance(g);
  check_close(y_gpu.values(), y_ref.values(), forward.atol, forward.rtol,
              "captured forward " + describe(g));

  const ConvGeometry other = conv_geometry(kGraphConvCases[1], DataFormat::nhwc, type);
  ConvTensors tensors_of_other(*gpu, other, 30);
  CHECK_THROWS_AS(gpu->capture([&] {
    convs.prepare(other, ConvPass::forward, ConvEpilogue::none, kWorkspaceLimit,
                  tensors_of_other.x.data(), tensors_of_other.w.data(), tensors_of_other.y.data(),
                  nullptr, workspace.data());
  }),
                  RuntimeError);
  CHECK(convs.plans_built() == 1);
  // The abandoned capture left the stream usable.
  convs.forward(g, x_gpu.data(), w_gpu.data(), y_gpu.data(), workspace.data(), bytes);
  gpu->synchronize();
}
