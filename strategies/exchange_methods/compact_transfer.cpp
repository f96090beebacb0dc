// CompactTransfer (see the header).
#include "strategies/exchange_methods/compact_transfer.h"

#include <algorithm>

#include "strategies/exchange_methods/dense_all_reduce.h"
#include "strategies/exchange_plan.h"

namespace dpbench {

// Per replica: the shard at half width, the chunks received from everyone, the gathered result,
// and fp32 room for a chunk's sum.
struct CompactTransfer::Buffers {
  Buffer outgoing, received, gathered, sum, addend;
};

CompactTransfer::CompactTransfer(AllReduceSpec spec, DataType transfer_type)
    : CommunicatorExchange(spec.shards), spec_(spec), transfer_type_(transfer_type) {}

CompactTransfer::~CompactTransfer() = default;

// Per device: the outgoing, received and gathered ranges at half width (padded to N chunks) and
// two fp32 chunks for the sum, as allocate() makes them.
ExchangeBuffers CompactTransfer::buffer_bytes(size_t largest, const ScheduleShape& shape) const {
  const size_t n = static_cast<size_t>(std::max(1, shape.world));
  const size_t chunk = (largest + n - 1) / n, padded = chunk * n;
  return {3 * padded * data_type_bytes(transfer_type_) + 2 * chunk * sizeof(float), 0};
}

void CompactTransfer::allocate(size_t largest) {
  const size_t n = world_size();
  const size_t chunk = (largest + n - 1) / n, padded = chunk * n;
  const size_t half = data_type_bytes(transfer_type_);
  for (const Replica& replica : context().replicas) {
    Device& device = *replica.device;
    device.make_current();
    auto buffers = std::make_unique<Buffers>();
    const MemoryTag exchange_buffers{MemoryCategory::communication, "compact transfer"};
    buffers->outgoing = device.allocate(padded * half, exchange_buffers);
    buffers->received = device.allocate(padded * half, exchange_buffers);
    buffers->gathered = device.allocate(padded * half, exchange_buffers);
    buffers->sum = device.allocate(chunk * sizeof(float), exchange_buffers);
    buffers->addend = device.allocate(chunk * sizeof(float), exchange_buffers);
    // The padding past a range's end is summed too (its results are dropped): keep it finite.
    device.ops().fill(reinterpret_cast<float*>(buffers->outgoing.data()), padded * half / sizeof(float), 0.0f);
    buffers_.push_back(std::move(buffers));
  }
}

void CompactTransfer::exchange_shard(int replica, GradientRange shard) {
  const Replica& self = replica_at(replica);
  Buffers& buffers = *buffers_[replica];
  Backend& ops = self.device->ops(StreamKind::communication);
  const size_t n = world_size();
  const size_t chunk = (shard.count + n - 1) / n;
  const size_t half = data_type_bytes(transfer_type_);
  float* gradients = self.parameters->gradients() + shard.offset;
  ops.convert(DataType::f32, gradients, transfer_type_, buffers.outgoing.data(), shard.count,
              1.0f / static_cast<float>(n));
  communicator().all_to_all(replica, buffers.outgoing.data(), buffers.received.data(), chunk, transfer_type_,
                            StreamKind::communication);
  float* sum = buffers.sum.as<float>();
  float* addend = buffers.addend.as<float>();
  for (size_t i = 0; i < n; ++i) {  // rank order, fp32
    ops.convert(transfer_type_, static_cast<char*>(buffers.received.data()) + i * chunk * half, DataType::f32,
                i == 0 ? sum : addend, chunk);
    if (i > 0) ops.axpy(1.0f, addend, sum, chunk);
  }
  ops.convert(DataType::f32, sum, transfer_type_, buffers.outgoing.data(), chunk);
  communicator().all_gather(replica, buffers.outgoing.data(), buffers.gathered.data(), chunk, transfer_type_,
                            StreamKind::communication);
  ops.convert(transfer_type_, buffers.gathered.data(), DataType::f32, gradients, shard.count);
}

// Per shard an all-to-all and an all-gather of the shard at half width (their sizes unpadded: the
// chunks' padding, fewer than N elements, is left out): the ring volume of an fp32 all-reduce at
// half the bytes; bus bytes count fp32, as an all-reduce's.
RangeSchedule CompactTransfer::schedule(GradientRange range, const ScheduleShape& shape) const {
  RangeSchedule schedule;
  schedule.message_bytes = static_cast<double>(range.count) * sizeof(float);
  const double width = static_cast<double>(data_type_bytes(transfer_type_)) / sizeof(float);
  for (const GradientRange& shard : split_range(range, spec_.shards)) {
    const double bytes = static_cast<double>(shard.count * data_type_bytes(transfer_type_));
    schedule.steps.push_back(collective_step(Collective::all_to_all, bytes, shape.world, width));
    schedule.steps.push_back(collective_step(Collective::all_gather, bytes, shape.world, width));
  }
  return schedule;
}

std::string CompactTransfer::busbw_formula() const { return all_reduce_busbw_formula(); }

}  // namespace dpbench
