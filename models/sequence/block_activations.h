// BlockActivations: what one block of a sequence model (a GPT block, a Transformer layer) keeps
// from its forward for its backward, as slices of one set. Under --activation_checkpointing=none
// every block holds its own set; under blocks, every block of a replica lays its set over one
// shared allocation, and each block's backward first refills it by running the block's forward
// again (the block's input and output are kept apart, in buffers of their own).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/backend/step_trace.h"

namespace dpbench {

class BlockActivations {
 public:
  // Where one slice lives, once its set has its memory (allocate_own or place).
  class Slice {
   public:
    void* data() const { return set_->addresses_[index_]; }
    template <typename T>
    T* as() const { return static_cast<T*>(data()); }

   private:
    friend class BlockActivations;
    const BlockActivations* set_ = nullptr;
    size_t index_ = 0;
  };

  BlockActivations() = default;
  // Slices point into the set: it stays where it was made.
  BlockActivations(const BlockActivations&) = delete;
  BlockActivations& operator=(const BlockActivations&) = delete;

  // A slice of `bytes`, recorded under `tag` where the set allocates its own memory.
  Slice take(size_t bytes, const MemoryTag& tag);
  // The set laid out in one allocation, each slice aligned as the device aligns a buffer.
  size_t bytes() const { return bytes_; }
  // Each slice a buffer of its own, under its tag (no recomputation).
  void allocate_own(Device& device);
  // The slices laid out over `base` (bytes() at least), memory every block shares.
  void place(void* base);

 private:
  static constexpr size_t kAlignment = 256;
  std::vector<size_t> sizes_, offsets_;
  std::vector<MemoryTag> tags_;
  std::vector<void*> addresses_;
  std::vector<Buffer> own_;
  size_t bytes_ = 0;
};

// The one allocation every block of a replica lays its set over under
// --activation_checkpointing=blocks: as large as the largest set, held as activations.
Buffer allocate_shared_block_activations(Device& device, const std::vector<const BlockActivations*>& sets);

// A block's forward run again before its backward, as a trace shows it (a span named after the
// block, of category "recompute", inside the backward pass) and as the timed steps' breakdown
// counts it (a lap of its own inside backward: summary.breakdown's recompute_in_backward_ms).
class RecomputeSpan {
 public:
  RecomputeSpan(Device& device, const std::string& block)
      : trace_((device.trace().lap(StepPart::backward), device.trace())),
        span_(device, StreamKind::compute, block, "recompute") {}
  ~RecomputeSpan() { trace_.lap(StepPart::recompute); }
  RecomputeSpan(const RecomputeSpan&) = delete;
  RecomputeSpan& operator=(const RecomputeSpan&) = delete;

 private:
  StepTrace& trace_;
  TracedSpan span_;
};

}  // namespace dpbench
