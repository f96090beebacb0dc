// Dropout forward and backward: one seed per layer, masks placed by global sample index.
#include "models/layers/dropout.h"

#include "engine/backend/counter_random.h"

namespace dpbench {
namespace {

struct DropoutState : LayerState {
  uint64_t seed = 0;
  uint64_t first_index = 0;  // this replica's first element in the global batch
};

}  // namespace

DropoutLayer::DropoutLayer(const std::string& name, const Tensor4& input, float rate,
                           uint64_t layer_key)
    : Layer(name, input), rate_(rate), layer_key_(layer_key) {}

std::unique_ptr<LayerState> DropoutLayer::create_state(Device&, const ReplicaShard& shard) const {
  auto state = std::make_unique<DropoutState>();
  // The same seed on every replica: masks differ between replicas because their samples do.
  state->seed = counter_hash(shard.seed, kRandomStreamDropout, layer_key_);
  const Tensor4& shape = output_shape();
  state->first_index = shard.first_global_sample() * (static_cast<uint64_t>(shape.c) * shape.h * shape.w);
  return state;
}

void DropoutLayer::forward(const LayerPass& pass, const int32_t* step) const {
  if (!pass.training) {  // inference keeps every unit, unscaled
    if (pass.y != pass.x[0]) pass.ops->copy(pass.y, pass.x[0], output_shape().bytes());
    return;
  }
  const auto& state = static_cast<const DropoutState&>(*pass.state);
  pass.ops->dropout_forward(output_shape().type, pass.x[0], pass.y, output_shape().count(), rate_,
                            state.seed, state.first_index, step);
}

void DropoutLayer::backward(const LayerPass& pass, const int32_t* step) const {
  if (pass.dx[0] == nullptr) return;
  const auto& state = static_cast<const DropoutState&>(*pass.state);
  pass.ops->dropout_backward(output_shape().type, pass.dy, pass.dx[0], output_shape().count(),
                             rate_, state.seed, state.first_index, step);
}

}  // namespace dpbench
