// PeerAllReduce (see the header). Chunk c of a range of n elements on N devices is
// [n*c/N, n*(c+1)/N): chunks may be empty for tiny ranges, and every step still records its
// event so that the order of waits never depends on sizes.
#include "strategies/exchange_methods/peer_all_reduce.h"

#include <cstring>

#include "engine/backends.h"
#include "engine/errors.h"
#include "strategies/exchange_methods/dense_all_reduce.h"
#include "strategies/exchange_plan.h"

namespace dpbench {
namespace {

GradientRange chunk_of(GradientRange range, int chunk, int chunks) {
  const size_t begin = range.count * chunk / chunks, end = range.count * (chunk + 1) / chunks;
  return GradientRange{range.offset + begin, end - begin};
}

char* at(void* base, size_t element, DataType type) {
  return static_cast<char*>(base) + element * data_type_bytes(type);
}

}  // namespace

struct PeerAllReduce::RankState {
  Device* device = nullptr;
  float* gradients = nullptr;
  std::vector<std::unique_ptr<Event>> steps;  // xring: one per ring step
  std::unique_ptr<Event> converted, reduced, staged, done;
  Buffer staging;      // xring: one chunk (fp32); psgpu: N-1 chunks of the transfer type
  Buffer outgoing;     // compact psgpu and pscpu: the range at half width
  Buffer accumulator;  // compact psgpu: fp32 chunk sum and one converted addend
  Buffer host_staging; // pscpu: the range, pinned host memory
};

PeerAllReduce::PeerAllReduce(AllReduceSpec spec, DataType transfer_type)
    : spec_(std::move(spec)), transfer_type_(transfer_type) {
  const AllReduceAlgorithm algorithm = spec_.algorithm;
  if (algorithm == AllReduceAlgorithm::nccl)
    throw ConfigError("--all_reduce_spec=" + spec_.text() + ": not an all-reduce of our own");
  if (algorithm == AllReduceAlgorithm::xring && transfer_type != DataType::f32)
    throw ConfigError("--compact_gradient_transfer with xring: a ring forwards partial sums, which would be "
                      "rounded at every hop; use psgpu, pscpu or nccl");
}

PeerAllReduce::~PeerAllReduce() = default;

// As prepare() makes them: xring a chunk of staging; psgpu N-1 chunks (and at half width the
// outgoing range and two fp32 chunks); pscpu the outgoing range at half width and its host
// staging, with the host's sum beside device 0 (the fullest).
ExchangeBuffers PeerAllReduce::buffer_bytes(size_t max_count, const ScheduleShape& shape) const {
  const size_t n = static_cast<size_t>(std::max(1, shape.world));
  const size_t max_chunk = max_count / n + 1;
  const bool compact = transfer_type_ != DataType::f32;
  const size_t half = data_type_bytes(transfer_type_);
  ExchangeBuffers buffers;
  if (spec_.algorithm == AllReduceAlgorithm::xring) {
    buffers.device = max_chunk * sizeof(float);
  } else if (spec_.algorithm == AllReduceAlgorithm::psgpu) {
    buffers.device = (n > 1 ? n - 1 : 1) * max_chunk * half + (compact ? max_count * half + 2 * max_chunk * sizeof(float) : 0);
  } else {
    buffers.device = compact ? max_count * half : 0;
    buffers.pinned_host = 2 * max_count * half;
  }
  return buffers;
}

void PeerAllReduce::prepare(const ExchangeContext& context, size_t max_count) {
  replicas_ = context.replicas;
  meters_ = context.meters;
  std::vector<Device*> devices;
  for (const Replica& replica : replicas_) devices.push_back(replica.device);
  enable_peer_access(devices);
  rendezvous_ = std::make_unique<Rendezvous<const Event*>>(static_cast<int>(replicas_.size()));
  const AllReduceAlgorithm algorithm = spec_.algorithm;
  const int n = static_cast<int>(replicas_.size());
  const size_t max_chunk = max_count / n + 1;
  const bool compact = transfer_type_ != DataType::f32;
  const size_t half = data_type_bytes(transfer_type_);
  const MemoryTag exchange_buffers{MemoryCategory::communication, "peer all-reduce"};
  for (const Replica& replica : replicas_) {
    auto rank = std::make_unique<RankState>();
    Device& device = *replica.device;
    device.make_current();
    rank->device = &device;
    rank->gradients = replica.parameters->gradients();
    rank->converted = device.create_event(false);
    rank->reduced = device.create_event(false);
    rank->staged = device.create_event(false);
    rank->done = device.create_event(false);
    if (algorithm == AllReduceAlgorithm::xring) {
      for (int i = 0; i < 2 * (n - 1); ++i) rank->steps.push_back(device.create_event(false));
      rank->staging = device.allocate(max_chunk * sizeof(float), exchange_buffers);
    } else if (algorithm == AllReduceAlgorithm::psgpu) {
      rank->staging = device.allocate(std::max(1, n - 1) * max_chunk * half, exchange_buffers);
      if (compact) {
        rank->outgoing = device.allocate(max_count * half, exchange_buffers);
        rank->accumulator = device.allocate(2 * max_chunk * sizeof(float), exchange_buffers);
      }
    } else {
      if (compact) rank->outgoing = device.allocate(max_count * half, exchange_buffers);
      rank->host_staging = device.allocate_host_visible(max_count * half, exchange_buffers);
    }
    ranks_.push_back(std::move(rank));
  }
  if (algorithm == AllReduceAlgorithm::pscpu) {
    host_threads_ = std::make_unique<HostThreadPool>();
    host_sum_ = replicas_.front().device->allocate_host_visible(max_count * half, exchange_buffers);
  }
  replicas_.front().device->make_current();
}

void PeerAllReduce::abort() {
  if (rendezvous_) rendezvous_->abort();
}

std::string PeerAllReduce::communicator_description() const {
  if (spec_.algorithm == AllReduceAlgorithm::xring) return "ring of peer copies and reduce kernels";
  if (spec_.algorithm == AllReduceAlgorithm::psgpu) return "peer copies, per-device shard sums, gather";
  return "host sum (" + std::to_string(host_threads_->threads()) + " threads), copies to and from pinned memory";
}

// Per shard: xring and psgpu copy 2(N-1) chunks of 1/N of it into each device (a ring's, or a
// shard-then-gather's, all-reduce volume); pscpu copies each device's shard up to the host and
// the sum back. The copies carry the transfer type; busbw counts fp32 gradient bytes as the
// all-reduce's they replace.
RangeSchedule PeerAllReduce::schedule(GradientRange range, const ScheduleShape& shape) const {
  RangeSchedule schedule;
  schedule.message_bytes = static_cast<double>(range.count) * sizeof(float);
  schedule.busbw_as = Collective::all_reduce;
  schedule.busbw_ranks = shape.world;
  const double width = static_cast<double>(data_type_bytes(transfer_type_)) / sizeof(float);
  for (const GradientRange& shard : split_range(range, spec_.shards)) {
    const double bytes = static_cast<double>(shard.count * data_type_bytes(transfer_type_));
    if (spec_.algorithm == AllReduceAlgorithm::pscpu) {
      schedule.steps.push_back(collective_step(Collective::copy_to_host, bytes, 1, width));
      schedule.steps.push_back(collective_step(Collective::copy_from_host, bytes, 1, width));
      continue;
    }
    for (int copy = 0; copy < 2 * (shape.world - 1); ++copy)
      schedule.steps.push_back(collective_step(Collective::peer_copy, bytes / shape.world, 2, width));
  }
  return schedule;
}

ScheduleShape PeerAllReduce::run_shape() const {
  const int n = static_cast<int>(replicas_.size());
  return ScheduleShape{n, n, 1};
}

std::string PeerAllReduce::busbw_formula() const { return all_reduce_busbw_formula(); }

void PeerAllReduce::exchange(int replica, GradientRange range, const Event& ready) {
  rendezvous_->arrive(replica, &ready, [&](std::vector<const Event*>& ready_events) {
    const int n = static_cast<int>(ranks_.size());
    for (int r = 0; r < n; ++r) {
      RankState& rank = *ranks_[r];
      rank.device->make_current();
      rank.device->wait(StreamKind::communication, *ready_events[r]);
      meters_[r]->begin_transfer(StreamKind::communication);
    }
    const std::vector<GradientRange> shards = split_range(range, spec_.shards);
    for (size_t s = 0; s < shards.size(); ++s) {
      if (spec_.algorithm == AllReduceAlgorithm::xring) ring(ready_events, shards[s], s % 2 == 1);
      else if (spec_.algorithm == AllReduceAlgorithm::psgpu) sharded(ready_events, shards[s]);
      else through_host(ready_events, shards[s]);
    }
    for (int r = 0; r < n; ++r) {
      RankState& rank = *ranks_[r];
      rank.device->make_current();
      meters_[r]->end_transfer(StreamKind::communication);
      rank.done->record(StreamKind::communication);
    }
    ranks_[replica]->device->make_current();  // the calling thread drives its own device again
  });
}

void PeerAllReduce::wait_until_done(int replica) {
  Device& device = *ranks_[replica]->device;
  for (const auto& rank : ranks_) device.wait(StreamKind::compute, *rank->done);
}

void PeerAllReduce::ring(std::vector<const Event*>& /*ready*/, GradientRange range, bool reverse) {
  const int n = static_cast<int>(ranks_.size());
  // Ring positions: the rank at position q receives from position q-1.
  auto rank_at = [&](int position) { return reverse ? n - 1 - position : position; };
  const float inverse = 1.0f / static_cast<float>(n);
  // Reduce-scatter: at step t position q adds chunk (q-1-t) of its predecessor into its own.
  // Then all-gather: at step t position q copies the predecessor's finished chunk (q-t).
  for (int step = 0; step < 2 * (n - 1); ++step) {
    const bool gathering = step >= n - 1;
    const int t = gathering ? step - (n - 1) : step;
    for (int q = 0; q < n; ++q) {
      RankState& self = *ranks_[rank_at(q)];
      RankState& from = *ranks_[rank_at((q - 1 + n) % n)];
      const int chunk_index = gathering ? ((q - t) % n + n) % n : ((q - 1 - t) % n + 2 * n) % n;
      const GradientRange chunk = chunk_of(range, chunk_index, n);
      Device& device = *self.device;
      device.make_current();
      Backend& ops = device.ops(StreamKind::communication);
      // The predecessor's previous step produced what this step reads (its ready event, which
      // this device's stream already waited for at the start, covers step 0).
      if (step > 0) device.wait(StreamKind::communication, *from.steps[step - 1]);
      if (gathering) {
        ops.copy(self.gradients + chunk.offset, from.gradients + chunk.offset, chunk.count * sizeof(float));
      } else if (chunk.count > 0) {
        ops.copy(self.staging.data(), from.gradients + chunk.offset, chunk.count * sizeof(float));
        ops.axpy(1.0f, self.staging.as<float>(), self.gradients + chunk.offset, chunk.count);
        if (t == n - 2) {  // this chunk is now the sum over all replicas: make it the mean
          ops.scale(self.gradients + chunk.offset, chunk.count, inverse);
        }
      }
      self.steps[step]->record(StreamKind::communication);
    }
  }
}

void PeerAllReduce::sharded(std::vector<const Event*>& ready, GradientRange range) {
  const int n = static_cast<int>(ranks_.size());
  const bool compact = transfer_type_ != DataType::f32;
  const DataType type = transfer_type_;
  const float inverse = 1.0f / static_cast<float>(n);
  // What the others read: the fp32 gradients, or their half-width copy scaled by 1/N.
  auto source = [&](RankState& rank, size_t element) -> void* {
    return compact ? at(rank.outgoing.data(), element - range.offset, type)
                   : static_cast<void*>(rank.gradients + element);
  };
  if (compact) {
    for (int r = 0; r < n; ++r) {
      RankState& rank = *ranks_[r];
      rank.device->make_current();
      rank.device->ops(StreamKind::communication)
          .convert(DataType::f32, rank.gradients + range.offset, type, rank.outgoing.data(), range.count, inverse);
      rank.converted->record(StreamKind::communication);
    }
  }
  // Phase 1: device j gathers chunk j of every other replica and sums it.
  for (int j = 0; j < n; ++j) {
    RankState& self = *ranks_[j];
    Device& device = *self.device;
    device.make_current();
    Backend& ops = device.ops(StreamKind::communication);
    const GradientRange chunk = chunk_of(range, j, n);
    for (int i = 0; i < n; ++i)
      if (i != j) device.wait(StreamKind::communication, compact ? *ranks_[i]->converted : *ready[i]);
    const size_t slot_bytes = chunk.count * data_type_bytes(type);
    int slot = 0;
    for (int k = 1; k < n; ++k) {  // pull from j+1, j+2, ...: each link carries one copy at a time
      RankState& other = *ranks_[(j + k) % n];
      ops.copy(static_cast<char*>(self.staging.data()) + slot++ * slot_bytes, source(other, chunk.offset), slot_bytes);
    }
    if (chunk.count > 0) {
      if (!compact) {
        // Sum in rank order 0..N-1 into this device's own chunk, then the mean.
        for (int i = 0; i < n; ++i) {
          if (i == j) continue;
          const int slot_of_i = (i - j + n) % n - 1;
          ops.axpy(1.0f, reinterpret_cast<const float*>(static_cast<char*>(self.staging.data()) + slot_of_i * slot_bytes),
                   self.gradients + chunk.offset, chunk.count);
        }
        ops.scale(self.gradients + chunk.offset, chunk.count, inverse);
      } else {
        float* sum = self.accumulator.as<float>();
        float* addend = sum + chunk.count;
        for (int i = 0; i < n; ++i) {
          const void* part = i == j ? source(self, chunk.offset)
                                    : static_cast<char*>(self.staging.data()) + ((i - j + n) % n - 1) * slot_bytes;
          ops.convert(type, part, DataType::f32, i == 0 ? sum : addend, chunk.count);
          if (i > 0) ops.axpy(1.0f, addend, sum, chunk.count);
        }
        ops.convert(DataType::f32, sum, type, source(self, chunk.offset), chunk.count);
      }
    }
    self.reduced->record(StreamKind::communication);
  }
  // Phase 2: every device pulls the finished chunks of the others.
  for (int j = 0; j < n; ++j) {
    RankState& self = *ranks_[j];
    Device& device = *self.device;
    device.make_current();
    Backend& ops = device.ops(StreamKind::communication);
    for (int k = 1; k < n; ++k) {
      const int i = (j + k) % n;
      RankState& other = *ranks_[i];
      const GradientRange chunk = chunk_of(range, i, n);
      device.wait(StreamKind::communication, *other.reduced);
      ops.copy(source(self, chunk.offset), source(other, chunk.offset), chunk.count * data_type_bytes(type));
    }
    if (compact) {
      ops.convert(type, self.outgoing.data(), DataType::f32, self.gradients + range.offset, range.count);
    }
  }
}

void PeerAllReduce::through_host(std::vector<const Event*>& /*ready*/, GradientRange range) {
  const int n = static_cast<int>(ranks_.size());
  const bool compact = transfer_type_ != DataType::f32;
  const DataType type = transfer_type_;
  const size_t bytes = range.count * data_type_bytes(type);
  const float inverse = 1.0f / static_cast<float>(n);
  for (int r = 0; r < n; ++r) {
    RankState& rank = *ranks_[r];
    rank.device->make_current();
    Backend& ops = rank.device->ops(StreamKind::communication);
    const void* up = rank.gradients + range.offset;
    if (compact) {
      ops.convert(DataType::f32, rank.gradients + range.offset, type, rank.outgoing.data(), range.count, inverse);
      up = rank.outgoing.data();
    }
    ops.copy(rank.host_staging.data(), up, bytes);
    rank.staged->record(StreamKind::communication);
  }
  // The sum runs on the host when device 0's communication stream has seen every copy arrive.
  RankState& first = *ranks_[0];
  first.device->make_current();
  for (int r = 0; r < n; ++r) first.device->wait(StreamKind::communication, *ranks_[r]->staged);
  std::vector<const void*> parts;
  for (const auto& rank : ranks_) parts.push_back(rank->host_staging.data());
  void* sum = host_sum_.data();
  HostThreadPool* pool = host_threads_.get();
  const size_t count = range.count;
  first.device->enqueue_host_function(StreamKind::communication, [=] {
    pool->parallel_for(count, [&](size_t begin, size_t end) {
      for (size_t e = begin; e < end; ++e) {
        float total = 0;  // rank order, fp32, whatever the transfer type
        for (const void* part : parts) {
          if (type == DataType::f32) total += static_cast<const float*>(part)[e];
          else {
            uint16_t bits;
            std::memcpy(&bits, static_cast<const char*>(part) + 2 * e, 2);
            total += type == DataType::f16 ? f16_bits_to_float(bits) : bf16_bits_to_float(bits);
          }
        }
        if (type == DataType::f32) {
          static_cast<float*>(sum)[e] = total * inverse;
        } else {  // the parts were scaled by 1/N before rounding: the total is already the mean
          const uint16_t bits = type == DataType::f16 ? float_to_f16_bits(total) : float_to_bf16_bits(total);
          std::memcpy(static_cast<char*>(sum) + 2 * e, &bits, 2);
        }
      }
    });
  });
  first.reduced->record(StreamKind::communication);
  for (int r = 0; r < n; ++r) {
    RankState& rank = *ranks_[r];
    rank.device->make_current();
    Backend& ops = rank.device->ops(StreamKind::communication);
    rank.device->wait(StreamKind::communication, *first.reduced);
    if (compact) {
      ops.copy(rank.outgoing.data(), host_sum_.data(), bytes);
      ops.convert(type, rank.outgoing.data(), DataType::f32, rank.gradients + range.offset, range.count);
    } else {
      ops.copy(rank.gradients + range.offset, host_sum_.data(), bytes);
    }
  }
}

}  // namespace dpbench
