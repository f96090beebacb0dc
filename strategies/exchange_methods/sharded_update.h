// --sharded_update on the nccl spec: a shard of a range is reduce-scattered instead of
// all-reduced; each replica then holds the mean gradient of its 1/N of it, updates those
// parameters alone (on the communication stream, while backward goes on) and all-gathers them
// back into every replica. The same bytes travel as in an all-reduce, but each replica runs 1/N
// of the optimizer's work, and only the last range's share of it follows backward. Parameters
// change during backward, so a model must announce a range only once backward no longer reads
// those parameters (all of dpbench's models do: a layer announces after computing its input
// gradient).
#pragma once

#include "strategies/all_reduce_spec.h"
#include "strategies/exchange_methods/exchange_method.h"

namespace dpbench {

class ShardedUpdate final : public CommunicatorExchange {
 public:
  explicit ShardedUpdate(AllReduceSpec spec) : CommunicatorExchange(spec.shards), spec_(spec) {}
  std::string description() const override {
    return "reduce-scatter, sharded update, all-gather (" + spec_.text() + ")";
  }
  void wait_until_done(int replica) override;
  bool updates_parameters() const override { return true; }
  RangeSchedule schedule(GradientRange range, const ScheduleShape& shape) const override;
  std::string busbw_formula() const override;
  void add_details(nlohmann::json& details) const override;

 protected:
  void allocate(size_t largest) override;
  void exchange_shard(int replica, GradientRange shard) override;

 private:
  AllReduceSpec spec_;
  std::vector<int64_t> steps_completed_;  // per replica: the update's step number during exchanges
};

}  // namespace dpbench
