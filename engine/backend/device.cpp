// Device's constructor and destructor: where a device gets its StepTrace (engine/backend/step_trace.h),
// out of line so that device.h need not include the trace that refers back to it; and the one
// place every allocation is recorded in the device's MemoryLedger.
#include "engine/backend/device.h"

#include "engine/backend/step_trace.h"

namespace dpbench {

Device::Device() : memory_(MemoryLedger::create()), trace_(std::make_unique<StepTrace>(*this)) {}
Device::~Device() = default;

Buffer Device::allocate(size_t bytes, const MemoryTag& tag) {
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
