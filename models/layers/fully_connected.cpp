// Fully connected layer: the dense layer's GEMMs on the flattened input.
#include "models/layers/fully_connected.h"

namespace dpbench {

FullyConnectedLayer::FullyConnectedLayer(ParameterLayout& layout, const std::string& name,
                                         const Tensor4& input, int outputs)
    : Layer(name, Tensor4{input.n, outputs, 1, 1, input.format}),
      input_(input),
      dense_(layout, name, input.c * input.h * input.w, outputs) {
  claim_parameters(dense_.weights_id(), dense_.bias_id());
}

void FullyConnectedLayer::initialize(const ParameterLayout& layout, uint64_t seed,
                                     std::vector<float>& host_params) const {
  const int outputs = dense_.outputs();
  const Tensor4 one_sample{1, input_.c, input_.h, input_.w, input_.format};
  float* weights = host_params.data() + layout.tensor(dense_.weights_id()).offset;  // (in, out)
  uint64_t logical_row = 0;  // (c * h + y) * w + x
  for (int c = 0; c < input_.c; ++c)
    for (int y = 0; y < input_.h; ++y)
      for (int x = 0; x < input_.w; ++x, ++logical_row) {
        float* row = weights + one_sample.offset(0, c, y, x) * outputs;
        for (int o = 0; o < outputs; ++o)
          row[o] = he_uniform(seed, dense_.weights_id(), logical_row * outputs + o, dense_.inputs());
      }
  const TensorView& bias = layout.tensor(dense_.bias_id());
  for (size_t i = 0; i < bias.count; ++i) host_params[bias.offset + i] = 0.0f;
}

void FullyConnectedLayer::forward(const LayerPass& pass, const int32_t*) const {
  dense_.forward(*pass.ops, *pass.params, pass.x[0], pass.y, input_.n);
}

void FullyConnectedLayer::backward(const LayerPass& pass, const int32_t*) const {
  dense_.backward(*pass.ops, *pass.params, pass.x[0], pass.dy, pass.dx[0], input_.n);
}

}  // namespace dpbench
