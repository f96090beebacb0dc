// HierarchicalAllReduce (see the header).
#include "strategies/exchange_methods/hierarchical_all_reduce.h"

#include "engine/backends.h"
#include "engine/communication/collective_traffic.h"
#include "engine/communication/process_group.h"
#include "engine/errors.h"
#include "strategies/exchange_methods/dense_all_reduce.h"
#include "strategies/exchange_plan.h"

namespace dpbench {

HierarchicalAllReduce::~HierarchicalAllReduce() = default;

std::string HierarchicalAllReduce::description() const {
  return "hierarchical all-reduce (" + spec_.text() + "): reduce-scatter in each host, all-reduce across hosts, "
         "all-gather in each host";
}

void HierarchicalAllReduce::allocate(size_t largest) {
  const ProcessGroup* group = process_group();
  if (group == nullptr || context().replicas.size() != 1)
    throw ConfigError("--hierarchical_all_reduce needs one process per GPU under a launcher (mpirun, srun, torchrun)");
  layout_ = host_layout(*group);
  Device& device = *replica_at(0).device;
  // Every rank makes both, in the same order: their set-up exchanges are the whole job's.
  host_group_ = std::make_unique<ProcessSubgroup>(*group, layout_.same_host);
  index_group_ = std::make_unique<ProcessSubgroup>(*group, layout_.same_local_index);
  inside_host_ = create_process_communicator(device, *host_group_);
  across_hosts_ = create_process_communicator(device, *index_group_);
  const size_t per_host = static_cast<size_t>(layout_.ranks_per_host);
  const size_t padded = (largest + per_host - 1) / per_host * per_host;
  staging_ = device.allocate(std::max<size_t>(padded, 1) * sizeof(float));
  piece_ = device.allocate(std::max<size_t>(padded / per_host, 1) * sizeof(float));
}

void HierarchicalAllReduce::exchange_shard(int replica, GradientRange shard) {
  Device& device = *replica_at(replica).device;
  Backend& ops = device.ops(StreamKind::communication);
  const size_t per_host = static_cast<size_t>(layout_.ranks_per_host);
  const size_t padded = (shard.count + per_host - 1) / per_host * per_host;
  const size_t piece = padded / per_host;
  float* gradients = replica_at(replica).parameters->gradients() + shard.offset;
  // In place where L divides the shard; else through the zero-padded staging buffer.
  float* whole = padded == shard.count ? gradients : staging_.as<float>();
  if (whole != gradients) {
    ops.copy(whole, gradients, shard.count * sizeof(float));
    ops.fill(whole + shard.count, padded - shard.count, 0.0f);
  }
  const StreamKind stream = StreamKind::communication;
  // Averages at both levels: equal ranks per host make the mean of the means the job's mean.
  inside_host_->reduce_scatter(0, whole, piece_.data(), piece, DataType::f32, ReduceOp::average, stream);
  across_hosts_->all_reduce(0, piece_.data(), piece_.data(), piece, DataType::f32, ReduceOp::average, stream);
  inside_host_->all_gather(0, piece_.data(), whole, piece, DataType::f32, stream);
  if (whole != gradients) ops.copy(gradients, whole, shard.count * sizeof(float));
}

// Counted as the all-reduce it replaces (nccl-tests' busbw over the job's ranks), so a series can
// compare flat and hierarchical; bytes_sent is what one rank sends in the three phases.
ExchangeTraffic HierarchicalAllReduce::traffic(const std::vector<GradientRange>& ranges) const {
  ExchangeTraffic traffic = all_reduce_traffic(ranges, context().world_size, 1.0, 3, spec_.shards);
  const double per_host = std::max(1, layout_.ranks_per_host), hosts = std::max(1, layout_.hosts);
  traffic.bytes_sent = traffic.bytes * (2 * (per_host - 1) / per_host + 2 * (hosts - 1) / hosts / per_host);
  return traffic;
}

std::string HierarchicalAllReduce::busbw_formula() const {
  return all_reduce_busbw_formula() + " (the flat all-reduce's, for comparison; 1/L of the bytes crosses hosts)";
}

void HierarchicalAllReduce::add_details(nlohmann::json& details) const {
  details["hierarchy"] = {{"hosts", layout_.hosts},
                          {"ranks_per_host", layout_.ranks_per_host},
                          {"inside_host", inside_host_ ? inside_host_->description() : ""},
                          {"across_hosts", across_hosts_ ? across_hosts_->description() : ""}};
}

void HierarchicalAllReduce::abort() {
  if (inside_host_) inside_host_->abort();
  if (across_hosts_) across_hosts_->abort();
}

}  // namespace dpbench
