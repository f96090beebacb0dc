// BucketedExchangeStrategy (see the header).
#include "strategies/bucketed_exchange.h"

#include "engine/backend/step_trace.h"
#include "engine/backends.h"
#include "engine/communication/communicator.h"
#include "engine/communication/process_group.h"

#include <algorithm>
#include <cmath>

#include "engine/errors.h"

namespace dpbench {

ExchangePlanOptions exchange_plan_options(const StrategyOptions& options) {
  ExchangePlanOptions plan;
  plan.gradient_repacking = options.gradient_repacking;
  plan.bucket_cap_bytes = static_cast<int64_t>(std::llround(options.bucket_cap_mb * 1024.0 * 1024.0));
  plan.tail_bucket_bytes = static_cast<int64_t>(std::llround(options.tail_bucket_mb * 1024.0 * 1024.0));
  plan.agg_small_max_bytes = options.agg_small_grads_max_bytes;
  plan.agg_small_max_group = options.agg_small_grads_max_group;
  return plan;
}

BucketedExchangeStrategy::BucketedExchangeStrategy(const StrategyOptions& options, const DevicePlacement& placement)
    : options_(options), num_processes_(placement.num_processes), process_rank_(placement.process_rank) {}

void BucketedExchangeStrategy::setup(const ParameterLayout& layout, std::vector<Replica>& replicas) {
  replicas_ = replicas;
  plan_ = plan_exchanges(layout, exchange_plan_options(options_));
  for (const Replica& replica : replicas) {
    replica.device->make_current();
    trackers_.push_back(std::make_unique<ReadinessTracker>(plan_));
    meters_.push_back(std::make_unique<ExchangeMeter>(*replica.device));
    backward_done_.push_back(replica.device->create_event(false));
  }
  measured_from_.resize(replicas.size());
  prepare(layout);
  alone_ = world_size() == 1 && !exchanges_alone();
  exchange_name_ = traffic().exchange;
  ready_instants_.assign(replicas.size(), std::vector<int>(plan_.size(), -1));
  first_step_communication_start_ = replicas_.front().device->enqueued(StreamKind::communication);
}

Communicator& BucketedExchangeStrategy::create_exchange_communicator() {
  if (num_processes_ > 1) {
    if (process_group() == nullptr || replicas_.size() != 1)
      throw RuntimeError("an exchange across processes needs the run's process group and one device per process");
    communicator_ = create_process_communicator(*replicas_.front().device, *process_group());
    return *communicator_;
  }
  std::vector<Device*> devices;
  for (const Replica& replica : replicas_) devices.push_back(replica.device);
  communicator_ = create_communicator(devices);
  return *communicator_;
}

bool BucketedExchangeStrategy::step_is_replayable() const {
  return communicator_ != nullptr && communicator_->capturable();
}

void BucketedExchangeStrategy::abort() {
  if (communicator_) communicator_->abort();
  abort_exchanges();
}

// What the exchange enqueues per step, as the devices count it (Note [counted launches] in
// engine/backend/device.h), over replica 0's first step: everything its communication stream received
// during the step (only the exchange uses it, whichever thread enqueues for it), and what its
// hooks enqueued on its compute stream (the waits, the update). Its own thread alone drives its
// compute stream, and no other thread can enqueue its next step's exchange before it arrives.
template <typename Hook>
void BucketedExchangeStrategy::counting_first_step(int replica, Hook&& hook) {
  if (replica != 0 || kernels_first_step_.load() >= 0) {
    hook();
    return;
  }
  const Device& device = *replicas_.front().device;
  const int64_t before = device.enqueued(StreamKind::compute);
  hook();
  first_step_compute_ += device.enqueued(StreamKind::compute) - before;
}

void BucketedExchangeStrategy::on_gradients_ready(int replica, GradientRange range, const Event& ready) {
  counting_first_step(replica, [&] {
    const std::vector<size_t> completed = trackers_[replica]->mark_ready(range);
    StepTrace& trace = replicas_[replica].device->trace();
    if (trace.recording())
      for (size_t index : completed)
        ready_instants_[replica][index] = trace.instant(StreamKind::compute, "gradient ready", {{"bucket", index}});
    if (!options_.overlap_comm || alone_) return;
    for (size_t index : completed) start_exchange(replica, index, ready);
  });
}

void BucketedExchangeStrategy::start_exchange(int replica, size_t index, const Event& ready) {
  if (replicas_[replica].device->trace().recording()) {
    const GradientRange& range = plan_[index];
    meter(replica).label_next_transfer("exchange " + std::to_string(index),
                                       {{"bucket", index},
                                        {"elements", range.count},
                                        {"bytes", range.count * sizeof(float)},
                                        {"exchange", exchange_name_}},
                                       ready_instants_[replica][index]);
    ready_instants_[replica][index] = -1;
  }
  exchange(replica, index, ready);
}

void BucketedExchangeStrategy::finish_step(int replica, int64_t step) {
  counting_first_step(replica, [&] { finish_exchanges(replica, step); });
  if (replica == 0 && step == 1) {
    const int64_t communication =
        replicas_.front().device->enqueued(StreamKind::communication) - first_step_communication_start_;
    kernels_first_step_ = first_step_compute_ + communication;
  }
}

void BucketedExchangeStrategy::finish_exchanges(int replica, int64_t step) {
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
  if (!options_.overlap_comm) {
    Event& done = *backward_done_[replica];
    done.record(StreamKind::compute);
    for (size_t index = 0; index < plan_.size(); ++index) start_exchange(replica, index, done);
  }
  complete_step(replica, step);
  trackers_[replica]->begin_step();
}

int64_t BucketedExchangeStrategy::launches_per_step() const { return kernels_first_step_.load(); }

void BucketedExchangeStrategy::begin_measurement() {
  for (size_t r = 0; r < meters_.size(); ++r) measured_from_[r] = meters_[r]->totals();
}

std::vector<double> BucketedExchangeStrategy::exposed_comm_ms_per_step(int64_t measured_steps) const {
  if (alone_ || measured_steps <= 0) return {};
  std::vector<double> waits;
  for (size_t r = 0; r < meters_.size(); ++r)
    waits.push_back((meters_[r]->totals().wait_ms - measured_from_[r].wait_ms) / static_cast<double>(measured_steps));
  return waits;
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
  comm["overlap"] = options_.overlap_comm;
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
  const double transfer_min_ms = record_measured_exchange_times(meters_, measured_from_, measured_steps, comm);
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
