// The reference convolutions (im2col + gemm) against the textbook 7-deep loops in double, cases
// small enough to work out by hand, and finite differences; plus the output-size arithmetic. In
// fp16 and bf16, against the fp32 convolutions of the same stored values, rounded.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/backend/cnn_geometry.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "tests/host/reference_cnn_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;

namespace {

// Calls visit(x_offset, w_offset, y_offset) for every (b, k, oh, ow, c, r, s) whose tap lands
// inside the input: the definition of the convolution, with no cleverness at all.
template <typename Visit>
void for_each_product(const ConvGeometry& g, Visit visit) {
  const Tensor4& in = g.input;
  const Tensor4& out = g.output;
  const FilterShape& f = g.filter;
  for (int b = 0; b < out.n; ++b)
    for (int k = 0; k < out.c; ++k)
      for (int oh = 0; oh < out.h; ++oh)
        for (int ow = 0; ow < out.w; ++ow)
          for (int c = 0; c < in.c; ++c)
            for (int r = 0; r < f.r; ++r)
              for (int s = 0; s < f.s; ++s) {
                const int ih = oh * g.stride_h - g.pad_h + r;
                const int iw = ow * g.stride_w - g.pad_w + s;
                if (ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) continue;  // zero padding
                visit(in.offset(b, c, ih, iw), f.offset(k, c, r, s), out.offset(b, k, oh, ow));
              }
}

std::vector<double> direct_forward(const ConvGeometry& g, const std::vector<float>& x,
                                   const std::vector<float>& w) {
  std::vector<double> y(g.output.count(), 0.0);
  for_each_product(g, [&](size_t xi, size_t wi, size_t yi) { y[yi] += double(x[xi]) * w[wi]; });
  return y;
}

std::vector<double> direct_backward_data(const ConvGeometry& g, const std::vector<float>& dy,
                                         const std::vector<float>& w) {
  std::vector<double> dx(g.input.count(), 0.0);
  for_each_product(g, [&](size_t xi, size_t wi, size_t yi) { dx[xi] += double(dy[yi]) * w[wi]; });
  return dx;
}

std::vector<double> direct_backward_filter(const ConvGeometry& g, const std::vector<float>& x,
                                           const std::vector<float>& dy) {
  std::vector<double> dw(g.filter.count(), 0.0);
  for_each_product(g, [&](size_t xi, size_t wi, size_t yi) { dw[wi] += double(dy[yi]) * x[xi]; });
  return dw;
}

struct ConvCase {
  int n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w;
};

ConvGeometry geometry_of(const ConvCase& cc, DataFormat format,
                         DataType type = DataType::f32) {
  return make_conv_geometry(Tensor4{cc.n, cc.c, cc.h, cc.w, format, type}, cc.k, cc.r, cc.s,
                            cc.stride_h, cc.stride_w, Padding::explicit_symmetric, cc.pad_h,
                            cc.pad_w);
}

std::string name_of(const ConvGeometry& g) {
  return describe(g.input) + " k" + std::to_string(g.filter.k) + " " + std::to_string(g.filter.r) +
         "x" + std::to_string(g.filter.s) + " stride " + std::to_string(g.stride_h) + "x" +
         std::to_string(g.stride_w) + " pad " + std::to_string(g.pad_h) + "x" +
         std::to_string(g.pad_w);
}

const DataFormat kFormats[] = {DataFormat::nchw, DataFormat::nhwc};

}  // namespace

TEST_CASE("reference conv: all three passes match the direct loops", "[reference_cnn]") {
  const ConvCase cases[] = {
      {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1},     // 3x3 "same"
      {1, 5, 9, 8, 3, 3, 2, 2, 1, 1, 0},     // non-square kernel, unequal strides
      {2, 4, 5, 5, 6, 1, 1, 1, 1, 0, 0},     // 1x1
      {2, 3, 8, 7, 2, 1, 1, 2, 2, 0, 0},     // 1x1 stride 2 (ResNet's projection shortcut)
      {1, 2, 11, 10, 3, 5, 3, 2, 3, 2, 1},   // stride leaves input columns unread
      {1, 3, 6, 7, 4, 7, 1, 1, 1, 3, 0},     // 7x1 (Inception-v3)
      {1, 3, 4, 4, 2, 3, 3, 1, 1, 2, 2},     // padding wider than the kernel needs
      {1, 3, 15, 15, 8, 7, 7, 2, 2, 3, 3},   // ResNet's stem
      {2, 64, 90, 90, 2, 3, 3, 1, 1, 1, 1},  // several column chunks, one straddling two images
  };
  ReferenceBackend ops;
  for (const ConvCase& cc : cases) {
    for (DataFormat format : kFormats) {
      const ConvGeometry g = geometry_of(cc, format);
      INFO(name_of(g));
      const std::vector<float> x = random_values(g.input.count(), 1);
      const std::vector<float> w = random_values(g.filter.count(), 2);
      const std::vector<float> dy = random_values(g.output.count(), 3);
      std::vector<float> y(g.output.count()), dx(g.input.count()), dw(g.filter.count());
      ops.conv2d_forward(g, x.data(), w.data(), y.data(), nullptr, 0);
      ops.conv2d_backward_data(g, dy.data(), w.data(), dx.data(), nullptr, 0);
      ops.conv2d_backward_filter(g, x.data(), dy.data(), dw.data(), nullptr, 0);
      // Both sides sum exactly in double; the reference rounds once to float (forward,
      // backward_filter) or once per tap before summing at most r*s taps (backward_data).
      // Terms are at most 1 in size and at most a few thousand per sum, so 1e-5 relative plus
      // 1e-5 absolute (for sums that cancel) covers those roundings with room to spare, while
      // any wrong tap, layout or padding error moves a result by a whole term (~0.1 or more).
      check_close(y, direct_forward(g, x, w), 1e-5, 1e-5, "forward");
      check_close(dx, direct_backward_data(g, dy, w), 1e-5, 1e-5, "backward_data");
      check_close(dw, direct_backward_filter(g, x, dy), 1e-5, 1e-5, "backward_filter");

      // accumulate adds to what dx holds (a tensor with several readers)
      std::vector<float> sum = random_values(g.input.count(), 4);
      std::vector<double> expected = direct_backward_data(g, dy, w);
      for (size_t i = 0; i < sum.size(); ++i) expected[i] += sum[i];
      ops.conv2d_backward_data(g, dy.data(), w.data(), sum.data(), nullptr, 0, /*accumulate=*/true);
      check_close(sum, expected, 1e-5, 1e-5, "backward_data accumulating");
    }
  }
}

TEST_CASE("reference conv: a 1x1x3x3 input with a 2x2 kernel, by hand", "[reference_cnn]") {
  ReferenceBackend ops;
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // (3, 3)
  const std::vector<float> w = {1, 2, 3, 4};                 // (2, 2)
  for (DataFormat format : kFormats) {  // one image of one channel: both layouts store it alike
    INFO(data_format_name(format));
    const Tensor4 input{1, 1, 3, 3, format};
    std::vector<float> y(4), dx(9), dw(4);

    ConvGeometry valid = make_conv_geometry(input, 1, 2, 2, 1, 1, Padding::valid);
    ops.conv2d_forward(valid, x.data(), w.data(), y.data(), nullptr, 0);
    CHECK(y == std::vector<float>{37, 47, 67, 77});  // e.g. 1*1 + 2*2 + 4*3 + 5*4 = 37
    const std::vector<float> ones(4, 1.0f);
    ops.conv2d_backward_filter(valid, x.data(), ones.data(), dw.data(), nullptr, 0);
    CHECK(dw == std::vector<float>{12, 16, 24, 28});  // each tap's sum over the 4 windows
    ops.conv2d_backward_data(valid, ones.data(), w.data(), dx.data(), nullptr, 0);
    // each input element collects the weights of the taps that covered it
    CHECK(dx == std::vector<float>{1, 3, 2, 4, 10, 6, 3, 7, 4});

    // Pad 1, stride 2: windows start at -1 and 1; e.g. the first sees only x(0,0) under w(1,1).
    ConvGeometry strided =
        make_conv_geometry(input, 1, 2, 2, 2, 2, Padding::explicit_symmetric, 1, 1);
    REQUIRE(strided.output.h == 2);
    ops.conv2d_forward(strided, x.data(), w.data(), y.data(), nullptr, 0);
    CHECK(y == std::vector<float>{4, 18, 36, 77});
  }
}

TEST_CASE("reference conv: filter layouts KCRS and KRSC hold the same logical weights",
          "[reference_cnn]") {
  // Two input channels, one output channel, 1x2 kernel: the layouts differ, the result may not.
  ReferenceBackend ops;
  const float x_logical[2][1][2] = {{{1, 2}}, {{10, 20}}};  // (c, h, w)
  const float w_logical[2][2] = {{1, -1}, {3, 5}};          // (c, s)
  for (DataFormat format : kFormats) {
    INFO(data_format_name(format));
    const ConvGeometry g = make_conv_geometry(Tensor4{1, 2, 1, 2, format}, 1, 1, 2, 1, 1,
                                              Padding::valid);
    std::vector<float> x(4), w(4), y(1);
    for (int c = 0; c < 2; ++c) {
      for (int s = 0; s < 2; ++s) {
        x[g.input.offset(0, c, 0, s)] = x_logical[c][0][s];
        w[g.filter.offset(0, c, 0, s)] = w_logical[c][s];
      }
    }
    ops.conv2d_forward(g, x.data(), w.data(), y.data(), nullptr, 0);
    CHECK(y[0] == 1 * 1 - 2 * 1 + 10 * 3 + 20 * 5);
  }
}

TEST_CASE("reference conv: backward passes are the finite-difference gradients",
          "[reference_cnn]") {
  ReferenceBackend ops;
  for (DataFormat format : kFormats) {
    INFO(data_format_name(format));
    const ConvGeometry g = make_conv_geometry(Tensor4{1, 2, 4, 5, format}, 2, 3, 2, 2, 1,
                                              Padding::explicit_symmetric, 1, 1);
    std::vector<float> x = random_values(g.input.count(), 11);
    std::vector<float> w = random_values(g.filter.count(), 12);
    const std::vector<float> weights = random_values(g.output.count(), 13);  // d loss / dy
    std::vector<float> y(g.output.count());
    auto loss = [&] {
      ops.conv2d_forward(g, x.data(), w.data(), y.data(), nullptr, 0);
      return weighted_sum(y, weights);
    };
    std::vector<float> dx(x.size()), dw(w.size());
    ops.conv2d_backward_data(g, weights.data(), w.data(), dx.data(), nullptr, 0);
    ops.conv2d_backward_filter(g, x.data(), weights.data(), dw.data(), nullptr, 0);
    // The loss is linear in x and in w, so the differences carry no truncation error and a large
    // step (1/8) only shrinks the float noise of y: |y| <= 12 rounds by < 1e-6 each, a dozen of
    // them over a step of 1/4 stays below 1e-4. 1e-3 is ample and far below a wrong term (~0.1).
    std::vector<double> fd_x(x.size()), fd_w(w.size());
    for (size_t i = 0; i < x.size(); ++i) fd_x[i] = finite_difference(x[i], 0.125, loss);
    for (size_t i = 0; i < w.size(); ++i) fd_w[i] = finite_difference(w[i], 0.125, loss);
    check_close(dx, fd_x, 1e-3, 1e-3, "dx");
    check_close(dw, fd_w, 1e-3, 1e-3, "dw");
  }
}

TEST_CASE("reference conv: a geometry that contradicts itself is refused", "[reference_cnn]") {
  ReferenceBackend ops;
  ConvGeometry g = make_conv_geometry(Tensor4{1, 2, 4, 4, DataFormat::nchw}, 3, 3, 3, 1, 1,
                                      Padding::same);
  CHECK(ops.conv2d_workspace_bytes(g) == 0);
  std::vector<float> buffer(1024);
  g.output.h = 5;
  CHECK_THROWS_AS(ops.conv2d_forward(g, buffer.data(), buffer.data(), buffer.data(), nullptr, 0),
                  RuntimeError);
  g.output.h = 4;
  g.filter.format = DataFormat::nhwc;
  CHECK_THROWS_AS(
      ops.conv2d_backward_data(g, buffer.data(), buffer.data(), buffer.data(), nullptr, 0),
      RuntimeError);
}

TEST_CASE("reference conv in fp16 and bf16: the fp32 passes on the stored values, rounded",
          "[reference_cnn]") {
  const ConvCase cases[] = {
      {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1},     // 3x3 "same"
      {1, 5, 9, 8, 3, 3, 2, 2, 1, 1, 0},     // non-square kernel, unequal strides
      {2, 3, 8, 7, 2, 1, 1, 2, 2, 0, 0},     // 1x1 stride 2
      {1, 3, 15, 15, 8, 7, 7, 2, 2, 3, 3},   // ResNet's stem
      {2, 64, 90, 90, 2, 3, 3, 1, 1, 1, 1},  // several column chunks
  };
  ReferenceBackend ops;
  for (DataType type : kHalfTypes) {
    for (const ConvCase& cc : cases) {
      for (DataFormat format : kFormats) {
        const ConvGeometry g = geometry_of(cc, format, type);
        const ConvGeometry g32 = geometry_of(cc, format);
        INFO(name_of(g));
        REQUIRE(g.filter.type == type);
        REQUIRE(g.output.type == type);
        const std::vector<float> x = random_values(g.input.count(), 1);
        const std::vector<float> w = random_values(g.filter.count(), 2);
        const std::vector<float> dy = random_values(g.output.count(), 3);
        const std::vector<float> dx_before = random_values(g.input.count(), 4);
        const TypedBuffer x16(type, x), w16(type, w), dy16(type, dy);
        // The fp32 passes see exactly the values the 16-bit buffers hold.
        const std::vector<float> xr = x16.values(), wr = w16.values(), dyr = dy16.values();

        std::vector<float> y(g.output.count()), dx(g.input.count()), dw(g.filter.count());
        ops.conv2d_forward(g32, xr.data(), wr.data(), y.data(), nullptr, 0);
        ops.conv2d_backward_data(g32, dyr.data(), wr.data(), dx.data(), nullptr, 0);
        ops.conv2d_backward_filter(g32, xr.data(), dyr.data(), dw.data(), nullptr, 0);
        // Otherwise an unrounded output could pass for a rounded one. (A stride of 2 leaves most
        // of dx at an exact zero.)
        REQUIRE(changed_by_rounding(type, y) > y.size() / 2);
        REQUIRE(changed_by_rounding(type, dx) > dx.size() / 8);
        REQUIRE(changed_by_rounding(type, dw) > dw.size() / 2);

        TypedBuffer y16(type, g.output.count(), 0.0f), dx16(type, g.input.count(), 0.0f);
        TypedBuffer dw16(type, g.filter.count(), 0.0f);
        ops.conv2d_forward(g, x16.data(), w16.data(), y16.data(), nullptr, 0);
        ops.conv2d_backward_data(g, dy16.data(), w16.data(), dx16.data(), nullptr, 0);
        ops.conv2d_backward_filter(g, x16.data(), dy16.data(), dw16.data(), nullptr, 0);
        check_same_bits(y16.values(), rounded(type, y), "forward");
        check_same_bits(dx16.values(), rounded(type, dx), "backward_data");
        check_same_bits(dw16.values(), rounded(type, dw), "backward_filter");

        // accumulate: the stored dx plus the new sum, rounded once.
        TypedBuffer sum16(type, dx_before);
        std::vector<float> sum = sum16.values();
        ops.conv2d_backward_data(g32, dyr.data(), wr.data(), sum.data(), nullptr, 0, true);
        ops.conv2d_backward_data(g, dy16.data(), w16.data(), sum16.data(), nullptr, 0, true);
        check_same_bits(sum16.values(), rounded(type, sum), "backward_data accumulating");
      }
    }
  }
}

TEST_CASE("reference conv: input, filter and output must share one type", "[reference_cnn]") {
  ReferenceBackend ops;
  const ConvGeometry g = make_conv_geometry(Tensor4{1, 2, 4, 4, DataFormat::nhwc, DataType::f16},
                                            3, 3, 3, 1, 1, Padding::same);
  std::vector<float> buffer(1024);
  ConvGeometry filter_fp32 = g;
  filter_fp32.filter.type = DataType::f32;
  CHECK_THROWS_AS(
      ops.conv2d_forward(filter_fp32, buffer.data(), buffer.data(), buffer.data(), nullptr, 0),
      RuntimeError);
  ConvGeometry output_bf16 = g;
  output_bf16.output.type = DataType::bf16;
  CHECK_THROWS_AS(ops.conv2d_backward_filter(output_bf16, buffer.data(), buffer.data(),
                                             buffer.data(), nullptr, 0),
                  RuntimeError);
  CHECK_NOTHROW(ops.conv2d_forward(g, buffer.data(), buffer.data(), buffer.data(), nullptr, 0));
}

TEST_CASE("cnn geometry: output sizes of the models' layers", "[reference_cnn]") {
  const Tensor4 image{2, 3, 224, 224, DataFormat::nhwc};
  // ResNet's stem: 7x7 stride 2 pad 3 halves 224.
  const ConvGeometry stem =
      make_conv_geometry(image, 64, 7, 7, 2, 2, Padding::explicit_symmetric, 3, 3);
  CHECK(stem.output == Tensor4{2, 64, 112, 112, DataFormat::nhwc});
  CHECK(stem.filter.k == 64);
  CHECK(stem.filter.c == 3);
  CHECK(make_conv_geometry(image, 64, 7, 7, 2, 2, Padding::same).pad_h == 3);
  CHECK(make_conv_geometry(image, 64, 7, 7, 2, 2, Padding::same).output.h == 112);

  // Its 3x3 stride 2 pad 1 max pool: 112 -> 56.
  const PoolGeometry pool = make_pool_geometry(stem.output, PoolMode::max, 3, 3, 2, 2,
                                               Padding::explicit_symmetric, 1, 1);
  CHECK(pool.output == Tensor4{2, 64, 56, 56, DataFormat::nhwc});

  // Inception-v3's first conv: valid 3x3 stride 2 on 299 -> 149.
  const ConvGeometry inception = make_conv_geometry(Tensor4{1, 3, 299, 299, DataFormat::nchw}, 32,
                                                    3, 3, 2, 2, Padding::valid);
  CHECK(inception.output.h == 149);
  CHECK(inception.output.w == 149);
  CHECK(inception.pad_h == 0);

  // Non-square "same" (Inception's 1x7) keeps the size at stride 1.
  const ConvGeometry one_by_seven =
      make_conv_geometry(Tensor4{1, 8, 17, 17, DataFormat::nchw}, 8, 1, 7, 1, 1, Padding::same);
  CHECK(one_by_seven.output.h == 17);
  CHECK(one_by_seven.output.w == 17);
  CHECK(one_by_seven.pad_w == 3);

  CHECK_THROWS_AS(make_conv_geometry(Tensor4{1, 3, 2, 2, DataFormat::nchw}, 4, 3, 3, 1, 1,
                                     Padding::valid),
                  RuntimeError);
}
