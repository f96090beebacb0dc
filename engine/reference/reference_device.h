// ReferenceDevice: a host stand-in for one GPU. Memory is ordinary aligned host memory, every
// stream runs its work synchronously on the calling thread, and events are wall-clock stamps.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "engine/backend/counting_backend.h"
#include "engine/backend/device.h"
#include "engine/reference/reference_backend.h"

namespace dpbench {

class ReferenceDevice final : public Device {
 public:
  explicit ReferenceDevice(int index);

  BackendKind kind() const override { return BackendKind::reference; }
  const DeviceDescription& description() const override { return description_; }
  void make_current() override {}

  // Work is synchronous, so all streams share one stateless backend; each stream counts its own
  // ops.
  Backend& ops(StreamKind stream = StreamKind::compute) override { return *counted_[static_cast<int>(stream)]; }
  // The backend itself, for the tests' switches (ReferenceBackend::set_fuse_convolution_statistics).
  ReferenceBackend& reference_backend() { return backend_; }

  void copy_to_host(void* host_dst, const void* device_src, size_t bytes) override;
  void copy_from_host(void* device_dst, const void* host_src, size_t bytes) override;

  std::unique_ptr<Event> create_event(bool timing) override;
  // Everything before the event has already run, so there is nothing to wait for.
  void wait(StreamKind /*waiter*/, const Event& /*event*/) override {}
  void synchronize() override {}
  void enqueue_host_function(StreamKind stream, std::function<void()> work) override {
    count_enqueued(stream);
    work();
  }

 protected:
  Buffer allocate_memory(size_t bytes) override;
  Buffer allocate_host_visible_memory(size_t bytes) override;

 private:
  DeviceDescription description_;
  uint64_t capacity_ = 0;  // set_reference_device_capacity's, when the device was made
  ReferenceBackend backend_;
  std::array<std::unique_ptr<CountingBackend>, kNumStreamKinds> counted_;
};

// A reference device of index `index` (engine/backends.cpp creates them).
std::unique_ptr<Device> create_reference_device(int index);

// For tests of a GPU too small for even one replica: the whole memory of the GPU that the
// reference devices made from now on stand in for. An allocation past it is refused with
// OutOfDeviceMemory as cudaMalloc refuses it, whatever the device's memory limit: the
// too-little-memory sizing lifts the limit, never this (Note [too little memory] in
// engine/training/runner.h). 0, the default: none; host memory takes whatever is asked.
void set_reference_device_capacity(uint64_t bytes);

}  // namespace dpbench
