// What the models' host batch sources share (models/*_inputs.cpp): how a run is sharded over
// replicas, the epochs' shuffled global batches, the synthetic token ids the sequence models draw
// on the device, and finding a text data set's files and vocabularies under --data_dir.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/data/batch_source.h"
#include "engine/data/epoch_sampler.h"
#include "engine/data/vocabulary.h"
#include "models/model_settings.h"

namespace dpbench {

struct Sharding {
  int batch = 1;  // per replica
  int replicas = 1;
  uint64_t seed = 0;
  bool shuffle = true;
  EpochSamplerConfig sampler() const { return EpochSamplerConfig{replicas, batch, seed, shuffle}; }
};

// The run's sharding: every device of every process is one replica.
Sharding sharding_of(const ModelSettings& config);

// The epochs' global batches, shuffled once per epoch and shared by the loader threads. Loaders
// work at most a few batches apart, so the two most recent epochs are enough to keep.
class EpochOrders {
 public:
  explicit EpochOrders(EpochSampler sampler) : sampler_(std::move(sampler)) {}
  const EpochSampler& sampler() const { return sampler_; }
  // Global batch `step` of the run, epoch after epoch.
  GlobalBatch global_batch(int64_t step) const;

 private:
  EpochSampler sampler_;
  mutable std::mutex mutex_;
  mutable std::map<uint64_t, std::shared_ptr<const std::vector<GlobalBatch>>> cache_;
};

// A batch source sharded over the replicas: synthetic batches (no epochs), or a data set's
// examples epoch after epoch once read_epochs() has been called.
class ShardedBatchSource : public BatchSource {
 public:
  int64_t batches_per_epoch() const override { return orders_ ? orders_->sampler().batches_per_epoch() : 0; }
  int64_t dropped_per_epoch() const override { return orders_ ? orders_->sampler().dropped_per_epoch() : 0; }

 protected:
  explicit ShardedBatchSource(const Sharding& sharding) : sharding_(sharding) {}
  // Examples (or length buckets of them, EpochSampler's constructors) of the data set read.
  template <typename Examples>
  void read_epochs(const Examples& examples) {
    orders_ = std::make_unique<EpochOrders>(EpochSampler(examples, sharding_.sampler()));
  }
  // Replica `replica`'s examples of global batch `step`.
  std::vector<int64_t> replica_examples(int64_t step, int replica) const {
    return orders_->sampler().replica_shard(orders_->global_batch(step), replica);
  }

  const Sharding sharding_;
  std::unique_ptr<EpochOrders> orders_;  // null for synthetic batches
};

// Synthetic token ids of one replica: row t holds the B ids of global samples r*B .. r*B + B - 1
// at position t, as fill_sequence_tokens draws them (row `row` of a reversed copy holds
// position rows - 1 - row).
void synthetic_tokens(int32_t* ids, int rows, const Sharding& sharding, int replica, uint64_t stream, int vocab,
                      bool reversed);

// Something is there, of whatever kind: a FIFO or folder in a vocabulary's place is then read
// (and refused with its kind named) rather than passed over as if it were absent.
bool file_exists(const std::string& path);

// `name` inside `directory`; an absolute name (or no directory) stays itself.
std::string under(const std::string& directory, const std::string& name);

// A vocabulary file when one is there, else built from the training text (capped at the model's
// size); either way it must fit the model exactly.
Vocabulary load_vocabulary(const std::string& file, const std::string& training_text, const SpecialTokens& specials,
                           int model_size, const std::string& size_flag);

}  // namespace dpbench
