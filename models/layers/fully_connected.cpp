// Fully connected layer: the dense layer's GEMMs on the flattened input, in the run's 16-bit type
// under mixed precision.
#include "models/layers/fully_connected.h"

#include "engine/errors.h"
#include "models/model_flops.h"

namespace dpbench {

StepFlops FullyConnectedLayer::flops(bool input_gradient) const {
  return matmul_flops(input_.n, static_cast<double>(input_.c) * input_.h * input_.w, dense_.outputs(), input_gradient);
}

namespace {

// The input narrowed to the math type, kept from forward for the weight gradient.
struct NarrowedInputState : LayerState {
  Buffer input;
};

}  // namespace

FullyConnectedLayer::FullyConnectedLayer(ParameterLayout& layout, const std::string& name,
                                         const Tensor4& input, int outputs, DataType math_type)
    : Layer(name, Tensor4{input.n, outputs, 1, 1, input.format, DataType::f32}),
      input_(input),
      math_type_(math_type),
      dense_(layout, name, input.c * input.h * input.w, outputs) {
  if (input.type != DataType::f32 && input.type != math_type)
    throw RuntimeError(name + ": a " + data_type_name(input.type) + " input cannot feed " +
                       data_type_name(math_type) + " GEMMs");
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
  if (input_.type == math_type_) return nullptr;
  auto state = std::make_unique<NarrowedInputState>();
  state->input =
      device.allocate(data_type_bytes(math_type_) * input_.count(), MemoryTag{MemoryCategory::activations, name()});
  return state;
}

size_t FullyConnectedLayer::workspace_bytes(Backend&) const {
  // The output gradient narrowed to the math type.
  return math_type_ == DataType::f32 ? 0 : data_type_bytes(math_type_) * input_.n * dense_.outputs();
}

void FullyConnectedLayer::forward(const LayerPass& pass, const int32_t*) const {
  const void* x = pass.x[0];
  if (input_.type != math_type_) {
    void* narrowed = static_cast<NarrowedInputState&>(*pass.state).input.data();
    pass.ops->convert(input_.type, x, math_type_, narrowed, input_.count());
    x = narrowed;
  }
  dense_.forward(*pass.ops, *pass.params, math_type_, x, static_cast<float*>(pass.y), input_.n);
}

void FullyConnectedLayer::backward(const LayerPass& pass, const int32_t*) const {
  const void* x = input_.type == math_type_ ? pass.x[0]
                                            : static_cast<NarrowedInputState&>(*pass.state).input.data();
  const void* dy = pass.dy;
  if (math_type_ != DataType::f32) {
    pass.ops->convert(DataType::f32, pass.dy, math_type_, pass.workspace,
                      static_cast<size_t>(input_.n) * dense_.outputs());
    dy = pass.workspace;
  }
  dense_.backward(*pass.ops, *pass.params, math_type_, x, dy, input_.type, pass.dx[0], input_.n);
}

}  // namespace dpbench
