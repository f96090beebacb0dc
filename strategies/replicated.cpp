// ReplicatedStrategy (see the header): the exchange methods composed over the plan.
#include "strategies/replicated.h"

#include <algorithm>
#include <string>

#include "engine/errors.h"
#include "engine/training/optimizer.h"
#include "strategies/exchange_meter.h"
#include "strategies/exchange_methods/exchange_methods.h"

namespace dpbench {

ReplicatedStrategy::ReplicatedStrategy(const StrategyOptions& options, const DevicePlacement& placement)
    : BucketedExchangeStrategy(options, placement),
      spec_(parse_all_reduce_spec(options.all_reduce_spec)),
      transfer_type_(compact_transfer_type(options)),
      embeddings_(choose_embedding_exchange(spec_, options)),
      dense_(choose_dense_exchange(spec_, options)) {}

void ReplicatedStrategy::prepare(const ParameterLayout& /*layout*/) {
  size_t largest = 0;
  for (const GradientRange& range : plan())
    for (const GradientRange& shard : split_range(range, spec_.shards)) largest = std::max(largest, shard.count);
  ExchangeContext context;
  context.replicas = replicas();
  context.world_size = world_size();
  context.first_world_rank = world_rank(0);
  for (int r = 0; r < num_replicas(); ++r) context.meters.push_back(&meter(r));
  if (dense_->uses_communicator()) context.communicator = &create_exchange_communicator();
  dense_->prepare(context, largest);
  parts_.clear();
  for (const GradientRange& range : plan()) parts_.push_back(RangeParts{{range}, {}});
  if (embeddings_) {
    embeddings_->prepare(context, largest);
    parts_ = embeddings_->plan_parts(plan());
  }
  updates_by_bucket_ = !dense_->orders_devices_itself() && !dense_->updates_parameters();
  for (const Replica& replica : replicas())
    if (replica.optimizer->config().loss_scaling == LossScaling::automatic) updates_by_bucket_ = false;
  exchanged_.clear();
  started_.assign(replicas().size(), {});
  if (!updates_by_bucket_) return;
  for (const Replica& replica : replicas()) {
    replica.device->make_current();
    std::vector<std::unique_ptr<Event>> events;
    for (size_t index = 0; index < plan().size(); ++index) events.push_back(replica.device->create_event(false));
    exchanged_.push_back(std::move(events));
    started_[exchanged_.size() - 1].reserve(plan().size());
  }
  replicas().front().device->make_current();
}

void ReplicatedStrategy::exchange(int replica, size_t index, const Event& ready) {
  if (dense_->orders_devices_itself()) {  // never with sparse rows: those need the communicator
    dense_->exchange(replica, plan()[index], ready);
    return;
  }
  replicas()[replica].device->wait(StreamKind::communication, ready);
  meter(replica).begin_transfer(StreamKind::communication);
  const RangeParts& parts = parts_[index];
  for (const GradientRange& part : parts.dense) dense_->exchange(replica, part, ready);
  for (const GradientRange& table : parts.tables) embeddings_->exchange(replica, table, ready);
  meter(replica).end_transfer(StreamKind::communication);
  if (updates_by_bucket_) {
    exchanged_[replica][index]->record(StreamKind::communication);
    started_[replica].push_back(index);
  }
}

void ReplicatedStrategy::complete_step(int replica, int64_t step) {
  if (updates_by_bucket_) {
    update_by_bucket(replica, step);
    return;
  }
  const Replica& self = replicas()[replica];
  meter(replica).begin_wait();
  dense_->wait_until_done(replica);  // the sparse rows travel on the same communication stream
  meter(replica).end_wait();
  if (dense_->updates_parameters()) return;  // the exchanges updated and gathered every range
  // Every replica now holds the same mean gradients and applies the same update.
  self.optimizer->begin_update(self.parameters->gradients(), self.parameters->count());
  self.optimizer->apply(self.parameters->parameters(), self.parameters->gradients(),
                        GradientRange{0, self.parameters->count()}, step, StreamKind::compute, self.parameters);
  self.optimizer->end_update();
}

void ReplicatedStrategy::update_by_bucket(int replica, int64_t step) {
  const Replica& self = replicas()[replica];
  std::vector<size_t>& started = started_[replica];
  if (started.size() != plan().size())
    throw RuntimeError("replicated: " + std::to_string(started.size()) + " of " + std::to_string(plan().size()) +
                       " exchanges started before the update; every range must be exchanged once per step");
  self.optimizer->begin_update(self.parameters->gradients(), self.parameters->count());
  for (size_t index : started) {
    meter(replica).begin_wait();
    self.device->wait(StreamKind::compute, *exchanged_[replica][index]);
    meter(replica).end_wait();
    self.optimizer->apply(self.parameters->parameters(), self.parameters->gradients(), plan()[index], step,
                          StreamKind::compute, self.parameters);
  }
  // The last range's event already covers everything the communication stream holds; the method's
  // own wait keeps its contract (once per step, after every exchange) and costs no time.
  dense_->wait_until_done(replica);
  self.optimizer->end_update();
  started.clear();
}

StepSchedule ReplicatedStrategy::schedule_for(const StrategyOptions& options, const ParameterLayout& /*layout*/,
                                              const std::vector<GradientRange>& plan, const ScheduleShape& shape) {
  const AllReduceSpec spec = parse_all_reduce_spec(options.all_reduce_spec);
  const std::unique_ptr<ExchangeMethod> dense = choose_dense_exchange(spec, options);
  StepSchedule schedule;
  schedule.update = dense->updates_parameters()      ? UpdatePlacement::in_exchange
                    : dense->orders_devices_itself() ? UpdatePlacement::after_all
                                                     : UpdatePlacement::each_range;
  schedule.update_split = dense->updates_parameters() ? std::max(1, shape.world) : 1;
  schedule.update_share = 1.0 / schedule.update_split;
  for (const GradientRange& range : plan) {
    RangeSchedule exchange = dense->schedule(range, shape);
    if (!options.overlap_comm && !exchange.steps.empty()) exchange.steps.front().after = StepAfter::backward;
    schedule.ranges.push_back(std::move(exchange));
  }
  return schedule;
}

StrategyMemory ReplicatedStrategy::memory_for(const StrategyOptions& options, const ParameterLayout& /*layout*/,
                                              const std::vector<GradientRange>& plan, const ScheduleShape& shape) {
  const AllReduceSpec spec = parse_all_reduce_spec(options.all_reduce_spec);
  const std::unique_ptr<ExchangeMethod> dense = choose_dense_exchange(spec, options);
  size_t largest = 0;
  for (const GradientRange& range : plan)
    for (const GradientRange& shard : split_range(range, spec.shards)) largest = std::max(largest, shard.count);
  const ExchangeBuffers buffers = dense->buffer_bytes(largest, shape);
  StrategyMemory memory;
  memory.added[static_cast<size_t>(MemoryCategory::communication)] = buffers.device;
  memory.added[static_cast<size_t>(MemoryCategory::trace)] = ExchangeMeter::kDeviceBytes;
  memory.pinned_host_added = buffers.pinned_host;
  memory.rule = std::string("every device holds a whole replica") +
                (options.sharded_update ? " (each updates 1/N of the optimizer state, but holds all of it)" : "") +
                (buffers.device > 0 ? " and the exchange's buffers for its largest bucket" : "; the exchange adds no buffers");
  return memory;
}

// The methods' traffic summed. With sparse rows, D dense bytes are all-reduced and G bytes of
// packs all-gathered: one busbw for both is their bus bytes over the transfer time.
TrafficModel ReplicatedStrategy::traffic() const {
  std::vector<GradientRange> dense_parts, tables;
  for (const RangeParts& parts : parts_) {
    dense_parts.insert(dense_parts.end(), parts.dense.begin(), parts.dense.end());
    tables.insert(tables.end(), parts.tables.begin(), parts.tables.end());
  }
  const ExchangeTraffic dense = dense_->traffic(dense_parts);
  const ExchangeTraffic rows = embeddings_ ? embeddings_->traffic(tables) : ExchangeTraffic{};
  TrafficModel model;
  model.exchange = dense_->description() + (embeddings_ ? ", " + embeddings_->description() : "");
  model.communicator = dense_->communicator_description();
  model.transfer_type = data_type_name(transfer_type_);
  model.bytes_per_step = dense.bytes + rows.bytes;
  model.bytes_sent_per_device = dense.bytes_sent + rows.bytes_sent;
  model.collectives_per_step = dense.collectives + rows.collectives;
  model.busbw_factor = model.bytes_per_step > 0 ? (dense.bus_bytes + rows.bus_bytes) / model.bytes_per_step : 0.0;
  model.busbw_formula = embeddings_ ? embeddings_->busbw_formula() : dense_->busbw_formula();
  dense_->add_details(model.details);
  if (embeddings_) {
    model.embedding_exchange = "sparse";
    model.details["dense_bytes_per_step"] = dense.bytes;
    model.details["sparse_bytes_per_step"] = rows.bytes;
    embeddings_->add_details(model.details);
  }
  return model;
}

}  // namespace dpbench
