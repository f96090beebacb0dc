// PrefetchPipeline: batches handed out in order from their slots, each built once, never more than
// `depth` ahead of the consumer, a loader's exception rethrown where the batch is asked for, misuse
// refused, and no hang when the pipeline is dropped early.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <stdexcept>
#include <vector>

#include "engine/data/prefetch_pipeline.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

TEST_CASE("prefetch pipeline hands out every batch in order from slot index % depth, built once",
          "[data][prefetch]") {
  const int64_t batches = 200;
  for (int depth : {1, 2, 3}) {
    for (int threads : {1, 4}) {
      std::vector<int64_t> slots(depth, -1);
      std::vector<std::atomic<int>> builds(batches);
      for (auto& count : builds) count = 0;
      PrefetchPipeline pipeline(batches, depth, threads, [&](int64_t index, int slot) {
        builds[index]++;
        slots[slot] = index;
      });
      INFO("depth " << depth << ", threads " << threads);
      for (int64_t k = 0; k < batches; ++k) {
        double waited = -1;
        const int slot = pipeline.acquire(k, &waited);
        CHECK(slot == k % depth);
        CHECK(slots[slot] == k);
        CHECK(waited >= 0);
        pipeline.release(k);
      }
      CHECK(std::all_of(builds.begin(), builds.end(), [](const std::atomic<int>& n) { return n == 1; }));
    }
  }
}

TEST_CASE("prefetch pipeline never builds more than depth batches ahead of the released ones",
          "[data][prefetch]") {
  const int depth = 3;
  std::atomic<int64_t> released{0};
  std::atomic<int64_t> furthest_ahead{0};
  PrefetchPipeline pipeline(100, depth, 4, [&](int64_t index, int) {
    const int64_t ahead = index - released.load() + 1;  // batches built or building, not released
    int64_t seen = furthest_ahead.load();
    while (ahead > seen && !furthest_ahead.compare_exchange_weak(seen, ahead)) {
    }
  });
  for (int64_t k = 0; k < 100; ++k) {
    pipeline.acquire(k);
    released = k + 1;
    pipeline.release(k);
  }
  CHECK(furthest_ahead.load() <= depth);
  CHECK(furthest_ahead.load() >= 1);
}

TEST_CASE("prefetch pipeline rethrows a loader's failure where that batch is asked for", "[data][prefetch]") {
  // One loader builds in order, so batches 0..2 are complete before batch 3 fails.
  PrefetchPipeline pipeline(10, 2, 1, [](int64_t index, int) {
    if (index == 3) throw ConfigError("data/batch_3.bin: corrupt record 7");
  });
  for (int64_t k = 0; k < 3; ++k) {
    pipeline.acquire(k);
    pipeline.release(k);
  }
  CHECK_THROWS_WITH(pipeline.acquire(3), "data/batch_3.bin: corrupt record 7");
}

TEST_CASE("prefetch pipeline refuses batches out of order and a batch whose slot was not given back",
          "[data][prefetch]") {
  PrefetchPipeline pipeline(10, 2, 2, [](int64_t, int) {});
  CHECK_THROWS_AS(pipeline.acquire(1), RuntimeError);
  pipeline.acquire(0);
  CHECK_THROWS_AS(pipeline.release(1), RuntimeError);
  pipeline.acquire(1);
  // Batch 2 needs batch 0's slot: acquiring it waits until another thread (a device copy's
  // completion, in the feed) releases batch 0.
  std::atomic<bool> released{false};
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    released = true;
    pipeline.release(0);
  });
  double waited = -1;
  CHECK(pipeline.acquire(2, &waited) == 0);
  CHECK(released.load());  // it returned only once the slot came back, however long that took
  releaser.join();
  CHECK(waited >= 0);
  CHECK_THROWS_AS(PrefetchPipeline(5, 0, 1, [](int64_t, int) {}), RuntimeError);
}

TEST_CASE("prefetch pipeline can be dropped with loaders waiting for slots", "[data][prefetch]") {
  std::atomic<int> built{0};
  {
    PrefetchPipeline pipeline(1000, 2, 4, [&](int64_t, int) { built++; });
  }
  CHECK(built.load() <= 2);  // nothing was released, so only the first depth batches could be built
  PrefetchPipeline empty(0, 2, 2, [](int64_t, int) {});
  CHECK_THROWS_AS(empty.acquire(0), RuntimeError);
}

}  // namespace
}  // namespace dpbench
