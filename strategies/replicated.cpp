// ReplicatedStrategy (see the header).
#include "strategies/replicated.h"

#include <algorithm>

#include "engine/errors.h"

namespace dpbench {

DataType compact_transfer_type(const RunConfig& config) {
  if (config.compact_gradient_transfer == "fp16") return DataType::f16;
  if (config.compact_gradient_transfer == "bf16") return DataType::bf16;
  return DataType::f32;
}

// Per replica, for compact transfers through the communicator: the range at half width, the
// chunks received from everyone, the gathered result, and fp32 room for a chunk's sum.
struct ReplicatedStrategy::CompactBuffers {
  Buffer outgoing, received, gathered, sum, addend;
};

ReplicatedStrategy::ReplicatedStrategy(const RunConfig& config)
    : BucketedExchangeStrategy(config),
      spec_(parse_all_reduce_spec(config.all_reduce_spec.empty() ? "nccl" : config.all_reduce_spec)),
      transfer_type_(compact_transfer_type(config)) {
  if (config.sparse_embedding_grads)
    throw ConfigError("--sparse_embedding_grads: not implemented yet; embeddings are exchanged dense "
                      "(drop the flag)");
}

ReplicatedStrategy::~ReplicatedStrategy() = default;

void ReplicatedStrategy::prepare(const ParameterLayout& layout) {
  std::vector<Device*> devices;
  for (const Replica& replica : replicas()) devices.push_back(replica.device);
  size_t largest = 0;
  for (const GradientRange& range : plan())
    for (const GradientRange& shard : split_range(range, spec_.shards)) largest = std::max(largest, shard.count);
  for (const Replica& replica : replicas()) {
    replica.device->make_current();
    exchanged_.push_back(replica.device->create_event(false));
  }
  if (spec_.algorithm == "nccl") {
    communicator_ = create_communicator(devices);
    if (transfer_type_ != DataType::f32) {
      const size_t n = replicas().size();
      const size_t chunk = (largest + n - 1) / n, padded = chunk * n;
      const size_t half = data_type_bytes(transfer_type_);
      for (const Replica& replica : replicas()) {
        Device& device = *replica.device;
        device.make_current();
        auto buffers = std::make_unique<CompactBuffers>();
        buffers->outgoing = device.allocate(padded * half);
        buffers->received = device.allocate(padded * half);
        buffers->gathered = device.allocate(padded * half);
        buffers->sum = device.allocate(chunk * sizeof(float));
        buffers->addend = device.allocate(chunk * sizeof(float));
        // The padding past a range's end is summed too (its results are dropped): keep it finite.
        device.ops().fill(reinterpret_cast<float*>(buffers->outgoing.data()), padded * half / sizeof(float), 0.0f);
        compact_.push_back(std::move(buffers));
      }
    }
  } else {
    enable_peer_access(devices);
    std::vector<ExchangeMeter*> meters;
    for (int r = 0; r < num_replicas(); ++r) meters.push_back(&meter(r));
    peer_ = std::make_unique<PeerAllReduce>(spec_.algorithm, spec_.shards, transfer_type_, replicas(), largest,
                                            meters, kernel_counters());
  }
  replicas().front().device->make_current();
}

bool ReplicatedStrategy::step_is_replayable() const {
  return communicator_ != nullptr && communicator_->capturable();
}

void ReplicatedStrategy::abort() {
  if (communicator_) communicator_->abort();
  if (peer_) peer_->abort();
}

void ReplicatedStrategy::exchange(int replica, size_t index, const Event& ready) {
  const GradientRange range = plan()[index];
  if (peer_) {
    peer_->exchange(replica, range, ready);
    return;
  }
  const Replica& self = replicas()[replica];
  Device& device = *self.device;
  device.wait(StreamKind::communication, ready);
  meter(replica).begin_transfer(StreamKind::communication);
  for (const GradientRange& shard : split_range(range, spec_.shards)) {
    if (transfer_type_ != DataType::f32) {
      compact_all_reduce(replica, shard);
    } else {
      float* gradients = self.parameters->gradients() + shard.offset;
      communicator_->all_reduce(replica, gradients, gradients, shard.count, DataType::f32, ReduceOp::average,
                                StreamKind::communication);
    }
  }
  meter(replica).end_transfer(StreamKind::communication);
  count_kernels(replica, 2);
}

void ReplicatedStrategy::compact_all_reduce(int replica, GradientRange range) {
  const Replica& self = replicas()[replica];
  CompactBuffers& buffers = *compact_[replica];
  Backend& ops = self.device->ops(StreamKind::communication);
  const size_t n = replicas().size();
  const size_t chunk = (range.count + n - 1) / n;
  const size_t half = data_type_bytes(transfer_type_);
  float* gradients = self.parameters->gradients() + range.offset;
  // Scaled by 1/N before rounding, so that the sum of N values cannot overflow fp16.
  ops.convert(DataType::f32, gradients, transfer_type_, buffers.outgoing.data(), range.count,
              1.0f / static_cast<float>(n));
  communicator_->all_to_all(replica, buffers.outgoing.data(), buffers.received.data(), chunk, transfer_type_,
                            StreamKind::communication);
  float* sum = buffers.sum.as<float>();
  float* addend = buffers.addend.as<float>();
  for (size_t i = 0; i < n; ++i) {  // rank order, fp32
    ops.convert(transfer_type_, static_cast<char*>(buffers.received.data()) + i * chunk * half, DataType::f32,
                i == 0 ? sum : addend, chunk);
    if (i > 0) ops.axpy(1.0f, addend, sum, chunk);
  }
  ops.convert(DataType::f32, sum, transfer_type_, buffers.outgoing.data(), chunk);
  communicator_->all_gather(replica, buffers.outgoing.data(), buffers.gathered.data(), chunk, transfer_type_,
                            StreamKind::communication);
  ops.convert(transfer_type_, buffers.gathered.data(), DataType::f32, gradients, range.count);
  count_kernels(replica, 2 * static_cast<int64_t>(n) + 2);
}

void ReplicatedStrategy::complete_step(int replica, int64_t step) {
  const Replica& self = replicas()[replica];
  Device& device = *self.device;
  meter(replica).begin_wait();
  if (peer_) {
    peer_->wait_until_done(replica);
  } else {
    exchanged_[replica]->record(StreamKind::communication);
    device.wait(StreamKind::compute, *exchanged_[replica]);
  }
  meter(replica).end_wait();
  // Every replica now holds the same mean gradients and applies the same update.
  self.optimizer->begin_update(self.parameters->gradients(), self.parameters->count());
  self.optimizer->apply(self.parameters->parameters(), self.parameters->gradients(),
                        GradientRange{0, self.parameters->count()}, step, StreamKind::compute, self.parameters);
  self.optimizer->end_update();
  count_kernels(replica, 3);
}

TrafficModel ReplicatedStrategy::traffic() const {
  TrafficModel model;
  const double n = static_cast<double>(replicas().size());
  const size_t count = replicas().front().parameters->count();
  model.exchange = "all-reduce (" + spec_.text() + ")";
  model.transfer_type = data_type_name(transfer_type_);
  model.bytes_per_step = static_cast<double>(count) * sizeof(float);
  const int64_t pieces = static_cast<int64_t>(plan().size()) * spec_.shards;
  if (peer_) {
    model.communicator = peer_->description();
    model.bytes_sent_per_device = peer_->bytes_sent(count);
    model.collectives_per_step = 0;
    for (const GradientRange& range : plan()) model.collectives_per_step += peer_->transfers(range.count);
  } else {
    model.communicator = communicator_->description();
    const double half = transfer_type_ == DataType::f32 ? 1.0 : 0.5;
    // Ring all-reduce: reduce-scatter then all-gather, each sending (N-1)/N of the message.
    model.bytes_sent_per_device = 2.0 * (n - 1) / n * model.bytes_per_step * half;
    model.collectives_per_step = pieces * (transfer_type_ == DataType::f32 ? 1 : 2);
  }
  model.busbw_factor = 2.0 * (n - 1) / n;
  model.busbw_formula = "all-reduce: busbw = algbw x 2(n-1)/n, algbw = fp32 gradient bytes / transfer time";
  return model;
}

}  // namespace dpbench
