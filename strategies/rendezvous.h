// A meeting point for the replicas' threads where the last to arrive does the work of all: the
// exchanges of our own (xring, psgpu, pscpu, parameter server on the CPU) enqueue copies on every
// device at once, and need every replica's "gradients ready" event recorded before they can wait
// on it. The host waits here only for the other threads to enqueue, never for a device.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include "engine/errors.h"

namespace dpbench {

template <typename Contribution>
class Rendezvous {
 public:
  explicit Rendezvous(int parties) : contributions_(parties) {}

  // Every party calls once per round with its own contribution; the last to arrive runs `work`
  // over all of them (indexed by party) while the others wait; all return after it. An
  // exception from `work` is rethrown on every party.
  void arrive(int party, Contribution contribution,
              const std::function<void(std::vector<Contribution>&)>& work) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (aborted_) throw_aborted();
    const uint64_t round = round_;
    contributions_.at(party) = std::move(contribution);
    if (++arrived_ == static_cast<int>(contributions_.size())) {
      try {
        work(contributions_);
        failure_ = nullptr;
      } catch (...) {
        failure_ = std::current_exception();
      }
      arrived_ = 0;
      ++round_;
      released_.notify_all();
      if (failure_) std::rethrow_exception(failure_);
      return;
    }
    released_.wait(lock, [&] { return round_ != round || aborted_; });
    if (round_ == round) throw_aborted();
    if (failure_) std::rethrow_exception(failure_);
  }

  void abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    released_.notify_all();
  }

 private:
  [[noreturn]] static void throw_aborted() {
    throw RuntimeError("gradient exchange aborted by a failure on another device");
  }
  std::mutex mutex_;
  std::condition_variable released_;
  std::vector<Contribution> contributions_;
  int arrived_ = 0;
  uint64_t round_ = 0;
  bool aborted_ = false;
  std::exception_ptr failure_;
};

}  // namespace dpbench
