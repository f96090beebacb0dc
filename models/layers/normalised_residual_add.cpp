// The fused join (see normalised_residual_add.h): one backend call each way.
#include "models/layers/normalised_residual_add.h"

#include "engine/errors.h"

namespace dpbench {
namespace {

// The fused batch norms' states (batch statistics for backward, running statistics for
// inference), one each, as those layers make them.
struct FusedNormsState : LayerState {
  std::unique_ptr<LayerState> main, shortcut;
};

}  // namespace

NormalisedResidualAddLayer::NormalisedResidualAddLayer(const ResidualAddLayer& add, const BatchNormLayer& main_norm,
                                                       const BatchNormLayer* shortcut_norm, bool training)
    : Layer(add.name(), add.output_shape()),
      main_norm_(main_norm),
      shortcut_norm_(shortcut_norm),
      relu_(add.fused_relu()),
      training_(training) {
  if (main_norm.fused_relu() || (shortcut_norm != nullptr && shortcut_norm->fused_relu()))
    throw RuntimeError(name() + ": a batch norm with a ReLU of its own cannot be fused into the add");
}

std::unique_ptr<LayerState> NormalisedResidualAddLayer::create_state(Device& device, const ReplicaShard& shard) const {
  auto state = std::make_unique<FusedNormsState>();
  state->main = main_norm_.create_state(device, shard);
  if (shortcut_norm_ != nullptr) state->shortcut = shortcut_norm_->create_state(device, shard);
  return state;
}

void NormalisedResidualAddLayer::forward(const LayerPass& pass, const int32_t*) const {
  const auto& state = static_cast<const FusedNormsState&>(*pass.state);
  if (pass.training) {
    if (!training_) throw RuntimeError(name() + ": this join was fused for inference only");
    if (shortcut_norm_ == nullptr) {
      main_norm_.forward_training(pass, *state.main, pass.x[0], pass.x[1], relu_, pass.y);
    } else {
      main_norm_.forward_training_pair(pass, *state.main, pass.x[0], *shortcut_norm_, *state.shortcut, pass.x[1],
                                       relu_, pass.y);
    }
    return;
  }
  const InferenceNorm main = main_norm_.inference_norm(*pass.params, *state.main);
  if (shortcut_norm_ == nullptr) {
    pass.ops->batch_norm_inference(output_shape(), pass.x[0], main, pass.x[1], nullptr, relu_, pass.y);
    return;
  }
  const InferenceNorm shortcut = shortcut_norm_->inference_norm(*pass.params, *state.shortcut);
  pass.ops->batch_norm_inference(output_shape(), pass.x[0], main, pass.x[1], &shortcut, relu_, pass.y);
}

void NormalisedResidualAddLayer::backward(const LayerPass& pass, const int32_t*) const {
  if (!training_) throw RuntimeError(name() + ": the join fused for inference has no backward pass");
  const auto& state = static_cast<const FusedNormsState&>(*pass.state);
  // The main norm's backward tells a join from a plain batch norm by its d_residual
  // (Backend::batch_norm_backward), so there must be one.
  if (pass.dx[1] == nullptr) throw RuntimeError(name() + ": no buffer for the shortcut's gradient");
  // dx[1] is the shortcut's gradient (or the scratch the network then adds into it). With a
  // shortcut batch norm it first receives that norm's output gradient (the masked dy), which the
  // norm's backward then turns into its input's gradient in place.
  main_norm_.backward_training(pass, *state.main, pass.x[0], pass.y, pass.dy, relu_, pass.dx[0], pass.dx[1]);
  if (shortcut_norm_ != nullptr)
    shortcut_norm_->backward_training(pass, *state.shortcut, pass.x[1], nullptr, pass.dx[1], false, pass.dx[1], nullptr);
}

}  // namespace dpbench
