// Batch normalisation forward and backward; the replica keeps the batch statistics between them.
#include "models/layers/batch_norm.h"

#include <algorithm>
#include <vector>

#include "engine/errors.h"

namespace dpbench {
namespace {

struct BatchNormState : LayerState {
  Buffer saved_mean;     // (batch_norm_saved_floats(c))
  Buffer saved_inv_std;  // (batch_norm_saved_floats(c))
  Buffer running_mean, running_variance;  // (c) each, for inference
};

}  // namespace

BatchNormLayer::BatchNormLayer(ParameterLayout& layout, const std::string& name,
                               const Tensor4& input, float epsilon, bool relu)
    : Layer(name, input), shape_(input), epsilon_(epsilon), relu_(relu) {
  gamma_id_ = declare_parameter(layout, "gamma", {input.c});
  beta_id_ = declare_parameter(layout, "beta", {input.c});
}

void BatchNormLayer::initialize(const ParameterLayout& layout, uint64_t,
                                std::vector<float>& host_params) const {
  auto fill = [&](int id, float value) {
    const TensorView& view = layout.tensor(id);
    std::fill_n(host_params.begin() + static_cast<std::ptrdiff_t>(view.offset), view.count, value);
  };
  fill(gamma_id_, 1.0f);
  fill(beta_id_, 0.0f);
}

std::unique_ptr<LayerState> BatchNormLayer::create_state(Device& device, const ReplicaShard&) const {
  auto state = std::make_unique<BatchNormState>();
  // The saved statistics are kept for backward; the running ones, a few floats per channel, are
  // counted with them (they are no trained parameter).
  const MemoryTag kept{MemoryCategory::activations, name()};
  state->saved_mean = device.allocate(sizeof(float) * batch_norm_saved_floats(shape_.c), kept);
  state->saved_inv_std = device.allocate(sizeof(float) * batch_norm_saved_floats(shape_.c), kept);
  state->running_mean = device.allocate(sizeof(float) * shape_.c, kept);
  state->running_variance = device.allocate(sizeof(float) * shape_.c, kept);
  const std::vector<float> zeros(static_cast<size_t>(shape_.c), 0.0f), ones(static_cast<size_t>(shape_.c), 1.0f);
  device.copy_from_host(state->running_mean.data(), zeros.data(), sizeof(float) * zeros.size());
  device.copy_from_host(state->running_variance.data(), ones.data(), sizeof(float) * ones.size());
  return state;
}

size_t BatchNormLayer::workspace_bytes(Backend& ops) const {
  return ops.batch_norm_workspace_bytes(shape_);
}

InferenceNorm BatchNormLayer::inference_norm(const ParameterSet& params, const LayerState& state) const {
  const auto& statistics = static_cast<const BatchNormState&>(state);
  return InferenceNorm{params.parameter(gamma_id_), params.parameter(beta_id_), statistics.running_mean.as<float>(),
                       statistics.running_variance.as<float>(), epsilon_};
}

void BatchNormLayer::forward(const LayerPass& pass, const int32_t*) const {
  if (!pass.training) {
    pass.ops->batch_norm_inference(shape_, pass.x[0], inference_norm(*pass.params, *pass.state), nullptr, nullptr,
                                   relu_, pass.y);
    return;
  }
  forward_training(pass, *pass.state, pass.x[0], nullptr, relu_, pass.y);
}

void BatchNormLayer::backward(const LayerPass& pass, const int32_t*) const {
  backward_training(pass, *pass.state, pass.x[0], pass.y, pass.dy, relu_, pass.dx[0], nullptr);
}

void BatchNormLayer::forward_training(const LayerPass& pass, LayerState& layer_state, const void* x,
                                      const void* residual, bool relu, void* y) const {
  auto& state = static_cast<BatchNormState&>(layer_state);
  pass.ops->batch_norm_forward_training(shape_, x, pass.params->parameter(gamma_id_),
                                        pass.params->parameter(beta_id_), epsilon_, relu, y,
                                        state.saved_mean.as<float>(), state.saved_inv_std.as<float>(),
                                        pass.workspace, residual, pass.input_statistics(0));
}

void BatchNormLayer::forward_training_pair(const LayerPass& pass, LayerState& layer_state, const void* x,
                                           const BatchNormLayer& shortcut_norm, LayerState& shortcut_layer_state,
                                           const void* z, bool relu, void* y) const {
  if (shortcut_norm.epsilon_ != epsilon_) throw RuntimeError(name() + ": joined batch norms differ in epsilon");
  auto& state = static_cast<BatchNormState&>(layer_state);
  auto& shortcut_state = static_cast<BatchNormState&>(shortcut_layer_state);
  const ParameterSet& params = *pass.params;
  pass.ops->batch_norm_pair_forward_training(
      shape_, x, params.parameter(gamma_id_), params.parameter(beta_id_), state.saved_mean.as<float>(),
      state.saved_inv_std.as<float>(), z, params.parameter(shortcut_norm.gamma_id_),
      params.parameter(shortcut_norm.beta_id_), shortcut_state.saved_mean.as<float>(),
      shortcut_state.saved_inv_std.as<float>(), epsilon_, relu, y, pass.workspace, pass.input_statistics(0),
      pass.input_statistics(1));
}

void BatchNormLayer::backward_training(const LayerPass& pass, LayerState& layer_state, const void* x,
                                       const void* y, const void* dy, bool relu, void* dx,
                                       void* d_residual) const {
  // The backend always produces dx; a batch norm straight on the images would need a scratch.
  if (dx == nullptr) throw RuntimeError(name() + ": batch norm of the network input");
  auto& state = static_cast<BatchNormState&>(layer_state);
  pass.ops->batch_norm_backward(shape_, x, y, dy, pass.params->parameter(gamma_id_), state.saved_mean.as<float>(),
                                state.saved_inv_std.as<float>(), epsilon_, relu, dx,
                                pass.params->gradient(gamma_id_), pass.params->gradient(beta_id_),
                                pass.workspace, d_residual);
}

}  // namespace dpbench
