// Epoch orders from the counter-based RNG: Fisher-Yates shuffles whose every draw is
// counter_hash(seed, stream of the epoch, index of the draw), so an order never depends on what
// was drawn before it in the process.
#include "engine/data/epoch_sampler.h"

#include <algorithm>
#include <string>

#include "engine/backend/counter_random.h"
#include "engine/errors.h"

namespace dpbench {

namespace {

// Epoch e shuffles with stream kRandomStreamEpochShuffle + e (engine/backend/counter_random.h).
// Draw indices of one epoch: bits 40 and up name what is shuffled (0: the batch order, b + 1:
// bucket b's examples), the low 40 bits the draw.
constexpr int kDrawPurposeShift = 40;

// Uniform in [0, n) from 64 random bits: the modulo's bias is below n / 2^64, negligible.
uint64_t draw_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t n) {
  return counter_hash(seed, stream, index) % n;
}

template <typename T>
void shuffle(std::vector<T>& items, uint64_t seed, uint64_t stream, uint64_t purpose) {
  for (size_t i = items.size(); i > 1; --i) {
    const uint64_t draw = (purpose << kDrawPurposeShift) + i;
    std::swap(items[i - 1], items[draw_below(seed, stream, draw, i)]);
  }
}

}  // namespace

EpochSampler::EpochSampler(int64_t dataset_size, const EpochSamplerConfig& config)
    : config_(config), dataset_size_(dataset_size) {
  check_config();
  if (dataset_size < 0) throw RuntimeError("epoch sampler: negative data set size");
  buckets_.resize(1);
  buckets_[0].resize(static_cast<size_t>(dataset_size));
  for (int64_t i = 0; i < dataset_size; ++i) buckets_[0][i] = i;
  count_batches();
}

EpochSampler::EpochSampler(const std::vector<int>& bucket_of_example, const EpochSamplerConfig& config)
    : config_(config), dataset_size_(static_cast<int64_t>(bucket_of_example.size())) {
  check_config();
  for (size_t i = 0; i < bucket_of_example.size(); ++i) {
    const int bucket = bucket_of_example[i];
    if (bucket < 0) throw RuntimeError("epoch sampler: example " + std::to_string(i) + " has bucket " +
                                       std::to_string(bucket));
    if (static_cast<size_t>(bucket) >= buckets_.size()) buckets_.resize(static_cast<size_t>(bucket) + 1);
    buckets_[bucket].push_back(static_cast<int64_t>(i));
  }
  count_batches();
}

void EpochSampler::check_config() const {
  if (config_.num_replicas < 1)
    throw ConfigError("epoch sampler: " + std::to_string(config_.num_replicas) + " replicas: need at least 1");
  if (config_.batch_per_replica < 1)
    throw ConfigError("--batch_size=" + std::to_string(config_.batch_per_replica) + ": must be at least 1");
}

int64_t EpochSampler::global_batch_size() const {
  return static_cast<int64_t>(config_.num_replicas) * config_.batch_per_replica;
}

void EpochSampler::count_batches() {
  const int64_t global = global_batch_size();
  int64_t largest_bucket = 0;
  for (const auto& bucket : buckets_) {
    batches_per_epoch_ += static_cast<int64_t>(bucket.size()) / global;
    largest_bucket = std::max(largest_bucket, static_cast<int64_t>(bucket.size()));
  }
  if (batches_per_epoch_ > 0) return;
  const std::string batch = "one global batch of " + std::to_string(global) + " (" +
                            std::to_string(config_.num_replicas) + " GPUs x --batch_size=" +
                            std::to_string(config_.batch_per_replica) + ")";
  if (dataset_size_ < global || buckets_.size() <= 1)
    throw ConfigError("the data set has " + std::to_string(dataset_size_) + " examples, fewer than " + batch +
                      ": use a smaller --batch_size or fewer GPUs");
  throw ConfigError("no length bucket holds " + batch + ": the largest has " + std::to_string(largest_bucket) +
                    " of the data set's " + std::to_string(dataset_size_) +
                    " examples; use a smaller --batch_size, fewer GPUs or fewer buckets");
}

std::vector<GlobalBatch> EpochSampler::epoch(uint64_t epoch) const {
  const uint64_t stream = kRandomStreamEpochShuffle + epoch;
  const size_t global = static_cast<size_t>(global_batch_size());
  std::vector<GlobalBatch> batches;
  batches.reserve(static_cast<size_t>(batches_per_epoch_));
  for (size_t b = 0; b < buckets_.size(); ++b) {
    std::vector<int64_t> order = buckets_[b];
    if (config_.shuffle) shuffle(order, config_.seed, stream, b + 1);
    for (size_t start = 0; start + global <= order.size(); start += global)
      batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start),
                           order.begin() + static_cast<std::ptrdiff_t>(start + global));
  }
  if (config_.shuffle) shuffle(batches, config_.seed, stream, 0);
  return batches;
}

std::vector<int64_t> EpochSampler::replica_shard(const GlobalBatch& global_batch, int replica) const {
  if (replica < 0 || replica >= config_.num_replicas ||
      global_batch.size() != static_cast<size_t>(global_batch_size()))
    throw RuntimeError("epoch sampler: replica " + std::to_string(replica) + " of " +
                       std::to_string(config_.num_replicas) + ", global batch of " +
                       std::to_string(global_batch.size()) + " examples");
  const auto first = global_batch.begin() + static_cast<std::ptrdiff_t>(replica) * config_.batch_per_replica;
  return {first, first + config_.batch_per_replica};
}

}  // namespace dpbench
