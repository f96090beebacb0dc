// PrefetchPipeline (see the header): one mutex and one condition variable; a loader claims the
// lowest unclaimed batch whose slot has been given back, builds it without the lock, and marks it.
#include "engine/data/prefetch_pipeline.h"

#include <chrono>
#include <string>

#include "engine/errors.h"

namespace dpbench {

PrefetchPipeline::PrefetchPipeline(int64_t num_batches, int depth, int threads, BuildBatch build)
    : num_batches_(num_batches), depth_(depth), build_(std::move(build)) {
  if (num_batches < 0 || depth < 1 || threads < 1 || !build_)
    throw RuntimeError("PrefetchPipeline: needs num_batches >= 0, depth >= 1, threads >= 1 and a builder");
  built_.assign(depth, -1);
  for (int t = 0; t < threads && t < depth; ++t) loaders_.emplace_back([this] { load(); });
}

PrefetchPipeline::~PrefetchPipeline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& loader : loaders_) loader.join();
}

void PrefetchPipeline::load() {
  for (;;) {
    int64_t index = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Batch k may go into its slot once batch k - depth has been released.
      changed_.wait(lock, [&] {
        return stopping_ || failure_ || next_to_build_ >= num_batches_ ||
               next_to_build_ < released_below_ + depth_;
      });
      if (stopping_ || failure_ || next_to_build_ >= num_batches_) return;
      index = next_to_build_++;
    }
    try {
      build_(index, static_cast<int>(index % depth_));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      built_[index % depth_] = index;
    }
    changed_.notify_all();
  }
}

int PrefetchPipeline::acquire(int64_t index, double* waited_seconds) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  if (index != next_to_acquire_ || index >= num_batches_)
    throw RuntimeError("PrefetchPipeline: batch " + std::to_string(index) + " acquired out of order (next is " +
                       std::to_string(next_to_acquire_) + " of " + std::to_string(num_batches_) + ")");
  // Batch index - depth may still be on its way back (a device feed releases a slot from a host
  // function when its copy has finished): waiting for the build waits for that release too.
  const int slot = static_cast<int>(index % depth_);
  changed_.wait(lock, [&] { return failure_ || built_[slot] == index; });
  if (built_[slot] != index) std::rethrow_exception(failure_);
  ++next_to_acquire_;
  if (waited_seconds != nullptr)
    *waited_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return slot;
}

void PrefetchPipeline::release(int64_t index) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (index != released_below_ || index >= next_to_acquire_)
      throw RuntimeError("PrefetchPipeline: batch " + std::to_string(index) +
                         " released out of order or before it was acquired");
    built_[index % depth_] = -1;
    ++released_below_;
  }
  changed_.notify_all();
}

}  // namespace dpbench
