// DenseAllReduce (see the header), and the ring all-reduce's traffic that other methods share.
#include "strategies/exchange_methods/dense_all_reduce.h"

#include "strategies/exchange_plan.h"

namespace dpbench {

void DenseAllReduce::exchange_shard(int replica, GradientRange shard) {
  float* gradients = replica_at(replica).parameters->gradients() + shard.offset;
  communicator().all_reduce(replica, gradients, gradients, shard.count, DataType::f32, ReduceOp::average,
                            StreamKind::communication);
}

// One fp32 all-reduce of each shard over the job's ranks.
RangeSchedule DenseAllReduce::schedule(GradientRange range, const ScheduleShape& shape) const {
  RangeSchedule schedule;
  schedule.message_bytes = static_cast<double>(range.count) * sizeof(float);
  for (const GradientRange& shard : split_range(range, spec_.shards))
    schedule.steps.push_back(collective_step(Collective::all_reduce, static_cast<double>(shard.count) * sizeof(float),
                                             shape.world));
  return schedule;
}

std::string DenseAllReduce::busbw_formula() const { return all_reduce_busbw_formula(); }

std::string all_reduce_busbw_formula() {
  return "all-reduce: busbw = algbw x 2(n-1)/n, algbw = fp32 gradient bytes / transfer time";
}

}  // namespace dpbench
