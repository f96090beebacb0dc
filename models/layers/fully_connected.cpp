// Fully connected layer: the dense layer's GEMMs on the flattened input.
#include "models/layers/fully_connected.h"

#include "models/model_flops.h"

namespace dpbench {

StepFlops FullyConnectedLayer::flops(bool input_gradient) const {
  return matmul_flops(input_.n, static_cast<double>(input_.c) * input_.h * input_.w, dense_.outputs(), input_gradient);
}

namespace {

// The fp32 copy of a 16-bit input, kept from forward for the weight gradient.
struct WidenedInputState : LayerState {
  Buffer input;
};

}  // namespace

FullyConnectedLayer::FullyConnectedLayer(ParameterLayout& layout, const std::string& name,
                                         const Tensor4& input, int outputs)
    : Layer(name, Tensor4{input.n, outputs, 1, 1, input.format, DataType::f32}),
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

std::unique_ptr<LayerState> FullyConnectedLayer::create_state(Device& device,
                                                              const ReplicaShard&) const {
  if (input_.type == DataType::f32) return nullptr;
  auto state = std::make_unique<WidenedInputState>();
  state->input = device.allocate(sizeof(float) * input_.count());
  return state;
}

size_t FullyConnectedLayer::workspace_bytes(Backend&) const {
  // The fp32 input gradient, before it is narrowed into the 16-bit dx.
  return input_.type == DataType::f32 ? 0 : sizeof(float) * input_.count();
}

void FullyConnectedLayer::forward(const LayerPass& pass, const int32_t*) const {
  const float* x = static_cast<const float*>(pass.x[0]);
  if (input_.type != DataType::f32) {
    float* widened = static_cast<WidenedInputState&>(*pass.state).input.as<float>();
    pass.ops->convert(input_.type, pass.x[0], DataType::f32, widened, input_.count());
    x = widened;
  }
  dense_.forward(*pass.ops, *pass.params, x, static_cast<float*>(pass.y), input_.n);
}

void FullyConnectedLayer::backward(const LayerPass& pass, const int32_t*) const {
  const float* dy = static_cast<const float*>(pass.dy);
  if (input_.type == DataType::f32) {
    dense_.backward(*pass.ops, *pass.params, static_cast<const float*>(pass.x[0]), dy,
                    static_cast<float*>(pass.dx[0]), input_.n);
    return;
  }
  const float* widened = static_cast<WidenedInputState&>(*pass.state).input.as<float>();
  float* dx = pass.dx[0] != nullptr ? static_cast<float*>(pass.workspace) : nullptr;
  dense_.backward(*pass.ops, *pass.params, widened, dy, dx, input_.n);
  if (dx != nullptr) pass.ops->convert(DataType::f32, dx, input_.type, pass.dx[0], input_.count());
}

}  // namespace dpbench
