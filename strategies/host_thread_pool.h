// A fixed pool of host threads for the exchanges that compute on the CPU (pscpu's sums, the
// parameter server's update on the host): parallel_for splits [0, n) into one contiguous slice
// per thread and returns when all are done. Threads are made once, not per call.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dpbench {

class HostThreadPool {
 public:
  // `threads` <= 0: the hardware's threads, at most 16 (more only adds memory-bandwidth contention).
  explicit HostThreadPool(int threads = 0) {
    if (threads <= 0) threads = static_cast<int>(std::min(16u, std::max(1u, std::thread::hardware_concurrency())));
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work_loop(i); });
    slices_ = threads;
  }
  ~HostThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }
  HostThreadPool(const HostThreadPool&) = delete;
  HostThreadPool& operator=(const HostThreadPool&) = delete;

  int threads() const { return slices_; }

  // body(begin, end) over slices of [0, n); the calling thread takes slice 0. Not reentrant.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& body) {
    if (n == 0) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      n_ = n;
      pending_ = slices_ - 1;
      failure_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    run_slice(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    body_ = nullptr;
    if (failure_) std::rethrow_exception(failure_);
  }

 private:
  void run_slice(int slice) {
    const size_t begin = n_ * slice / slices_, end = n_ * (slice + 1) / slices_;
    try {
      if (begin < end) (*body_)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
    }
  }
  void work_loop(int slice) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      run_slice(slice);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (--pending_ == 0) done_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  int slices_ = 1;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t, size_t)>* body_ = nullptr;
  size_t n_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr failure_;
};

}  // namespace dpbench
