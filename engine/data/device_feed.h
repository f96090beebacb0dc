// DeviceFeed: how one replica's batches reach its model's input buffers.
//
//   on_device   the replica's first batch is copied in once and stays (the seed notes' "data
//               constant in GPU memory"); nothing happens per step.
//   prefetch    loader threads (engine/data/prefetch_pipeline.h) build batches `depth` ahead into
//               pinned host slots; each is copied on the copy stream into a device staging slot
//               as soon as that slot is free; before the step the compute stream waits for the
//               copy (an event) and moves the batch into the model's inputs (a device-to-device
//               copy, so the step's buffers never change and a captured step still replays).
//               A host slot goes back to the loaders when its copy has finished (a host function
//               on the copy stream), so the host never blocks on the device.
//   synchronous the replica's own thread builds the batch, copies it into the inputs on the
//               compute stream, and the runner waits for the step to finish before the next
//               (--prefetch_data_to_device=false: the baseline the seed notes measured).
//
// enqueue() runs on the replica's thread before each step, in order; it records `ready` on the
// compute stream once the batch is in place, so ready - (the step's start event) is the time the
// compute stream waited for data.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend/device.h"
#include "engine/data/batch_source.h"
#include "engine/data/prefetch_pipeline.h"

namespace dpbench {

enum class FeedMode { on_device, prefetch, synchronous };

struct FeedSettings {
  FeedMode mode = FeedMode::on_device;
  int depth = 2;    // prefetch: batches ahead
  int threads = 1;  // prefetch: loader threads of this replica
};

class DeviceFeed {
 public:
  // RuntimeError when the source's inputs do not match the model's (names, sizes, order).
  DeviceFeed(Device& device, int replica, const BatchSource& source, std::vector<InputBuffer> inputs,
             int64_t total_steps, const FeedSettings& settings);
  ~DeviceFeed();
  DeviceFeed(const DeviceFeed&) = delete;
  DeviceFeed& operator=(const DeviceFeed&) = delete;

  FeedMode mode() const { return settings_.mode; }
  // Makes batch `step` the model's inputs, on the compute stream (see the top of the file), and
  // records ready(step). on_device: records only.
  void enqueue(int64_t step);
  // The synchronous baseline waits here for the step to finish; the other modes return at once.
  void after_step(int64_t step);
  const Event& ready(int64_t step) const { return *ready_[static_cast<size_t>(step)]; }
  // Items (images, words) of this replica's batch `step`; valid once the step has been enqueued.
  int64_t items(int64_t step) const { return items_[static_cast<size_t>(step)]; }
  // Host seconds this replica's thread spent waiting for loaders or building batches itself.
  double host_wait_seconds() const { return host_wait_seconds_; }

 private:
  void build_into(int64_t step, char* base);
  void copy_slot_to_inputs(const char* slot, Backend& ops);

  Device& device_;
  int replica_;
  const BatchSource& source_;
  std::vector<InputBuffer> inputs_;
  std::vector<size_t> offsets_;  // of each input inside a slot
  size_t slot_bytes_ = 0;
  FeedSettings settings_;
  std::vector<Buffer> host_slots_, device_slots_;
  std::vector<std::unique_ptr<Event>> copied_, consumed_;  // per slot
  std::vector<std::unique_ptr<Event>> ready_;               // per step, timing
  std::vector<int64_t> items_;
  double host_wait_seconds_ = 0;
  std::unique_ptr<PrefetchPipeline> pipeline_;
};

}  // namespace dpbench
