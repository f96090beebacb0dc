// Optimizer: SGD, momentum or Adam applied as one fused update over a flat range of a replica's
// buffers. It owns the optimizer state (same layout as the parameters) on its device.
#pragma once

#include <cstdint>
#include <string>

#include "engine/device.h"
#include "engine/parameter_set.h"

namespace dpbench {

enum class OptimizerKind { sgd, momentum, adam };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd;
  float learning_rate = 0.01f;
  float momentum = 0.9f;
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
};

// Throws ConfigError for an unknown name.
OptimizerKind parse_optimizer_kind(const std::string& name);

class Optimizer {
 public:
  // State for `count` elements on `device`, zero-initialised.
  Optimizer(Device& device, const OptimizerConfig& config, size_t count);

  // params[range] -= update(grads[range]); enqueued on `stream` of the device. `step` counts from 1.
  void apply(float* params, const float* grads, GradientRange range, int64_t step,
             StreamKind stream = StreamKind::compute);
  const OptimizerConfig& config() const { return config_; }

 private:
  Device* device_;
  OptimizerConfig config_;
  Buffer first_moment_;   // momentum velocity, or Adam's m
  Buffer second_moment_;  // Adam's v
};

}  // namespace dpbench
