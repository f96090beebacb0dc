// ShardedUpdate (see the header).
#include "strategies/exchange_methods/sharded_update.h"

#include "engine/communication/collective_traffic.h"
#include "engine/training/optimizer.h"

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

// Reduce-scatter and all-gather each send (N-1)/N of the shard: an all-reduce's bytes; a shard
// of fewer than N elements is all-reduced alone, one of a count not divisible by N also has its
// remainder all-reduced.
ExchangeTraffic ShardedUpdate::traffic(const std::vector<GradientRange>& ranges) const {
  ExchangeTraffic traffic;
  const size_t ranks = world_size();
  double elements = 0;
  for (const GradientRange& range : ranges) {
    elements += static_cast<double>(range.count);
    for (const GradientRange& shard : shards_of(range))
      traffic.collectives += (shard.count >= ranks ? 2 : 0) + (shard.count % ranks != 0 ? 1 : 0);
  }
  traffic.bytes = elements * sizeof(float);
  const double factor = collective_bus_factor(Collective::reduce_scatter, context().world_size) +
                        collective_bus_factor(Collective::all_gather, context().world_size);
  traffic.bytes_sent = factor * traffic.bytes;
  traffic.bus_bytes = factor * traffic.bytes;
  return traffic;
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
