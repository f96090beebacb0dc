// ReplicatedStrategy (see the header).
#include "strategies/replicated.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "engine/errors.h"
#include "engine/optimizer.h"

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

// Per replica, for --sparse_embedding_grads; sized for the largest table and shared by all of
// them (a replica's sparse exchanges run one after another on its communication stream).
struct ReplicatedStrategy::SparseBuffers {
  Buffer touched;    // int32 (ids): the distinct rows a step touched, ascending
  Buffer count;      // int32 (1): how many; stays on the device
  Buffer workspace;  // embedding_touched_rows' scratch
  Buffer pack;       // this replica's pack: pack_ids int32 ids, then (capacity, dim) values
  Buffer gathered;   // every replica's pack, rank after rank
};

ReplicatedStrategy::ReplicatedStrategy(const RunConfig& config)
    : BucketedExchangeStrategy(config),
      spec_(parse_all_reduce_spec(config.all_reduce_spec.empty() ? "nccl" : config.all_reduce_spec)),
      transfer_type_(compact_transfer_type(config)),
      sharded_(config.sharded_update) {
  // The touched rows travel through the communicator (an all-gather), which only the nccl spec
  // creates; our own algorithms (xring, psgpu, pscpu) all-reduce dense ranges only.
  if (config.sparse_embedding_grads && spec_.algorithm != "nccl")
    throw ConfigError("--sparse_embedding_grads with --all_reduce_spec=" + spec_.text() +
                      ": the touched embedding rows are all-gathered through NCCL, which only the nccl "
                      "spec uses; use --all_reduce_spec=nccl (or nccl#k), or drop --sparse_embedding_grads");
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
    if (sharded_ && replica.optimizer->config().loss_scaling == LossScaling::automatic)
      throw ConfigError("--sharded_update with automatic loss scaling: each shard's owner would decide alone "
                        "whether to skip a step; use a fixed --fp16_loss_scale, or drop --sharded_update");
  }
  steps_completed_.assign(replicas().size(), 0);
  plan_sparse_exchange();
  if (spec_.algorithm == "nccl") {
    communicator_ = create_exchange_communicator();
    if (transfer_type_ != DataType::f32) {
      const size_t n = static_cast<size_t>(world_size());
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
    if (!sparse_tables_.empty()) {
      size_t most_ids = 1, most_pack = 1;
      for (size_t t = 0; t < sparse_tables_.size(); ++t) {
        most_ids = std::max(most_ids, sparse_tables_[t].num_ids);
        most_pack = std::max(most_pack, pack_floats(t));
      }
      for (const Replica& replica : replicas()) {
        Device& device = *replica.device;
        device.make_current();
        size_t workspace = 1;
        for (const SparseGradientSource& table : sparse_tables_) {
          workspace =
              std::max(workspace, device.ops().embedding_touched_rows_workspace_bytes(table.num_ids, table.rows));
        }
        auto buffers = std::make_unique<SparseBuffers>();
        buffers->touched = device.allocate(most_ids * sizeof(int32_t));
        buffers->count = device.allocate(sizeof(int32_t));
        buffers->workspace = device.allocate(workspace);
        buffers->pack = device.allocate(most_pack * sizeof(float));
        buffers->gathered = device.allocate(static_cast<size_t>(world_size()) * most_pack * sizeof(float));
        // The ids' padding (up to a multiple of 4) is never written again: keep it row 0.
        device.ops().fill(buffers->pack.as<float>(), most_pack, 0.0f);
        sparse_.push_back(std::move(buffers));
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

void ReplicatedStrategy::plan_sparse_exchange() {
  parts_.clear();
  for (const GradientRange& range : plan()) parts_.push_back(PlannedParts{{range}, {}});
  if (!config().sparse_embedding_grads) return;
  const Replica& first = replicas().front();
  sparse_tables_ = first.sparse;
  if (sparse_tables_.empty())
    throw ConfigError("--sparse_embedding_grads: the model has no embedding tables to exchange sparsely; "
                      "drop --sparse_embedding_grads");
  auto same_table = [](const SparseGradientSource& a, const SparseGradientSource& b) {
    return a.range.offset == b.range.offset && a.range.count == b.range.count && a.rows == b.rows &&
           a.dim == b.dim && a.num_ids == b.num_ids;
  };
  for (const Replica& replica : replicas()) {
    const std::vector<SparseGradientSource>& tables = replica.sparse;
    if (tables.size() != sparse_tables_.size() ||
        !std::equal(tables.begin(), tables.end(), sparse_tables_.begin(), same_table))
      throw RuntimeError("--sparse_embedding_grads: replica " + std::to_string(replica.index) +
                         " reports other embedding tables than replica 0");
  }
  // The tables by offset: they must lie inside the buffer, without overlapping.
  std::vector<size_t> by_offset(sparse_tables_.size());
  std::iota(by_offset.begin(), by_offset.end(), size_t{0});
  std::sort(by_offset.begin(), by_offset.end(),
            [&](size_t a, size_t b) { return sparse_tables_[a].range.offset < sparse_tables_[b].range.offset; });
  size_t previous_end = 0;
  for (size_t t : by_offset) {
    const SparseGradientSource& table = sparse_tables_[t];
    if (table.rows <= 0 || table.dim <= 0 ||
        table.range.count != static_cast<size_t>(table.rows) * static_cast<size_t>(table.dim) ||
        table.range.offset < previous_end || table.range.end() > first.parameters->count())
      throw RuntimeError("--sparse_embedding_grads: embedding table " + std::to_string(t) + " at [" +
                         std::to_string(table.range.offset) + ", " + std::to_string(table.range.end()) +
                         ") is not a (rows, dim) range of its own inside the gradient buffer");
    previous_end = table.range.end();
  }
  // A step touches at most min(ids, rows) distinct rows: the fixed size every pack has, so that
  // the host never needs the step's actual count.
  for (const SparseGradientSource& table : sparse_tables_)
    sparse_capacity_.push_back(std::min(table.num_ids, static_cast<size_t>(table.rows)));

  std::vector<bool> assigned(sparse_tables_.size(), false);
  for (size_t index = 0; index < plan().size(); ++index) {
    const GradientRange range = plan()[index];
    PlannedParts parts;
    size_t cursor = range.offset;  // first element not yet covered
    for (size_t t : by_offset) {
      const GradientRange table = sparse_tables_[t].range;
      if (table.end() <= range.offset || table.offset >= range.end()) continue;
      if (table.offset > cursor) parts.dense.push_back(GradientRange{cursor, table.offset - cursor});
      cursor = std::max(cursor, std::min(table.end(), range.end()));
      if (!assigned[t]) parts.tables.push_back(t);
      assigned[t] = true;
    }
    if (cursor < range.end()) parts.dense.push_back(GradientRange{cursor, range.end() - cursor});
    parts_[index] = parts;
  }
}

size_t ReplicatedStrategy::pack_ids(size_t table) const { return (sparse_capacity_[table] + 3) / 4 * 4; }

size_t ReplicatedStrategy::pack_floats(size_t table) const {
  const size_t values = sparse_capacity_[table] * static_cast<size_t>(sparse_tables_[table].dim);
  return pack_ids(table) + (values + 3) / 4 * 4;  // every rank's pack starts 16-byte aligned too
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
  const PlannedParts& parts = parts_[index];
  for (const GradientRange& part : parts.dense) {
    for (const GradientRange& shard : split_range(part, spec_.shards)) {
      if (sharded_) {
        sharded_exchange(replica, shard);
      } else if (transfer_type_ != DataType::f32) {
        compact_all_reduce(replica, shard);
      } else {
        float* gradients = self.parameters->gradients() + shard.offset;
        communicator_->all_reduce(replica, gradients, gradients, shard.count, DataType::f32, ReduceOp::average,
                                  StreamKind::communication);
      }
    }
  }
  for (size_t table : parts.tables) sparse_exchange(replica, table);
  meter(replica).end_transfer(StreamKind::communication);
  count_kernels(replica, 2);
}

// One table, on the communication stream, nothing read back by the host (capturable):
//   touched rows -> pack (ids, values / N) at the capacity -> all-gather of the packs ->
//   zeroed table gradient += every rank's pack, rank by rank.
// Rows only some replicas touched get the others' zeros implicitly, so the result is the dense
// mean. Within one rank's pack the rows are distinct (the padding adds zeros to row 0), so even
// the GPU's atomic scatter-add sums each element in rank order: every replica computes the same
// bits.
void ReplicatedStrategy::sparse_exchange(int replica, size_t table_index) {
  const Replica& self = replicas()[replica];
  const SparseGradientSource& table = self.sparse[table_index];  // this replica's ids
  SparseBuffers& buffers = *sparse_[replica];
  Backend& ops = self.device->ops(StreamKind::communication);
  const size_t n = static_cast<size_t>(world_size());
  const size_t capacity = sparse_capacity_[table_index];
  const size_t ids = pack_ids(table_index), floats = pack_floats(table_index);
  float* gradient = self.parameters->gradients() + table.range.offset;  // (rows, dim)
  int32_t* touched = buffers.touched.as<int32_t>();
  int32_t* count = buffers.count.as<int32_t>();
  float* pack = buffers.pack.as<float>();
  float* gathered = buffers.gathered.as<float>();
  if (capacity > 0) {
    ops.embedding_touched_rows(table.ids, table.num_ids, table.rows, touched, count, buffers.workspace.data());
    ops.gather_rows(gradient, table.dim, touched, count, capacity, reinterpret_cast<int32_t*>(pack), pack + ids);
    ops.scale(pack + ids, capacity * static_cast<size_t>(table.dim), 1.0f / static_cast<float>(n));
    // The int32 ids ride in an fp32 all-gather as bit patterns: an all-gather copies bytes and
    // does no arithmetic, so they arrive unchanged.
    communicator_->all_gather(replica, pack, gathered, floats, DataType::f32, StreamKind::communication);
  }
  ops.fill(gradient, table.range.count, 0.0f);
  for (size_t rank = 0; rank < n && capacity > 0; ++rank) {
    const float* block = gathered + rank * floats;
    ops.embedding_backward(reinterpret_cast<const int32_t*>(block), block + ids, capacity, table.dim, gradient);
  }
  count_kernels(replica, 5 + static_cast<int64_t>(n));
}

// In place in the replica's buffers, on the communication stream: the first N x (count / N)
// elements are reduce-scattered (this replica's world rank picks its chunk), updated and
// all-gathered; the count % N left over (fewer than N) are all-reduced and updated everywhere.
void ReplicatedStrategy::sharded_exchange(int replica, GradientRange range) {
  const Replica& self = replicas()[replica];
  const size_t n = static_cast<size_t>(world_size());
  const size_t chunk = range.count / n;
  const int64_t step = steps_completed_[replica] + 1;
  float* parameters = self.parameters->parameters();
  float* gradients = self.parameters->gradients();
  if (chunk > 0) {
    const GradientRange own{range.offset + static_cast<size_t>(world_rank(replica)) * chunk, chunk};
    communicator_->reduce_scatter(replica, gradients + range.offset, gradients + own.offset, chunk, DataType::f32,
                                  ReduceOp::average, StreamKind::communication);
    self.optimizer->apply(parameters, gradients, own, step, StreamKind::communication, self.parameters);
    communicator_->all_gather(replica, parameters + own.offset, parameters + range.offset, chunk, DataType::f32,
                              StreamKind::communication);
    // The other shards arrived as fp32 only: their 16-bit copies (mixed precision) follow here.
    if (self.parameters->weight_copy() != nullptr)
      self.parameters->refresh_weight_copy(GradientRange{range.offset, chunk * n}, StreamKind::communication);
    count_kernels(replica, 3);
  }
  const GradientRange rest{range.offset + chunk * n, range.count - chunk * n};
  if (rest.count > 0) {
    communicator_->all_reduce(replica, gradients + rest.offset, gradients + rest.offset, rest.count, DataType::f32,
                              ReduceOp::average, StreamKind::communication);
    self.optimizer->apply(parameters, gradients, rest, step, StreamKind::communication, self.parameters);
    count_kernels(replica, 2);
  }
}

void ReplicatedStrategy::compact_all_reduce(int replica, GradientRange range) {
  const Replica& self = replicas()[replica];
  CompactBuffers& buffers = *compact_[replica];
  Backend& ops = self.device->ops(StreamKind::communication);
  const size_t n = static_cast<size_t>(world_size());
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
  ++steps_completed_[replica];
  if (sharded_) {  // the exchanges updated and gathered every range already
    count_kernels(replica, 1);
    return;
  }
  // Every replica now holds the same mean gradients and applies the same update.
  self.optimizer->begin_update(self.parameters->gradients(), self.parameters->count());
  self.optimizer->apply(self.parameters->parameters(), self.parameters->gradients(),
                        GradientRange{0, self.parameters->count()}, step, StreamKind::compute, self.parameters);
  self.optimizer->end_update();
  count_kernels(replica, 3);
}

TrafficModel ReplicatedStrategy::traffic() const {
  TrafficModel model;
  const double n = static_cast<double>(world_size());
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
    if (sharded_) {
      // Reduce-scatter and all-gather each send (N-1)/N of the range: an all-reduce's bytes.
      model.exchange = "reduce-scatter, sharded update, all-gather (" + spec_.text() + ")";
      const size_t ranks = static_cast<size_t>(world_size());
      model.collectives_per_step = 0;
      for (const GradientRange& range : plan())
        for (const GradientRange& shard : split_range(range, spec_.shards))
          model.collectives_per_step += (shard.count >= ranks ? 2 : 0) + (shard.count % ranks != 0 ? 1 : 0);
      model.details["sharded_update"] = true;
      model.details["transfer_includes"] = "each replica's update of its shard, between the two collectives";
    }
  }
  model.busbw_factor = 2.0 * (n - 1) / n;
  model.busbw_formula = "all-reduce: busbw = algbw x 2(n-1)/n, algbw = fp32 gradient bytes / transfer time";
  if (sharded_)
    model.busbw_formula = "reduce-scatter + all-gather, an all-reduce's traffic: busbw = algbw x 2(n-1)/n, algbw = "
                          "fp32 gradient bytes / transfer time (which includes the shard's update)";
  if (!sparse_tables_.empty()) add_sparse_traffic(model);
  return model;
}

// --sparse_embedding_grads: D fp32 bytes all-reduced (the ranges less the tables) and G bytes of
// packs each replica contributes to all-gathers (ids and values at the capacity, fp32 whatever
// --compact_gradient_transfer says). In a ring, an all-reduce sends 2(n-1)/n x D per device and
// an all-gather (n-1) x G (its own pack to each other device): nccl-tests' busbw of each
// collective times its time. One busbw for both is then that traffic over the transfer time.
void ReplicatedStrategy::add_sparse_traffic(TrafficModel& model) const {
  const double n = static_cast<double>(world_size());
  double dense_elements = 0;
  int64_t dense_pieces = 0;
  for (const PlannedParts& parts : parts_) {
    for (const GradientRange& part : parts.dense) {
      dense_elements += static_cast<double>(part.count);
      dense_pieces += static_cast<int64_t>(split_range(part, spec_.shards).size());
    }
  }
  const double dense_bytes = dense_elements * sizeof(float);
  double sparse_bytes = 0;
  nlohmann::json rows = nlohmann::json::array();
  for (size_t t = 0; t < sparse_tables_.size(); ++t) {
    sparse_bytes += static_cast<double>(pack_floats(t)) * sizeof(float);
    rows.push_back(sparse_capacity_[t]);
  }
  const double half = transfer_type_ == DataType::f32 ? 1.0 : 0.5;
  model.exchange = "all-reduce (" + spec_.text() + "), embedding rows all-gathered";
  model.embedding_exchange = "sparse";
  model.bytes_per_step = dense_bytes + sparse_bytes;
  model.bytes_sent_per_device = 2.0 * (n - 1) / n * dense_bytes * half + (n - 1) * sparse_bytes;
  model.collectives_per_step = dense_pieces * (transfer_type_ == DataType::f32 ? 1 : 2) +
                               static_cast<int64_t>(sparse_tables_.size());
  const double bus_bytes = 2.0 * (n - 1) / n * dense_bytes + (n - 1) * sparse_bytes;
  model.busbw_factor = model.bytes_per_step > 0 ? bus_bytes / model.bytes_per_step : 0.0;
  model.busbw_formula =
      "all-reduce of D dense bytes + all-gather of G bytes from each replica (dense_bytes_per_step, "
      "sparse_bytes_per_step): busbw = (2(n-1)/n x D + (n-1) x G) / transfer time, the per-device ring "
      "traffic in fp32 bytes (each collective's nccl-tests busbw); algbw = (D + G) / transfer time";
  model.details["dense_bytes_per_step"] = dense_bytes;
  model.details["sparse_bytes_per_step"] = sparse_bytes;
  model.details["sparse_embedding_tables"] = sparse_tables_.size();
  model.details["sparse_rows_per_table"] = rows;  // the capacity: min(ids per step, rows)
  model.details["sparse_transfer_type"] = "fp32";
}

}  // namespace dpbench
