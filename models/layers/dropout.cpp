// Dropout forward and backward with a per-layer, per-replica seed.
#include "models/layers/dropout.h"

#include "engine/counter_random.h"

namespace dpbench {
namespace {

struct DropoutState : LayerState {
  uint64_t seed = 0;
};

}  // namespace

DropoutLayer::DropoutLayer(const std::string& name, const Tensor4& input, float rate,
                           uint64_t layer_key)
    : Layer(name, input), rate_(rate), layer_key_(layer_key) {}

std::unique_ptr<LayerState> DropoutLayer::create_state(Device&, const ReplicaShard& shard) const {
  auto state = std::make_unique<DropoutState>();
  state->seed = counter_hash(shard.seed, layer_key_, static_cast<uint64_t>(shard.replica));
  return state;
}

void DropoutLayer::forward(const LayerPass& pass, const int32_t* step) const {
  const uint64_t seed = static_cast<const DropoutState&>(*pass.state).seed;
  pass.ops->dropout_forward(pass.x[0], pass.y, output_shape().count(), rate_, seed, step);
}

void DropoutLayer::backward(const LayerPass& pass, const int32_t* step) const {
  if (pass.dx[0] == nullptr) return;
  const uint64_t seed = static_cast<const DropoutState&>(*pass.state).seed;
  pass.ops->dropout_backward(pass.dy, pass.dx[0], output_shape().count(), rate_, seed, step);
}

}  // namespace dpbench
