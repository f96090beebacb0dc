// The host batch sources' shared parts (see batch_source_support.h).
#include "models/batch_source_support.h"

#include "engine/backend/counter_random.h"
#include "engine/machine/file_checks.h"

namespace dpbench {

Sharding sharding_of(const ModelSettings& config) {
  return Sharding{config.batch_size, config.world_devices(), config.seed, config.data.shuffle};
}

GlobalBatch EpochOrders::global_batch(int64_t step) const {
  const int64_t per_epoch = sampler_.batches_per_epoch();
  const uint64_t epoch = static_cast<uint64_t>(step / per_epoch);
  std::shared_ptr<const std::vector<GlobalBatch>> order;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = cache_.find(epoch);
    if (found != cache_.end()) order = found->second;
  }
  if (!order) {
    // Outside the lock: a shuffle of the whole data set. Two threads may both make it; the
    // orders are equal (a pure function of seed and epoch).
    order = std::make_shared<const std::vector<GlobalBatch>>(sampler_.epoch(epoch));
    std::lock_guard<std::mutex> lock(mutex_);
    cache_.emplace(epoch, order);
    while (cache_.size() > 2) cache_.erase(cache_.begin());
  }
  return (*order)[static_cast<size_t>(step % per_epoch)];
}

void synthetic_tokens(int32_t* ids, int rows, const Sharding& sharding, int replica, uint64_t stream, int vocab,
                      bool reversed) {
  const int batch = sharding.batch;
  const uint64_t global_batch = static_cast<uint64_t>(sharding.replicas) * batch;
  const uint64_t first_sample = static_cast<uint64_t>(replica) * batch;
  for (int row = 0; row < rows; ++row) {
    const int t = reversed ? rows - 1 - row : row;
    for (int b = 0; b < batch; ++b) {
      ids[static_cast<size_t>(row) * batch + b] = static_cast<int32_t>(
          counter_uint(sharding.seed, stream, t * global_batch + first_sample + b) % static_cast<uint32_t>(vocab));
    }
  }
}

bool file_exists(const std::string& path) { return inspect_path(path).kind != PathKind::missing; }

std::string under(const std::string& directory, const std::string& name) {
  if (name.empty() || name.front() == '/' || directory.empty()) return name;
  return directory + "/" + name;
}

Vocabulary load_vocabulary(const std::string& file, const std::string& training_text, const SpecialTokens& specials,
                           int model_size, const std::string& size_flag) {
  Vocabulary vocabulary = file_exists(file) ? Vocabulary::from_file(file, specials)
                                            : Vocabulary::build_from_text(training_text, specials, model_size);
  check_vocabulary_size(vocabulary, model_size, size_flag);
  return vocabulary;
}

}  // namespace dpbench
