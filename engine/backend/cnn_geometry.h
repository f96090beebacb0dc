// Shapes of the image ops (convolution, batch norm, pooling, channel slices) in either memory
// layout. A Tensor4 names the logical (n, c, h, w) and how it is stored; every backend op that
// touches images takes these, so the layout is decided once per layer, never per element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>

#include "engine/data_type.h"

namespace dpbench {

enum class DataFormat { nchw, nhwc };

inline const char* data_format_name(DataFormat format) {
  return format == DataFormat::nchw ? "NCHW" : "NHWC";
}

struct Tensor4 {
  int n = 0, c = 0, h = 0, w = 0;
  DataFormat format = DataFormat::nchw;
  DataType type = DataType::f32;  // element type of the buffer holding it

  size_t count() const { return static_cast<size_t>(n) * c * h * w; }
  size_t bytes() const { return count() * data_type_bytes(type); }
  // Flat offset of logical element (b, ch, y, x) in this layout.
  size_t offset(int b, int ch, int y, int x) const {
    return format == DataFormat::nchw
               ? ((static_cast<size_t>(b) * c + ch) * h + y) * w + x
               : ((static_cast<size_t>(b) * h + y) * w + x) * c + ch;
  }
  // Every field, for comparing shapes (==) and ordering them as the keys of plan caches (<).
  auto fields() const { return std::tie(n, c, h, w, format, type); }
  bool operator==(const Tensor4& o) const { return fields() == o.fields(); }
  bool operator<(const Tensor4& o) const { return fields() < o.fields(); }
};

// Filters are stored KCRS for NCHW activations and KRSC for NHWC (what cuDNN runs fastest).
struct FilterShape {
  int k = 0, c = 0, r = 0, s = 0;  // output channels, input channels, kernel height, width
  DataFormat format = DataFormat::nchw;
  DataType type = DataType::f32;  // the input's type

  size_t count() const { return static_cast<size_t>(k) * c * r * s; }
  size_t bytes() const { return count() * data_type_bytes(type); }
  size_t offset(int out, int in, int y, int x) const {
    return format == DataFormat::nchw ? ((static_cast<size_t>(out) * c + in) * r + y) * s + x
                                      : ((static_cast<size_t>(out) * r + y) * s + x) * c + in;
  }
  auto fields() const { return std::tie(k, c, r, s, format, type); }
  bool operator==(const FilterShape& o) const { return fields() == o.fields(); }
  bool operator<(const FilterShape& o) const { return fields() < o.fields(); }
};

// 2-D cross-correlation (as every framework's "convolution"), no bias, dilation 1, one group.
// Padding is symmetric (the same zeros before and after), as cuDNN and torchvision have it.
struct ConvGeometry {
  Tensor4 input;
  FilterShape filter;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;  // zeros on each side
  Tensor4 output;

  // Every field that changes a convolution's descriptors, element types included: equal
  // geometries share a plan, and the plan caches are ordered by them.
  auto fields() const { return std::tie(input, filter, stride_h, stride_w, pad_h, pad_w, output); }
  bool operator==(const ConvGeometry& o) const { return fields() == o.fields(); }
  bool operator<(const ConvGeometry& o) const { return fields() < o.fields(); }
};

// How a spatial extent is padded: `same` puts (window - 1) / 2 zeros on each side (odd windows:
// the output keeps the input's size at stride 1, as Keras' and torchvision's 3x3 "same"), `valid`
// none, `explicit_symmetric` the given pad on each side.
enum class Padding { same, valid, explicit_symmetric };

// Builds a geometry and its output shape: out = (in + 2 * pad - window) / stride + 1.
// Throws RuntimeError when the window does not fit.
ConvGeometry make_conv_geometry(const Tensor4& input, int out_channels, int kernel_h, int kernel_w,
                                int stride_h, int stride_w, Padding padding, int pad_h = 0,
                                int pad_w = 0);

// Average pooling either divides by the whole window (padding counted, torchvision's default and
// Inception-v3's branch pools) or by the elements inside the input only (TF's SAME average pool).
enum class PoolMode { max, average_include_padding, average_exclude_padding };

struct PoolGeometry {
  Tensor4 input;
  PoolMode mode = PoolMode::max;
  int window_h = 1, window_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;  // on each side
  Tensor4 output;
  // Max pooling whose input a ReLU made: its backward also drops the gradient of every input
  // element not above 0 (relu_backward on the input, in the same pass), so the ReLU's own
  // backward pass over the pool's largest tensor is not needed.
  bool relu_input = false;

  // What a pooling plan depends on: every field but relu_input (one plan serves a geometry with
  // and without it, see CudnnPlans).
  auto plan_fields() const {
    return std::tie(input, mode, window_h, window_w, stride_h, stride_w, pad_h, pad_w, output);
  }
};

PoolGeometry make_pool_geometry(const Tensor4& input, PoolMode mode, int window_h, int window_w,
                                int stride_h, int stride_w, Padding padding, int pad_h = 0,
                                int pad_w = 0);

std::string describe(const Tensor4& shape);
// "NCHW(n,c,h,w) * filter(k,c,r,s) stride AxB pad CxD -> NCHW(...)", for error messages.
std::string describe(const ConvGeometry& g);

}  // namespace dpbench
