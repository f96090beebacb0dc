// The default exchange: each shard of a range is all-reduced (mean) in place, in fp32, by the
// communicator (NCCL on GPUs, the in-process one on the reference backend).
#pragma once

#include "strategies/all_reduce_spec.h"
#include "strategies/exchange_methods/exchange_method.h"

namespace dpbench {

class DenseAllReduce final : public CommunicatorExchange {
 public:
  explicit DenseAllReduce(AllReduceSpec spec) : CommunicatorExchange(spec.shards), spec_(spec) {}
  std::string description() const override { return "all-reduce (" + spec_.text() + ")"; }
  RangeSchedule schedule(GradientRange range, const ScheduleShape& shape) const override;
  std::string busbw_formula() const override;

 protected:
  void exchange_shard(int replica, GradientRange shard) override;

 private:
  AllReduceSpec spec_;
};

// The busbw formula of an all-reduce's traffic, counted in fp32 gradient bytes.
std::string all_reduce_busbw_formula();

}  // namespace dpbench
