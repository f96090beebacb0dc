// The slices of a block's kept activations (see block_activations.h).
#include "models/sequence/block_activations.h"

#include <algorithm>

namespace dpbench {

BlockActivations::Slice BlockActivations::take(size_t bytes, const MemoryTag& tag) {
  Slice slice;
  slice.set_ = this;
  slice.index_ = sizes_.size();
  sizes_.push_back(bytes);
  offsets_.push_back(bytes_);
  tags_.push_back(tag);
  addresses_.push_back(nullptr);
  bytes_ += (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return slice;
}

void BlockActivations::allocate_own(Device& device) {
  for (size_t i = 0; i < sizes_.size(); ++i) {
    own_.push_back(device.allocate(sizes_[i], tags_[i]));
    addresses_[i] = own_.back().data();
  }
}

void BlockActivations::place(void* base) {
  for (size_t i = 0; i < sizes_.size(); ++i) addresses_[i] = static_cast<char*>(base) + offsets_[i];
}

Buffer allocate_shared_block_activations(Device& device, const std::vector<const BlockActivations*>& sets) {
  size_t bytes = 0;
  for (const BlockActivations* set : sets) bytes = std::max(bytes, set->bytes());
  return device.allocate(bytes, MemoryTag{MemoryCategory::activations, "recomputed block"});
}

}  // namespace dpbench
