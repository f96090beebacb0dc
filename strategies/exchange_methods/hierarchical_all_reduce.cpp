// HierarchicalAllReduce (see the header).
#include "strategies/exchange_methods/hierarchical_all_reduce.h"

#include <algorithm>

#include "engine/backends.h"
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

// The staging of a whole range padded to the host's GPUs, and one GPU's piece of it, as allocate()
// makes them.
ExchangeBuffers HierarchicalAllReduce::buffer_bytes(size_t largest, const ScheduleShape& shape) const {
  const size_t per_host = static_cast<size_t>(std::max(1, shape.ranks_per_host));
  const size_t padded = (largest + per_host - 1) / per_host * per_host;
  return {(std::max<size_t>(padded, 1) + std::max<size_t>(padded / per_host, 1)) * sizeof(float), 0};
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
  const MemoryTag exchange_buffers{MemoryCategory::communication, "hierarchical all-reduce"};
  staging_ = device.allocate(std::max<size_t>(padded, 1) * sizeof(float), exchange_buffers);
  piece_ = device.allocate(std::max<size_t>(padded / per_host, 1) * sizeof(float), exchange_buffers);
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

// Per shard, as exchange_shard issues it: a reduce-scatter among the L ranks of the host, an
// all-reduce of the rank's 1/L piece among the H hosts (every rank of a host at once, together
// the host's whole share through its network), an all-gather in the host. Sizes unpadded (the
// padding to a multiple of L is left out). Its busbw is counted as the flat all-reduce's over the
// job's ranks, so a series can compare flat and hierarchical.
RangeSchedule HierarchicalAllReduce::schedule(GradientRange range, const ScheduleShape& shape) const {
  RangeSchedule schedule;
  schedule.message_bytes = static_cast<double>(range.count) * sizeof(float);
  schedule.busbw_as = Collective::all_reduce;
  schedule.busbw_ranks = shape.world;
  const int per_host = std::max(1, shape.ranks_per_host), hosts = std::max(1, shape.hosts);
  for (const GradientRange& shard : split_range(range, spec_.shards)) {
    const double bytes = static_cast<double>(shard.count) * sizeof(float);
    ScheduledCollective inside = collective_step(Collective::reduce_scatter, bytes, per_host);
    inside.span = StepRanks::inside_host;
    ScheduledCollective across = collective_step(Collective::all_reduce, bytes / per_host, hosts);
    across.span = StepRanks::across_hosts;
    across.concurrent = per_host;
    schedule.steps.push_back(inside);
    schedule.steps.push_back(across);
    inside.collective = Collective::all_gather;
    schedule.steps.push_back(inside);
  }
  return schedule;
}

ScheduleShape HierarchicalAllReduce::run_shape() const {
  return ScheduleShape{context().world_size, layout_.ranks_per_host, layout_.hosts};
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
