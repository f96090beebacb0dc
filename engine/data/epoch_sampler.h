// Which examples each replica trains on, epoch by epoch. An epoch is a list of global batches of
// N * B examples (N replicas, B per replica); replica r's shard of a global batch is its examples
// [r * B, (r + 1) * B), the same rule synthetic data follows, so one device with batch N * B sees
// exactly the union of the N replicas' batches.
//
// Shuffling uses the counter-based RNG: the order is a pure function of (seed, epoch), the same
// on every host and for every strategy. With shuffle off the order is the examples' own.
//
// Remainder policy: a partial global batch is dropped, every epoch (with shuffling, a different
// random remainder each epoch; without, always the last examples). With buckets, each bucket drops
// its own partial batch.
//
// Buckets (e.g. ParallelCorpus::buckets): every global batch comes from one bucket. With shuffle,
// each bucket's examples are shuffled, cut into global batches, and the batches of all buckets
// are shuffled together; without, bucket 0's batches come first, then bucket 1's, and so on, each
// in its examples' order.
#pragma once

#include <cstdint>
#include <vector>

namespace dpbench {

struct EpochSamplerConfig {
  int num_replicas = 1;       // N, the GPUs (or reference devices) training together
  int batch_per_replica = 1;  // B, --batch_size
  uint64_t seed = 0;
  bool shuffle = true;
};

using GlobalBatch = std::vector<int64_t>;  // N * B example indices

class EpochSampler {
 public:
  // Examples 0 .. dataset_size - 1, one bucket. ConfigError when the data set is smaller than
  // one global batch (naming both sizes; a smaller --batch_size or fewer GPUs fixes it).
  EpochSampler(int64_t dataset_size, const EpochSamplerConfig& config);
  // Example i lies in bucket bucket_of_example[i] (>= 0). ConfigError when no bucket holds a
  // whole global batch.
  EpochSampler(const std::vector<int>& bucket_of_example, const EpochSamplerConfig& config);

  int64_t dataset_size() const { return dataset_size_; }
  int64_t global_batch_size() const;
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  int64_t dropped_per_epoch() const { return dataset_size_ - batches_per_epoch_ * global_batch_size(); }

  // The global batches of `epoch` (0-based), in training order.
  std::vector<GlobalBatch> epoch(uint64_t epoch) const;
  // Replica `replica`'s B examples of a global batch.
  std::vector<int64_t> replica_shard(const GlobalBatch& global_batch, int replica) const;

 private:
  void check_config() const;
  void count_batches();

  EpochSamplerConfig config_;
  int64_t dataset_size_ = 0;
  std::vector<std::vector<int64_t>> buckets_;  // each bucket's examples, ascending
  int64_t batches_per_epoch_ = 0;
};

}  // namespace dpbench
