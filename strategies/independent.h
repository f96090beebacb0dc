// `independent`: every replica updates from its own gradients and nothing is exchanged — the
// ideal-scaling baseline (tf_cnn_benchmarks' --variable_update=replicated --independent_replica).
#pragma once

#include "engine/training/strategy.h"

namespace dpbench {

class IndependentStrategy : public Strategy {
 public:
  std::string name() const override { return "independent"; }
  void setup(const ParameterLayout& layout, std::vector<Replica>& replicas) override;
  void on_gradients_ready(int replica, GradientRange range, const Event& ready) override {}
  void finish_step(int replica, int64_t step) override;
  nlohmann::json communication_summary(int64_t measured_steps) const override;
  bool step_is_replayable() const override { return true; }

 private:
  std::vector<Replica> replicas_;
};

}  // namespace dpbench
