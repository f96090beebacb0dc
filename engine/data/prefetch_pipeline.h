// PrefetchPipeline: host loader threads that build a run's batches ahead of the step that uses
// them (--datasets_num_private_threads threads, --prefetch_depth batches ahead), each into a slot
// of its own that the caller owns (pinned host buffers, say). Batches are handed out in order;
// batch k goes to slot k % depth and is built only once batch k - depth has been released, so at
// most `depth` batches are ever built and not yet given back. Memory-agnostic and CUDA-free: the
// device side (copy stream, events) is the caller's.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dpbench {

class PrefetchPipeline {
 public:
  // Builds batch `index` into slot `slot`; called on a loader thread, several at once for
  // different batches. An exception stops the pipeline and is rethrown by acquire().
  using BuildBatch = std::function<void(int64_t index, int slot)>;

  // Batches 0 .. num_batches - 1. depth >= 1, threads >= 1 (at most `depth` of them can work at
  // once). Loading starts at once.
  PrefetchPipeline(int64_t num_batches, int depth, int threads, BuildBatch build);
  ~PrefetchPipeline();  // stops the loaders (batches being built are finished first)
  PrefetchPipeline(const PrefetchPipeline&) = delete;
  PrefetchPipeline& operator=(const PrefetchPipeline&) = delete;

  // Waits until batch `index` is built and returns its slot; `waited_seconds` (optional) gets the
  // time this call waited for it. Batches are acquired in order, 0, 1, ..., each once; batch
  // index + depth is built (and acquire() returns it) only after batch index has been released,
  // from any thread.
  int acquire(int64_t index, double* waited_seconds = nullptr);
  // The caller is done with batch `index`'s slot (for a device copy: the copy has completed).
  void release(int64_t index);

  int depth() const { return depth_; }
  int64_t num_batches() const { return num_batches_; }

 private:
  void load();

  const int64_t num_batches_;
  const int depth_;
  const BuildBatch build_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t next_to_build_ = 0;     // the lowest batch no loader has claimed
  int64_t released_below_ = 0;    // batches below this have been released
  int64_t next_to_acquire_ = 0;
  std::vector<int64_t> built_;    // per slot: the batch it holds once built, -1 while empty
  std::exception_ptr failure_;
  bool stopping_ = false;
  std::vector<std::thread> loaders_;
};

}  // namespace dpbench
