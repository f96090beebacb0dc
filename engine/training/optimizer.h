// Optimizer: SGD, momentum, Adam or AdamW applied as one fused update over a flat range of a replica's
// buffers. It owns the optimizer state (same layout as the parameters) on its device, and under
// mixed precision the loss scale: the fused update also unscales the gradients, skips a step
// whose gradients overflowed (automatic scaling) and refreshes the 16-bit weight copy.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "engine/backend/device.h"
#include "engine/backend/step_trace.h"
#include "engine/training/parameter_set.h"

namespace dpbench {

// adamw: Adam with decoupled weight decay (torch.optim.AdamW); the same state as adam.
enum class OptimizerKind { sgd, momentum, adam, adamw };

// fp16 loss scaling: none (fp32, tf32, bf16), a fixed scale (--fp16_loss_scale), or automatic
// (--fp16_enable_auto_loss_scale): halved after a step whose gradients were not finite (that
// step's update is skipped), doubled after `loss_scale_increase_every` good steps.
enum class LossScaling { none, fixed, automatic };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd;
  float learning_rate = 0.01f;
  float momentum = 0.9f;
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
  float weight_decay = 0.01f;  // adamw only: p *= 1 - learning_rate * weight_decay each step
  LossScaling loss_scaling = LossScaling::none;
  float loss_scale = 1.0f;  // the fixed scale, or the automatic one's first value
  int loss_scale_increase_every = 1000;
};

// Throws ConfigError for an unknown name.
OptimizerKind parse_optimizer_kind(const std::string& name);

class Optimizer {
 public:
  // State for `count` elements on `device`, zero-initialised.
  Optimizer(Device& device, const OptimizerConfig& config, size_t count);

  // The device bytes the constructor allocates for `count` elements under `config`, all optimizer
  // state: fp32 moments by the kind (none for SGD, one for momentum, two for Adam and AdamW) and
  // the loss scale's state. The too-little-memory line counts a replica no device can hold with
  // it (Note [too little memory] in engine/training/runner.h).
  static CategoryBytes bytes_for(const OptimizerConfig& config, size_t count);
  // fp32 moments the rule `kind` keeps per parameter.
  static int moments_of(OptimizerKind kind);

  // A step's update is begin_update, apply over every range, end_update, all on one stream.
  // begin_update looks for non-finite values in the step's final (exchanged) gradients
  // [0, count) when scaling is automatic; end_update adapts the scale. Both are no-ops otherwise.
  void begin_update(const float* grads, size_t count, StreamKind stream = StreamKind::compute);
  // params[range] -= update(grads[range] / loss scale); enqueued on `stream` of the device. `step`
  // counts from 1. `parameters`, when given, has its 16-bit weight copy (if any) refreshed over
  // the range in the same pass; its fp32 buffer must be `params`.
  void apply(float* params, const float* grads, GradientRange range, int64_t step,
             StreamKind stream = StreamKind::compute, const ParameterSet* parameters = nullptr);
  void end_update(StreamKind stream = StreamKind::compute);
  // begin_update where each device holds only a part of the step's gradients (its shard,
  // grads[0, count)): with automatic scaling `agree` gets a device float, NaN where this part
  // holds a non-finite value and 0 otherwise, and must leave in it its sum over every part of
  // the step (a collective on `stream`), so that every device skips or applies the step alike.
  void begin_shared_update(const float* grads, size_t count, const std::function<void(float* flag)>& agree,
                           StreamKind stream = StreamKind::compute);
  // Device memory holding the 0-based step number during the update (the runner's step counter):
  // Adam then reads its step there instead of taking it from the host, so the update can be
  // captured once and replayed as a CUDA graph. nullptr: use the host's step.
  void set_device_step(const int32_t* step_from_zero) { device_step_ = step_from_zero; }

  const OptimizerConfig& config() const { return config_; }
  // Device pointer to the current loss scale, what the loss multiplies its gradient by; nullptr
  // without loss scaling.
  const float* loss_scale() const;
  // The loss scale now (blocking; 1 without scaling).
  float current_loss_scale() const;

 private:
  Device* device_;
  OptimizerConfig config_;
  Buffer first_moment_;   // momentum velocity, or Adam's (and AdamW's) m
  Buffer second_moment_;  // Adam's (and AdamW's) v
  Buffer loss_scale_state_;  // one LossScaleState, with loss scaling only
  Buffer non_finite_flag_;   // begin_shared_update's float, with automatic scaling only
  const int32_t* device_step_ = nullptr;
  StepTrace::Span update_span_;  // begin_update to end_update, in a trace
};

}  // namespace dpbench
