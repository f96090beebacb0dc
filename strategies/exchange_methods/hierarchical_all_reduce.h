// --hierarchical_all_reduce (distributed_all_reduce; Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE,
// tf_cnn_benchmarks' hierarchical copy): each shard of a range is reduce-scattered among the ranks
// of one host, each piece all-reduced across the hosts among the ranks of the same host-local
// index (one communicator per index), and the pieces all-gathered back inside the host. Only
// 1/L of the bytes (L ranks per host) crosses the hosts' network, from every rank at once. A
// shard whose length L does not divide is padded with zeros in a staging buffer.
#pragma once

#include <memory>

#include "engine/communication/process_subgroup.h"
#include "strategies/all_reduce_spec.h"
#include "strategies/exchange_methods/exchange_method.h"

namespace dpbench {

class HierarchicalAllReduce final : public CommunicatorExchange {
 public:
  explicit HierarchicalAllReduce(AllReduceSpec spec) : CommunicatorExchange(spec.shards), spec_(spec) {}
  ~HierarchicalAllReduce() override;
  std::string description() const override;
  RangeSchedule schedule(GradientRange range, const ScheduleShape& shape) const override;
  ExchangeBuffers buffer_bytes(size_t largest, const ScheduleShape& shape) const override;
  ScheduleShape run_shape() const override;
  std::string busbw_formula() const override;
  void add_details(nlohmann::json& details) const override;
  void abort() override;

 protected:
  void allocate(size_t largest) override;
  void exchange_shard(int replica, GradientRange shard) override;

 private:
  AllReduceSpec spec_;
  HostLayout layout_;
  std::unique_ptr<ProcessSubgroup> host_group_, index_group_;
  std::unique_ptr<Communicator> inside_host_, across_hosts_;
  Buffer staging_, piece_;  // a padded shard, and this rank's 1/L of it
};

}  // namespace dpbench
