// DenseAllReduce (see the header), and the ring all-reduce's traffic that other methods share.
#include "strategies/exchange_methods/dense_all_reduce.h"

#include "engine/communication/collective_traffic.h"
#include "strategies/exchange_plan.h"

namespace dpbench {

void DenseAllReduce::exchange_shard(int replica, GradientRange shard) {
  float* gradients = replica_at(replica).parameters->gradients() + shard.offset;
  communicator().all_reduce(replica, gradients, gradients, shard.count, DataType::f32, ReduceOp::average,
                            StreamKind::communication);
}

ExchangeTraffic DenseAllReduce::traffic(const std::vector<GradientRange>& ranges) const {
  return all_reduce_traffic(ranges, context().world_size, 1.0, 1, spec_.shards);
}

std::string DenseAllReduce::busbw_formula() const { return all_reduce_busbw_formula(); }

std::string all_reduce_busbw_formula() {
  return "all-reduce: busbw = algbw x 2(n-1)/n, algbw = fp32 gradient bytes / transfer time";
}

ExchangeTraffic all_reduce_traffic(const std::vector<GradientRange>& ranges, int ranks, double width,
                                   int64_t collectives_per_shard, int shards) {
  ExchangeTraffic traffic;
  double elements = 0;
  for (const GradientRange& range : ranges) {
    elements += static_cast<double>(range.count);
    traffic.collectives += collectives_per_shard * static_cast<int64_t>(split_range(range, shards).size());
  }
  traffic.bytes = elements * sizeof(float);
  const double factor = collective_bus_factor(Collective::all_reduce, ranks);
  traffic.bytes_sent = factor * traffic.bytes * width;
  traffic.bus_bytes = factor * traffic.bytes;  // busbw counts fp32 bytes, whatever the width
  return traffic;
}

}  // namespace dpbench
