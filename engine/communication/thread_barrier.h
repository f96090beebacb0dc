// A reusable barrier for the runner's device threads that a failing thread can break: once
// aborted, every waiter (present and future) throws instead of waiting forever.
// Waiters spin briefly before sleeping: the barrier that starts the measured clock must release
// every device thread at once, and waking a sleeping thread takes tens of microseconds — a visible
// share of a short run on fast GPUs.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "engine/errors.h"

namespace dpbench {

class ThreadBarrier {
 public:
  explicit ThreadBarrier(int parties) : parties_(parties) {}

  // The last thread to arrive runs `on_complete` (if any) before releasing the others.
  void arrive_and_wait(const std::function<void()>& on_complete = nullptr) {
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (aborted_) throw_aborted();
      generation = generation_.load(std::memory_order_relaxed);
      if (++arrived_ == parties_) {
        if (on_complete) on_complete();
        arrived_ = 0;
        generation_.store(generation + 1, std::memory_order_release);
        released_.notify_all();
        return;
      }
    }
    const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
    while (std::chrono::steady_clock::now() < spin_until) {
      if (generation_.load(std::memory_order_acquire) != generation) return;
      if (aborted_flag_.load(std::memory_order_relaxed)) break;
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    released_.wait(lock, [&] { return generation_.load() != generation || aborted_; });
    if (generation_.load() == generation) throw_aborted();
  }

  void abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    aborted_flag_ = true;
    released_.notify_all();
  }

 private:
  static constexpr std::chrono::milliseconds kSpinTime{5};
  [[noreturn]] static void throw_aborted() {
    throw RuntimeError("run aborted by a failure on another device");
  }

  std::mutex mutex_;
  std::condition_variable released_;
  int parties_;
  int arrived_ = 0;
  std::atomic<uint64_t> generation_{0};
  bool aborted_ = false;
  std::atomic<bool> aborted_flag_{false};
};

}  // namespace dpbench
