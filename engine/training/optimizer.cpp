// Optimizer state and the dispatch to the backend's fused update kernels.
#include "engine/training/optimizer.h"

#include "engine/backend/step_trace.h"
#include "engine/errors.h"

namespace dpbench {

OptimizerKind parse_optimizer_kind(const std::string& name) {
  if (name == "sgd") return OptimizerKind::sgd;
  if (name == "momentum") return OptimizerKind::momentum;
  if (name == "adam") return OptimizerKind::adam;
  if (name == "adamw") return OptimizerKind::adamw;
  throw ConfigError("--optimizer=" + name + ": unknown optimizer; accepted: sgd, momentum, adam, adamw");
}

int Optimizer::moments_of(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::sgd: return 0;
    case OptimizerKind::momentum: return 1;
    case OptimizerKind::adam:
    case OptimizerKind::adamw: return 2;
  }
  return 0;
}

CategoryBytes Optimizer::bytes_for(const OptimizerConfig& config, size_t count) {
  uint64_t bytes = static_cast<uint64_t>(moments_of(config.kind)) * count * sizeof(float);
  if (config.loss_scaling != LossScaling::none) bytes += sizeof(LossScaleState);
  if (config.loss_scaling == LossScaling::automatic) bytes += sizeof(float);  // the non-finite flag
  CategoryBytes by_category{};
  by_category[static_cast<size_t>(MemoryCategory::optimizer_state)] = bytes;
  return by_category;
}

Optimizer::Optimizer(Device& device, const OptimizerConfig& config, size_t count)
    : device_(&device), config_(config) {
  // Only the state the chosen rule needs is allocated (moments_of): Adam's two moments are 2x the
  // model size.
  if (moments_of(config.kind) >= 1) {
    first_moment_ = device.allocate(count * sizeof(float), MemoryTag{MemoryCategory::optimizer_state, "optimizer"});
    device.ops().fill(first_moment_.as<float>(), count, 0.0f);
  }
  if (moments_of(config.kind) >= 2) {
    second_moment_ = device.allocate(count * sizeof(float), MemoryTag{MemoryCategory::optimizer_state, "optimizer"});
    device.ops().fill(second_moment_.as<float>(), count, 0.0f);
  }
  if (config.loss_scaling != LossScaling::none) {
    if (!(config.loss_scale >= 1.0f))
      throw ConfigError("the loss scale must be at least 1, not " + std::to_string(config.loss_scale));
    LossScaleState initial;
    initial.scale = config.loss_scale;
    initial.inverse_scale = 1.0f / config.loss_scale;
    loss_scale_state_ =
        device.allocate(sizeof(LossScaleState), MemoryTag{MemoryCategory::optimizer_state, "loss scale"});
    device.copy_from_host(loss_scale_state_.data(), &initial, sizeof(initial));
  }
  if (config.loss_scaling == LossScaling::automatic)
    non_finite_flag_ = device.allocate(sizeof(float), MemoryTag{MemoryCategory::optimizer_state, "loss scale"});
}

void Optimizer::begin_update(const float* grads, size_t count, StreamKind stream) {
  StepTrace& trace = device_->trace();
  if (trace.annotating()) update_span_ = trace.begin(stream, "optimizer update", "optimizer");
  if (config_.loss_scaling == LossScaling::automatic)
    device_->ops(stream).find_non_finite(grads, count, loss_scale_state_.as<LossScaleState>());
}

void Optimizer::end_update(StreamKind stream) {
  if (config_.loss_scaling == LossScaling::automatic)
    device_->ops(stream).update_loss_scale(loss_scale_state_.as<LossScaleState>(),
                                           config_.loss_scale_increase_every);
  device_->trace().end(update_span_);
  update_span_ = StepTrace::Span{};
}

void Optimizer::begin_shared_update(const float* grads, size_t count, const std::function<void(float* flag)>& agree,
                                    StreamKind stream) {
  if (config_.loss_scaling != LossScaling::automatic) return begin_update(grads, count, stream);
  StepTrace& trace = device_->trace();
  if (trace.annotating()) update_span_ = trace.begin(stream, "optimizer update", "optimizer");
  // 0 x the part's sum, summed in double (which no float values overflow): 0 where every value
  // is finite, NaN where one is not; a sum of such flags is NaN where any part's is.
  float* flag = non_finite_flag_.as<float>();
  device_->ops(stream).sum_scaled(grads, count, 0.0f, flag);
  agree(flag);
  device_->ops(stream).find_non_finite(flag, 1, loss_scale_state_.as<LossScaleState>());
}

const float* Optimizer::loss_scale() const {
  return loss_scale_state_ ? &loss_scale_state_.as<LossScaleState>()->scale : nullptr;
}

float Optimizer::current_loss_scale() const {
  if (!loss_scale_state_) return 1.0f;
  LossScaleState state;
  device_->copy_to_host(&state, loss_scale_state_.data(), sizeof(state));
  return state.scale;
}

void Optimizer::apply(float* params, const float* grads, GradientRange range, int64_t step,
                      StreamKind stream, const ParameterSet* parameters) {
  Backend& ops = device_->ops(stream);
  float* p = params + range.offset;
  const float* g = grads + range.offset;
  UpdateExtras extras;
  if (loss_scale_state_) {
    LossScaleState* state = loss_scale_state_.as<LossScaleState>();
    extras.inverse_loss_scale = &state->inverse_scale;
    if (config_.loss_scaling == LossScaling::automatic) extras.skip = &state->non_finite;
  }
  if (parameters != nullptr && parameters->weight_copy() != nullptr) {
    if (parameters->parameters() != params)
      throw RuntimeError("Optimizer::apply: the weight copy belongs to other parameters");
    extras.half_type = parameters->weight_copy_type();
    extras.half_params = static_cast<char*>(parameters->weight_copy()) +
                         range.offset * data_type_bytes(extras.half_type);
  }
  extras.step_from_zero = device_step_;
  switch (config_.kind) {
    case OptimizerKind::sgd:
      ops.sgd_update(p, g, range.count, config_.learning_rate, extras);
      break;
    case OptimizerKind::momentum:
      ops.momentum_update(p, g, first_moment_.as<float>() + range.offset, range.count,
                          config_.learning_rate, config_.momentum, extras);
      break;
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
      ops.adam_update(p, g, first_moment_.as<float>() + range.offset,
                      second_moment_.as<float>() + range.offset, range.count, config_.learning_rate,
                      config_.beta1, config_.beta2, config_.epsilon, step,
                      config_.kind == OptimizerKind::adamw ? config_.weight_decay : 0.0f, extras);
      break;
  }
}

}  // namespace dpbench
