// Optimizer state and the dispatch to the backend's fused update kernels.
#include "engine/optimizer.h"

#include "engine/errors.h"

namespace dpbench {

OptimizerKind parse_optimizer_kind(const std::string& name) {
  if (name == "sgd") return OptimizerKind::sgd;
  if (name == "momentum") return OptimizerKind::momentum;
  if (name == "adam") return OptimizerKind::adam;
  throw ConfigError("--optimizer=" + name + ": unknown optimizer; accepted: sgd, momentum, adam");
}

Optimizer::Optimizer(Device& device, const OptimizerConfig& config, size_t count)
    : device_(&device), config_(config) {
  // Only the state the chosen rule needs is allocated: Adam's two moments are 2x the model size.
  if (config.kind != OptimizerKind::sgd) {
    first_moment_ = device.allocate(count * sizeof(float));
    device.ops().fill(first_moment_.as<float>(), count, 0.0f);
  }
  if (config.kind == OptimizerKind::adam) {
    second_moment_ = device.allocate(count * sizeof(float));
    device.ops().fill(second_moment_.as<float>(), count, 0.0f);
  }
}

void Optimizer::apply(float* params, const float* grads, GradientRange range, int64_t step,
                      StreamKind stream) {
  Backend& ops = device_->ops(stream);
  float* p = params + range.offset;
  const float* g = grads + range.offset;
  switch (config_.kind) {
    case OptimizerKind::sgd:
      ops.sgd_update(p, g, range.count, config_.learning_rate);
      break;
    case OptimizerKind::momentum:
      ops.momentum_update(p, g, first_moment_.as<float>() + range.offset, range.count,
                          config_.learning_rate, config_.momentum);
      break;
    case OptimizerKind::adam:
      ops.adam_update(p, g, first_moment_.as<float>() + range.offset,
                      second_moment_.as<float>() + range.offset, range.count, config_.learning_rate,
                      config_.beta1, config_.beta2, config_.epsilon, step);
      break;
  }
}

}  // namespace dpbench
