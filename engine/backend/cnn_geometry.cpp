// Output-shape arithmetic for convolutions and pooling (TF's SAME/VALID rules, or explicit pads).
#include "engine/backend/cnn_geometry.h"

#include <algorithm>

#include "engine/errors.h"

namespace dpbench {
namespace {

struct Extent {
  int output = 0;
  int pad_before = 0;
};

// One spatial dimension: output size and the padding before the first element.
Extent spatial_extent(int input, int window, int stride, Padding padding, int explicit_pad,
                      const char* what) {
  Extent extent;
  switch (padding) {
    case Padding::valid:
      extent.output = input >= window ? (input - window) / stride + 1 : 0;
      break;
    case Padding::same:
    case Padding::explicit_symmetric: {
      const int pad = padding == Padding::same ? (window - 1) / 2 : explicit_pad;
      extent.pad_before = pad;
      extent.output = input + 2 * pad >= window ? (input + 2 * pad - window) / stride + 1 : 0;
      break;
    }
  }
  if (extent.output <= 0)
    throw RuntimeError(std::string(what) + ": a window of " + std::to_string(window) +
                       " does not fit an input of " + std::to_string(input));
  return extent;
}

}  // namespace

ConvGeometry make_conv_geometry(const Tensor4& input, int out_channels, int kernel_h, int kernel_w,
                                int stride_h, int stride_w, Padding padding, int pad_h, int pad_w) {
  ConvGeometry g;
  g.input = input;
  g.filter = FilterShape{out_channels, input.c, kernel_h, kernel_w, input.format, input.type};
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  const Extent h = spatial_extent(input.h, kernel_h, stride_h, padding, pad_h, "convolution");
  const Extent w = spatial_extent(input.w, kernel_w, stride_w, padding, pad_w, "convolution");
  g.pad_h = h.pad_before;
  g.pad_w = w.pad_before;
  g.output = Tensor4{input.n, out_channels, h.output, w.output, input.format, input.type};
  return g;
}

PoolGeometry make_pool_geometry(const Tensor4& input, PoolMode mode, int window_h, int window_w,
                                int stride_h, int stride_w, Padding padding, int pad_h, int pad_w) {
  PoolGeometry g;
  g.input = input;
  g.mode = mode;
  g.window_h = window_h;
  g.window_w = window_w;
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  const Extent h = spatial_extent(input.h, window_h, stride_h, padding, pad_h, "pooling");
  const Extent w = spatial_extent(input.w, window_w, stride_w, padding, pad_w, "pooling");
  g.pad_h = h.pad_before;
  g.pad_w = w.pad_before;
  g.output = Tensor4{input.n, input.c, h.output, w.output, input.format, input.type};
  return g;
}

std::string describe(const Tensor4& shape) {
  const std::string type = shape.type == DataType::f32 ? "" : std::string(" ") + data_type_name(shape.type);
  return std::string(data_format_name(shape.format)) + "(" + std::to_string(shape.n) + "," +
         std::to_string(shape.c) + "," + std::to_string(shape.h) + "," + std::to_string(shape.w) +
         ")" + type;
}

std::string describe(const ConvGeometry& g) {
  return describe(g.input) + " * filter(" + std::to_string(g.filter.k) + "," +
         std::to_string(g.filter.c) + "," + std::to_string(g.filter.r) + "," +
         std::to_string(g.filter.s) + ") stride " + std::to_string(g.stride_h) + "x" +
         std::to_string(g.stride_w) + " pad " + std::to_string(g.pad_h) + "x" +
         std::to_string(g.pad_w) + " -> " + describe(g.output);
}

}  // namespace dpbench
