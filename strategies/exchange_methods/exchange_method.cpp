// CommunicatorExchange: what the methods on the strategy's communicator share (see the header).
#include "strategies/exchange_methods/exchange_method.h"

#include "strategies/exchange_plan.h"

namespace dpbench {

ExchangeTraffic ExchangeMethod::traffic(const std::vector<GradientRange>& ranges) const {
  const ScheduleShape shape = run_shape();
  std::vector<RangeSchedule> schedules;
  for (const GradientRange& range : ranges) schedules.push_back(schedule(range, shape));
  return traffic_of(schedules);
}

ScheduleShape CommunicatorExchange::run_shape() const {
  return ScheduleShape{context_.world_size, context_.world_size, 1};
}

void CommunicatorExchange::prepare(const ExchangeContext& context, size_t largest) {
  context_ = context;
  for (const Replica& replica : context_.replicas) {
    replica.device->make_current();
    exchanged_.push_back(replica.device->create_event(false));
  }
  allocate(largest);
  context_.replicas.front().device->make_current();
}

void CommunicatorExchange::exchange(int replica, GradientRange range, const Event& /*ready*/) {
  for (const GradientRange& shard : shards_of(range)) exchange_shard(replica, shard);
}

std::vector<GradientRange> CommunicatorExchange::shards_of(GradientRange range) const {
  return split_range(range, shards_);
}

void CommunicatorExchange::wait_until_done(int replica) {
  exchanged_[replica]->record(StreamKind::communication);
  replica_at(replica).device->wait(StreamKind::compute, *exchanged_[replica]);
}

}  // namespace dpbench
