// Device's constructor and destructor: where a device gets its StepTrace (engine/backend/step_trace.h),
// out of line so that device.h need not include the trace that refers back to it; and the one
// place every allocation is recorded in the device's MemoryLedger.
#include "engine/backend/device.h"

#include <cstdio>

#include "engine/backend/step_trace.h"
#include "engine/errors.h"

namespace dpbench {

Device::Device() : memory_(MemoryLedger::create()), trace_(std::make_unique<StepTrace>(*this)) {}
Device::~Device() = default;

namespace {

std::string in_mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

}  // namespace

Buffer Device::allocate(size_t bytes, const MemoryTag& tag) {
  const uint64_t limit = memory_limit();
  if (limit > 0) {
    const uint64_t held = total_bytes(memory_->figures().held);
    if (held + bytes > limit)
      throw OutOfDeviceMemory("too little memory on device " + std::to_string(index()) + ": " + tag.owner + "'s " +
                                  memory_category_key(tag.category) + " (" + in_mib(bytes) + ") with " +
                                  in_mib(held) + " held would pass its " + in_mib(limit) +
                                  "; reduce --batch_size (dpbench predict says which fits) or use more devices",
                              index());
  }
  Buffer buffer = allocate_memory(bytes);
  buffer.account(memory_->record(tag, MemoryPlace::device, bytes));
  return buffer;
}

Buffer Device::allocate_host_visible(size_t bytes, const MemoryTag& tag) {
  Buffer buffer = allocate_host_visible_memory(bytes);
  buffer.account(memory_->record(tag, MemoryPlace::pinned_host, bytes));
  return buffer;
}

}  // namespace dpbench
