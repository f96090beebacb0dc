// ThreadBarrier: releases all parties together, runs the completion once per round, and turns a
// failure on one thread into an exception on the others instead of a hang.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "engine/communication/thread_barrier.h"
#include "engine/errors.h"

using dpbench::RuntimeError;
using dpbench::ThreadBarrier;

TEST_CASE("the barrier releases every party each round and completes once per round", "[barrier]") {
  constexpr int kThreads = 4, kRounds = 50;
  ThreadBarrier barrier(kThreads);
  std::atomic<int> completions{0};
  std::atomic<int> arrivals{0};
  std::atomic<bool> ordered{true};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        arrivals.fetch_add(1);
        barrier.arrive_and_wait([&] { completions.fetch_add(1); });
        // Nobody leaves round r before all kThreads * (r + 1) arrivals happened.
        if (arrivals.load() < kThreads * (round + 1)) ordered = false;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(completions.load() == kRounds);
  CHECK(ordered.load());
}

TEST_CASE("aborting the barrier makes waiting and later arrivals throw", "[barrier]") {
  ThreadBarrier barrier(3);
  std::atomic<int> thrown{0};
  std::vector<std::thread> waiters;
  for (int t = 0; t < 2; ++t) {
    waiters.emplace_back([&] {
      try {
        barrier.arrive_and_wait();
      } catch (const RuntimeError&) {
        thrown.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the spin, into the sleep
  barrier.abort();
  for (auto& waiter : waiters) waiter.join();
  CHECK(thrown.load() == 2);
  CHECK_THROWS_AS(barrier.arrive_and_wait(), RuntimeError);
}
