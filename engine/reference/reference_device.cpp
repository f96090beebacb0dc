// ReferenceDevice: host memory, synchronous streams and steady-clock events (see the header).
#include "engine/reference/reference_device.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/errors.h"
#include "engine/machine/host_memory.h"

namespace dpbench {
namespace {

// Cache-line alignment: what vectorised loops like, and at least what any float/int/double needs.
constexpr size_t kAlignment = 64;

void free_aligned(void* pointer) {
  uncount_host_allocation(pointer);
  std::free(pointer);
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

Buffer allocate_aligned(size_t bytes, int device_index) {
  // aligned_alloc wants a multiple of the alignment; a zero-byte request still gets a valid pointer.
  const size_t rounded = bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  check_host_allocation(rounded, "reference device " + std::to_string(device_index));
  void* data = rounded >= bytes ? std::aligned_alloc(kAlignment, rounded) : nullptr;
  if (data == nullptr) {
    char message[160];
    std::snprintf(message, sizeof message,
                  "out of host memory on reference device %d: allocating %.1f MiB failed",
                  device_index, static_cast<double>(bytes) / (1024.0 * 1024.0));
    throw RuntimeError(message);
  }
  count_host_allocation(data, rounded);
  return Buffer(data, bytes, &free_aligned);
}

std::atomic<uint64_t>& reference_device_capacity() {
  static std::atomic<uint64_t> capacity{0};
  return capacity;
}

// Work is synchronous, so the moment of record() is the moment the preceding work finished.
class ReferenceEvent final : public Event {
 public:
  void record(StreamKind /*stream*/) override {
    recorded_at_ = std::chrono::steady_clock::now();
    recorded_ = true;
  }
  void synchronize() override {}
  bool query() override { return true; }  // recorded means done: work runs as it is enqueued
  double elapsed_ms_since(const Event& start) const override {
    const auto* start_event = dynamic_cast<const ReferenceEvent*>(&start);
    if (start_event == nullptr) {
      throw RuntimeError("elapsed_ms_since: the start event does not belong to a reference device");
    }
    if (!recorded_ || !start_event->recorded_) {
      throw RuntimeError("elapsed_ms_since: both events must be recorded first");
    }
    return std::chrono::duration<double, std::milli>(recorded_at_ - start_event->recorded_at_)
        .count();
  }

 private:
  std::chrono::steady_clock::time_point recorded_at_{};
  bool recorded_ = false;
};

}  // namespace

ReferenceDevice::ReferenceDevice(int index) {
  description_.index = index;
  description_.name = "reference-cpu-" + std::to_string(index);
  description_.memory_bytes = physical_memory_bytes();
  description_.compute_capability = "";
  capacity_ = reference_device_capacity().load();
  for (int stream = 0; stream < kNumStreamKinds; ++stream)
    counted_[stream] = std::make_unique<CountingBackend>(backend_, *this, static_cast<StreamKind>(stream));
}

Buffer ReferenceDevice::allocate_memory(size_t bytes) {
  if (capacity_ > 0) {
    const uint64_t held = total_bytes(memory().figures().held);
    if (held + bytes > capacity_) {
      char message[200];
      std::snprintf(message, sizeof message,
                    "out of memory on reference device %d: allocating %.1f MiB with %.1f MiB held passes its "
                    "capacity of %.1f MiB",
                    index(), static_cast<double>(bytes) / (1024.0 * 1024.0),
                    static_cast<double>(held) / (1024.0 * 1024.0), static_cast<double>(capacity_) / (1024.0 * 1024.0));
      throw OutOfDeviceMemory(message, index());
    }
  }
  return allocate_aligned(bytes, index());
}

Buffer ReferenceDevice::allocate_host_visible_memory(size_t bytes) {
  return allocate_aligned(bytes, index());
}

void ReferenceDevice::copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, device_src, bytes);
}

void ReferenceDevice::copy_from_host(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes > 0) std::memcpy(device_dst, host_src, bytes);
}

std::unique_ptr<Event> ReferenceDevice::create_event(bool /*timing*/) {
  return std::make_unique<ReferenceEvent>();
}

std::unique_ptr<Device> create_reference_device(int index) {
  return std::make_unique<ReferenceDevice>(index);
}

void set_reference_device_capacity(uint64_t bytes) { reference_device_capacity() = bytes; }

}  // namespace dpbench
