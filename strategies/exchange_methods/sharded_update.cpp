// ShardedUpdate (see the header).
#include "strategies/exchange_methods/sharded_update.h"

#include "engine/training/optimizer.h"
#include "strategies/exchange_plan.h"

namespace dpbench {

// Automatic loss scaling is refused with a sharded update by the strategy's rules
// (strategy_registry.cpp, Note [owners decide alone]).
void ShardedUpdate::allocate(size_t /*largest*/) {
  steps_completed_.assign(context().replicas.size(), 0);
}

// In place in the replica's buffers, on the communication stream: the first N x (count / N)
// elements are reduce-scattered (this replica's world rank picks its chunk), updated and
// all-gathered; the count % N left over (fewer than N) are all-reduced and updated everywhere.
void ShardedUpdate::exchange_shard(int replica, GradientRange range) {
  const Replica& self = replica_at(replica);
  const size_t n = world_size();
  const size_t chunk = range.count / n;
  const int64_t step = steps_completed_[replica] + 1;
  float* parameters = self.parameters->parameters();
  float* gradients = self.parameters->gradients();
  if (chunk > 0) {
    const GradientRange own{range.offset + static_cast<size_t>(context().world_rank(replica)) * chunk, chunk};
    communicator().reduce_scatter(replica, gradients + range.offset, gradients + own.offset, chunk, DataType::f32,
                                  ReduceOp::average, StreamKind::communication);
    self.optimizer->apply(parameters, gradients, own, step, StreamKind::communication, self.parameters);
    communicator().all_gather(replica, parameters + own.offset, parameters + range.offset, chunk, DataType::f32,
                              StreamKind::communication);
    // The other shards arrived as fp32 only: their 16-bit copies (mixed precision) follow here.
    if (self.parameters->weight_copy() != nullptr)
      self.parameters->refresh_weight_copy(GradientRange{range.offset, chunk * n}, StreamKind::communication);
  }
  const GradientRange rest{range.offset + chunk * n, range.count - chunk * n};
  if (rest.count > 0) {
    communicator().all_reduce(replica, gradients + rest.offset, gradients + rest.offset, rest.count, DataType::f32,
                              ReduceOp::average, StreamKind::communication);
    self.optimizer->apply(parameters, gradients, rest, step, StreamKind::communication, self.parameters);
  }
}

void ShardedUpdate::wait_until_done(int replica) {
  CommunicatorExchange::wait_until_done(replica);
  ++steps_completed_[replica];
}

// Per shard, as exchange_shard issues it: the reduce-scatter and the all-gather of its first
// N x (count / N) elements (the shard's update between them), and an all-reduce of the count % N
// left over.
RangeSchedule ShardedUpdate::schedule(GradientRange range, const ScheduleShape& shape) const {
  RangeSchedule schedule;
  schedule.message_bytes = static_cast<double>(range.count) * sizeof(float);
  const size_t n = static_cast<size_t>(shape.world);
  for (const GradientRange& shard : split_range(range, spec_.shards)) {
    const size_t chunk = shard.count / n, rest = shard.count - chunk * n;
    const double sharded = static_cast<double>(chunk * n) * sizeof(float);
    if (chunk > 0) {
      schedule.steps.push_back(collective_step(Collective::reduce_scatter, sharded, shape.world));
      schedule.steps.push_back(collective_step(Collective::all_gather, sharded, shape.world));
    }
    if (rest > 0)
      schedule.steps.push_back(
          collective_step(Collective::all_reduce, static_cast<double>(rest) * sizeof(float), shape.world));
  }
  return schedule;
}

std::string ShardedUpdate::busbw_formula() const {
  return "reduce-scatter + all-gather, an all-reduce's traffic: busbw = algbw x 2(n-1)/n, algbw = fp32 gradient "
         "bytes / transfer time (which includes the shard's update)";
}

void ShardedUpdate::add_details(nlohmann::json& details) const {
  details["sharded_update"] = true;
  details["transfer_includes"] = "each replica's update of its shard, between the two collectives";
}

}  // namespace dpbench
