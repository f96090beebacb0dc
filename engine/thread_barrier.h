// A reusable barrier for the runner's device threads that a failing thread can break: once
// aborted, every waiter (present and future) throws instead of waiting forever.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include "engine/errors.h"

namespace dpbench {

class ThreadBarrier {
 public:
  explicit ThreadBarrier(int parties) : parties_(parties) {}

  // The last thread to arrive runs `on_complete` (if any) before releasing the others.
  void arrive_and_wait(const std::function<void()>& on_complete = nullptr) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (aborted_) throw RuntimeError("run aborted by a failure on another device");
    const uint64_t generation = generation_;
    if (++arrived_ == parties_) {
      if (on_complete) on_complete();
      arrived_ = 0;
      ++generation_;
      released_.notify_all();
      return;
    }
    released_.wait(lock, [&] { return generation_ != generation || aborted_; });
    if (generation_ == generation) throw RuntimeError("run aborted by a failure on another device");
  }

  void abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    released_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable released_;
  int parties_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

}  // namespace dpbench
