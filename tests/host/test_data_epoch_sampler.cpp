// Epoch sampler: deterministic shuffles from (seed, epoch), every example once per epoch but the
// dropped remainder, replica shards of a global batch, bucketed batches from one bucket, and the
// too-small data set errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "data_test_support.h"
#include "engine/data/epoch_sampler.h"

using namespace dpbench;
using dpbench::testing::config_error_of;
using Catch::Matchers::Contains;

namespace {

EpochSamplerConfig sampler_config(int replicas, int batch, uint64_t seed, bool shuffle = true) {
  EpochSamplerConfig config;
  config.num_replicas = replicas;
  config.batch_per_replica = batch;
  config.seed = seed;
  config.shuffle = shuffle;
  return config;
}

std::vector<int64_t> flatten(const std::vector<GlobalBatch>& batches) {
  std::vector<int64_t> all;
  for (const GlobalBatch& batch : batches) all.insert(all.end(), batch.begin(), batch.end());
  return all;
}

}  // namespace

TEST_CASE("data: epoch sampler without shuffle keeps the examples' order", "[data]") {
  const EpochSampler sampler(23, sampler_config(2, 5, 7, false));
  CHECK(sampler.global_batch_size() == 10);
  CHECK(sampler.batches_per_epoch() == 2);
  CHECK(sampler.dropped_per_epoch() == 3);
  const std::vector<GlobalBatch> batches = sampler.epoch(0);
  REQUIRE(batches.size() == 2);
  CHECK(batches[0] == GlobalBatch{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(batches[1] == GlobalBatch{10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
  CHECK(sampler.epoch(3) == batches);  // the same every epoch
}

TEST_CASE("data: epoch sampler shuffles deterministically from the seed and the epoch", "[data]") {
  const EpochSamplerConfig config = sampler_config(2, 4, 42);
  const EpochSampler sampler(100, config);
  const std::vector<GlobalBatch> epoch0 = sampler.epoch(0);
  CHECK(EpochSampler(100, config).epoch(0) == epoch0);  // another sampler, same seed
  CHECK(sampler.epoch(0) == epoch0);                     // asked again
  CHECK(sampler.epoch(1) != epoch0);                     // the next epoch
  CHECK(EpochSampler(100, sampler_config(2, 4, 43)).epoch(0) != epoch0);  // another seed
  std::vector<int64_t> in_order(96);
  for (int64_t i = 0; i < 96; ++i) in_order[i] = i;
  CHECK(flatten(epoch0) != in_order);
}

TEST_CASE("data: epoch sampler sees every example once per epoch except the dropped remainder", "[data]") {
  const EpochSampler sampler(103, sampler_config(3, 4, 1));
  REQUIRE(sampler.batches_per_epoch() == 8);
  REQUIRE(sampler.dropped_per_epoch() == 7);
  std::set<int64_t> dropped_somewhere;
  for (uint64_t epoch = 0; epoch < 20; ++epoch) {
    const std::vector<GlobalBatch> batches = sampler.epoch(epoch);
    REQUIRE(batches.size() == 8);
    for (const GlobalBatch& batch : batches) REQUIRE(batch.size() == 12);
    std::vector<int64_t> seen = flatten(batches);
    std::sort(seen.begin(), seen.end());
    REQUIRE(std::adjacent_find(seen.begin(), seen.end()) == seen.end());  // no example twice
    REQUIRE(seen.front() >= 0);
    REQUIRE(seen.back() < 103);
    for (int64_t i = 0; i < 103; ++i)
      if (!std::binary_search(seen.begin(), seen.end(), i)) dropped_somewhere.insert(i);
  }
  // With shuffling the remainder is a different random one each epoch, not always the tail.
  CHECK(dropped_somewhere.size() > 7);
}

TEST_CASE("data: epoch sampler shuffles reach every order", "[data]") {
  // 4 examples, global batch 1: the epoch is a permutation; 2400 epochs should show all 24.
  const EpochSampler sampler(4, sampler_config(1, 1, 9));
  std::map<std::vector<int64_t>, int> counts;
  for (uint64_t epoch = 0; epoch < 2400; ++epoch) ++counts[flatten(sampler.epoch(epoch))];
  CHECK(counts.size() == 24);
  for (const auto& [order, count] : counts) CHECK(count > 40);  // ~100 expected each
}

TEST_CASE("data: epoch sampler shards a global batch across replicas", "[data]") {
  const int replicas = 4, batch = 3;
  const EpochSampler sampler(50, sampler_config(replicas, batch, 5));
  for (const GlobalBatch& global : sampler.epoch(2)) {
    std::vector<int64_t> joined;
    for (int r = 0; r < replicas; ++r) {
      const std::vector<int64_t> shard = sampler.replica_shard(global, r);
      REQUIRE(shard.size() == static_cast<size_t>(batch));
      // Replica r takes examples [r * B, (r + 1) * B) of the global batch.
      CHECK(shard == std::vector<int64_t>(global.begin() + r * batch, global.begin() + (r + 1) * batch));
      joined.insert(joined.end(), shard.begin(), shard.end());
    }
    CHECK(joined == global);  // disjoint, and together the whole global batch
    CHECK(std::set<int64_t>(joined.begin(), joined.end()).size() == joined.size());
  }
  const GlobalBatch first = sampler.epoch(0).front();
  CHECK_THROWS_AS(sampler.replica_shard(first, replicas), RuntimeError);
  CHECK_THROWS_AS(sampler.replica_shard(GlobalBatch{1, 2, 3}, 0), RuntimeError);
}

TEST_CASE("data: epoch sampler takes every bucketed global batch from one bucket", "[data]") {
  // Buckets of 10, 6 and 10 examples, interleaved; global batch 2 x 2 = 4.
  std::vector<int> buckets;
  for (int i = 0; i < 26; ++i) buckets.push_back(i < 12 ? i % 3 : (i < 14 ? 1 : (i % 2 == 0 ? 2 : 0)));
  std::map<int, int64_t> bucket_sizes;
  for (int b : buckets) ++bucket_sizes[b];
  REQUIRE(bucket_sizes == std::map<int, int64_t>{{0, 10}, {1, 6}, {2, 10}});
  const EpochSampler sampler(buckets, sampler_config(2, 2, 11));
  CHECK(sampler.batches_per_epoch() == 2 + 1 + 2);
  CHECK(sampler.dropped_per_epoch() == 2 + 2 + 2);

  std::set<int> first_buckets;
  for (uint64_t epoch = 0; epoch < 10; ++epoch) {
    const std::vector<GlobalBatch> batches = sampler.epoch(epoch);
    REQUIRE(batches.size() == 5);
    std::map<int, int> batches_of_bucket;
    for (const GlobalBatch& batch : batches) {
      const int bucket = buckets[batch.front()];
      for (int64_t example : batch) REQUIRE(buckets[example] == bucket);
      ++batches_of_bucket[bucket];
    }
    CHECK(batches_of_bucket == std::map<int, int>{{0, 2}, {1, 1}, {2, 2}});
    std::vector<int64_t> seen = flatten(batches);
    std::sort(seen.begin(), seen.end());
    CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
    first_buckets.insert(buckets[batches.front().front()]);
  }
  CHECK(first_buckets.size() > 1);  // the batch order is shuffled across buckets

  // Without shuffle: bucket 0's batches, then bucket 1's, then bucket 2's, each in index order.
  const std::vector<GlobalBatch> ordered = EpochSampler(buckets, sampler_config(2, 2, 11, false)).epoch(0);
  REQUIRE(ordered.size() == 5);
  CHECK(ordered[0] == GlobalBatch{0, 3, 6, 9});
  CHECK(ordered[2] == GlobalBatch{1, 4, 7, 10});
  CHECK(ordered[3] == GlobalBatch{2, 5, 8, 11});
}

TEST_CASE("data: epoch sampler rejects a data set smaller than one global batch", "[data]") {
  CHECK_THAT(config_error_of([] { EpochSampler(23, sampler_config(4, 8, 0)); }),
             Contains("23 examples") && Contains("32") && Contains("4 GPUs x --batch_size=8") &&
                 Contains("smaller --batch_size or fewer GPUs"));
  CHECK_THAT(config_error_of([] { EpochSampler(0, sampler_config(1, 1, 0)); }), Contains("0 examples"));
  CHECK_NOTHROW(EpochSampler(32, sampler_config(4, 8, 0)));

  // Bucketed: enough examples, but no bucket holds a global batch.
  const std::vector<int> buckets = {0, 1, 0, 1, 2, 2, 0};
  CHECK_THAT(config_error_of([&] { EpochSampler(buckets, sampler_config(2, 2, 0)); }),
             Contains("bucket") && Contains("largest has 3") && Contains("7 examples") &&
                 Contains("fewer buckets"));
  CHECK_THAT(config_error_of([&] { EpochSampler(buckets, sampler_config(4, 2, 0)); }),
             Contains("7 examples") && Contains("8"));

  CHECK_THAT(config_error_of([] { EpochSampler(10, sampler_config(1, 0, 0)); }), Contains("--batch_size=0"));
  CHECK_THROWS_AS(EpochSampler(10, sampler_config(0, 1, 0)), ConfigError);
}
