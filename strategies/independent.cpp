// `independent`: the update is one fused optimizer call over the whole flat gradient buffer, on
// the compute stream right after backward; no bytes leave the device.
#include "strategies/independent.h"

namespace dpbench {

void IndependentStrategy::setup(const ParameterLayout& layout, std::vector<Replica>& replicas) {
  replicas_ = replicas;
}

void IndependentStrategy::finish_step(int replica, int64_t step) {
  const Replica& r = replicas_.at(replica);
  r.optimizer->begin_update(r.parameters->gradients(), r.parameters->count());
  r.optimizer->apply(r.parameters->parameters(), r.parameters->gradients(),
                     GradientRange{0, r.parameters->count()}, step, StreamKind::compute,
                     r.parameters);
  r.optimizer->end_update();
}

nlohmann::json IndependentStrategy::communication_summary(int64_t /*measured_steps*/) const {
  return {{"bytes_sent_per_device_per_step", 0}, {"collectives_per_step", 0}, {"exchange", "none"}};
}

}  // namespace dpbench
