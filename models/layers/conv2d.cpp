// Convolution forward and backward (data, filter, bias, fused ReLU) on the backend.
#include "models/layers/conv2d.h"

#include <algorithm>

#include "models/model_flops.h"

namespace dpbench {

StepFlops Conv2dLayer::flops(bool input_gradient) const { return conv_flops(geometry_, input_gradient); }

namespace {

// Workspace offsets stay aligned for cuDNN and vector loads.
size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

ConvGeometry geometry_of(const Tensor4& input, const Conv2dOptions& o) {
  return make_conv_geometry(input, o.out_channels, o.kernel_h, o.kernel_w, o.stride, o.stride,
                            o.padding, o.pad_h, o.pad_w);
}

}  // namespace

Conv2dLayer::Conv2dLayer(ParameterLayout& layout, const std::string& name, const Tensor4& input,
                         const Conv2dOptions& options)
    : Layer(name, geometry_of(input, options).output),
      geometry_(geometry_of(input, options)),
      relu_(options.relu) {
  const FilterShape& f = geometry_.filter;
  weights_id_ = declare_parameter(layout, "weights", {f.k, f.c, f.r, f.s});
  if (options.bias) bias_id_ = declare_parameter(layout, "bias", {f.k});
}

void Conv2dLayer::initialize(const ParameterLayout& layout, uint64_t seed,
                             std::vector<float>& host_params) const {
  const FilterShape& f = geometry_.filter;
  const int64_t fan_in = static_cast<int64_t>(f.c) * f.r * f.s;
  float* weights = host_params.data() + layout.tensor(weights_id_).offset;
  uint64_t logical = 0;  // ((k * c + in) * r + y) * s + x
  for (int k = 0; k < f.k; ++k)
    for (int in = 0; in < f.c; ++in)
      for (int y = 0; y < f.r; ++y)
        for (int x = 0; x < f.s; ++x)
          weights[f.offset(k, in, y, x)] = he_uniform(seed, weights_id_, logical++, fan_in);
  if (bias_id_ >= 0) {
    const TensorView& bias = layout.tensor(bias_id_);
    std::fill_n(host_params.begin() + static_cast<std::ptrdiff_t>(bias.offset), bias.count, 0.0f);
  }
}

size_t Conv2dLayer::filter_gradient_staging_bytes() const {
  // A 16-bit convolution's filter gradient comes out 16-bit (cuDNN wants one type for x, dy
  // and dw) and is widened into the fp32 gradient buffer from here.
  return geometry_.filter.type == DataType::f32 ? 0 : aligned(geometry_.filter.bytes());
}

size_t Conv2dLayer::workspace_bytes(Backend& ops) const {
  // The bias gradient's partial sums and the convolution passes use the workspace in turn,
  // after the staged filter gradient.
  const size_t bias = bias_id_ >= 0 ? ops.channel_bias_workspace_bytes(geometry_.output) : 0;
  const size_t convolution = bias_id_ >= 0        ? ops.conv2d_bias_workspace_bytes(geometry_, relu_)
                             : output_statistics_ ? ops.conv2d_statistics_workspace_bytes(geometry_)
                                                  : ops.conv2d_workspace_bytes(geometry_);
  return filter_gradient_staging_bytes() + std::max(convolution, bias);
}

void Conv2dLayer::forward(const LayerPass& pass, const int32_t*) const {
  Backend& ops = *pass.ops;
  const void* weights = pass.params->parameter_as(weights_id_, geometry_.filter.type);
  if (bias_id_ >= 0) {
    // One fused kernel where the backend has one (VGG's and the CIFAR CNN's conv + bias + ReLU).
    ops.conv2d_forward_bias(geometry_, pass.x[0], weights, pass.params->parameter(bias_id_), relu_, pass.y,
                            pass.workspace, pass.workspace_bytes);
    return;
  }
  if (pass.y_statistics != nullptr) {
    ops.conv2d_forward_statistics(geometry_, pass.x[0], weights, pass.y, pass.y_statistics, pass.workspace,
                                  pass.workspace_bytes);
  } else {
    ops.conv2d_forward(geometry_, pass.x[0], weights, pass.y, pass.workspace, pass.workspace_bytes);
  }
  if (relu_) ops.relu_forward(geometry_.output.type, pass.y, pass.y, geometry_.output.count());
}

void Conv2dLayer::backward(const LayerPass& pass, const int32_t*) const {
  Backend& ops = *pass.ops;
  // First the ReLU's mask goes into dy (in place; this layer owns its output gradient), unless
  // the reader already applied it, then the convolution's passes read the masked dy.
  const bool mask = relu_ && !output_gradient_masked_;
  if (bias_id_ >= 0) {
    ops.channel_bias_gradient(geometry_.output, pass.y, pass.dy, pass.params->gradient(bias_id_),
                              mask, pass.workspace);
  } else if (mask) {
    ops.relu_backward(geometry_.output.type, pass.y, pass.dy, pass.dy, geometry_.output.count());
  }
  const size_t staging = filter_gradient_staging_bytes();
  void* workspace = static_cast<char*>(pass.workspace) + staging;
  const size_t workspace_bytes = pass.workspace_bytes - staging;
  float* dw = pass.params->gradient(weights_id_);
  if (staging == 0) {
    ops.conv2d_backward_filter(geometry_, pass.x[0], pass.dy, dw, workspace, workspace_bytes);
  } else {
    ops.conv2d_backward_filter(geometry_, pass.x[0], pass.dy, pass.workspace, workspace,
                               workspace_bytes);
    ops.convert(geometry_.filter.type, pass.workspace, DataType::f32, dw, geometry_.filter.count());
  }
  if (pass.dx[0] != nullptr)
    ops.conv2d_backward_data(geometry_, pass.dy,
                             pass.params->parameter_as(weights_id_, geometry_.filter.type),
                             pass.dx[0], workspace, workspace_bytes,
                             !pass.accumulate_dx.empty() && pass.accumulate_dx[0]);
}

}  // namespace dpbench
