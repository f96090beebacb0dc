// BucketedExchangeStrategy (see the header).
#include "strategies/bucketed_exchange.h"

#include "engine/communicator.h"
#include "engine/process_group.h"

#include <algorithm>
#include <cmath>

#include "engine/errors.h"

namespace dpbench {

ExchangePlanOptions exchange_plan_options(const RunConfig& config) {
  ExchangePlanOptions options;
  options.gradient_repacking = config.gradient_repacking;
  options.bucket_cap_bytes = static_cast<int64_t>(std::llround(config.bucket_cap_mb * 1024.0 * 1024.0));
  options.agg_small_max_bytes = config.agg_small_grads_max_bytes;
  options.agg_small_max_group = config.agg_small_grads_max_group;
  return options;
}

BucketedExchangeStrategy::BucketedExchangeStrategy(const RunConfig& config) : config_(config) {}

void BucketedExchangeStrategy::setup(const ParameterLayout& layout, std::vector<Replica>& replicas) {
  replicas_ = replicas;
  plan_ = plan_exchanges(layout, exchange_plan_options(config_));
  kernels_counted_ = std::make_unique<std::atomic<int64_t>[]>(replicas.size());
  for (const Replica& replica : replicas) {
    replica.device->make_current();
    trackers_.push_back(std::make_unique<ReadinessTracker>(plan_));
    meters_.push_back(std::make_unique<ExchangeMeter>(*replica.device));
    backward_done_.push_back(replica.device->create_event(false));
    kernels_counted_[replica.index] = 0;
  }
  measured_from_.resize(replicas.size());
  prepare(layout);
  alone_ = world_size() == 1 && !exchanges_alone();
}

std::unique_ptr<Communicator> BucketedExchangeStrategy::create_exchange_communicator() const {
  if (config_.num_processes > 1) {
    if (process_group() == nullptr || replicas_.size() != 1)
      throw RuntimeError("an exchange across processes needs the run's process group and one device per process");
    return create_process_communicator(*replicas_.front().device, *process_group());
  }
  std::vector<Device*> devices;
  for (const Replica& replica : replicas_) devices.push_back(replica.device);
  return create_communicator(devices);
}

void BucketedExchangeStrategy::on_gradients_ready(int replica, GradientRange range, const Event& ready) {
  const std::vector<size_t> completed = trackers_[replica]->mark_ready(range);
  if (!config_.overlap_comm || alone_) return;
  for (size_t index : completed) exchange(replica, index, ready);
}

void BucketedExchangeStrategy::finish_step(int replica, int64_t step) {
  if (!trackers_[replica]->all_ready())
    throw RuntimeError("the model finished backward without announcing every gradient; "
                       "the exchange cannot complete");
  if (alone_) {
    const Replica& self = replicas_[replica];
    self.optimizer->begin_update(self.parameters->gradients(), self.parameters->count());
    self.optimizer->apply(self.parameters->parameters(), self.parameters->gradients(),
                          GradientRange{0, self.parameters->count()}, step, StreamKind::compute, self.parameters);
    self.optimizer->end_update();
    trackers_[replica]->begin_step();
    return;
  }
  if (!config_.overlap_comm) {
    Event& done = *backward_done_[replica];
    done.record(StreamKind::compute);
    for (size_t index = 0; index < plan_.size(); ++index) exchange(replica, index, done);
  }
  complete_step(replica, step);
  trackers_[replica]->begin_step();
  if (replica == 0 && step == 1) kernels_first_step_ = kernels_counted_[0].load();
}

int64_t BucketedExchangeStrategy::launches_per_step() const { return kernels_first_step_.load(); }

void BucketedExchangeStrategy::begin_measurement() {
  for (size_t r = 0; r < meters_.size(); ++r) measured_from_[r] = meters_[r]->totals();
}

nlohmann::json BucketedExchangeStrategy::communication_summary(int64_t measured_steps) const {
  const TrafficModel model = traffic();
  nlohmann::json comm;
  comm["exchange"] = model.exchange;
  comm["communicator"] = model.communicator;
  comm["exchanges_per_step"] = plan_.size();
  comm["collectives_per_step"] = model.collectives_per_step;
  comm["bytes_per_step"] = model.bytes_per_step;
  comm["bytes_sent_per_device_per_step"] = model.bytes_sent_per_device;
  comm["transfer_type"] = model.transfer_type;
  comm["overlap"] = config_.overlap_comm;
  comm["embedding_exchange"] = model.embedding_exchange;
  comm["busbw_formula"] = model.busbw_formula;
  comm.update(model.details);
  if (alone_) {
    comm["exchange"] = "none (one replica: its gradients are the mean)";
    comm["bytes_sent_per_device_per_step"] = 0;
    comm["collectives_per_step"] = 0;
    return comm;
  }
  if (measured_steps <= 0) return comm;
  double transfer_ms = 0, transfer_min_ms = 0, wait_ms = 0, wait_max_ms = 0;
  for (size_t r = 0; r < meters_.size(); ++r) {
    const ExchangeTimes now = meters_[r]->totals();
    const double transfer = (now.transfer_ms - measured_from_[r].transfer_ms) / measured_steps;
    const double wait = (now.wait_ms - measured_from_[r].wait_ms) / measured_steps;
    transfer_ms += transfer / meters_.size();
    transfer_min_ms = r == 0 ? transfer : std::min(transfer_min_ms, transfer);
    wait_ms += wait / meters_.size();
    wait_max_ms = std::max(wait_max_ms, wait);
  }
  comm["transfer_ms_per_step"] = transfer_ms;
  comm["transfer_ms_per_step_min"] = transfer_min_ms;
  comm["exposed_comm_ms_per_step"] = wait_ms;
  comm["exposed_comm_ms_per_step_max"] = wait_max_ms;
  // Bandwidths as nccl-tests defines them: algbw = message bytes / time spent transferring. A
  // device's transfer time also holds its wait for the others to reach the same collective; the
  // device that waited least (the least total) is the closest to the wire's own time, as
  // nccl-tests' synchronised start is.
  if (transfer_min_ms > 0) {
    const double algbw = model.bytes_per_step / (transfer_min_ms * 1e-3) / 1e9;
    comm["algbw_gbps"] = algbw;
    comm["busbw_gbps"] = algbw * model.busbw_factor;
  }
  return comm;
}

}  // namespace dpbench
