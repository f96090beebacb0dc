// Device: one GPU (cuda backend) or one host stand-in (reference backend): its streams, events,
// memory and the ops bound to each stream. Streams, events and buffers are RAII and move-only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "engine/backend/backend.h"
#include "engine/backend/backend_kind.h"
#include "engine/backend/device_timeline.h"
#include "engine/data_type.h"
#include "engine/machine/memory_ledger.h"

namespace dpbench {

class StepTrace;

struct DeviceDescription {
  int index = 0;  // CUDA ordinal, or reference device number
  std::string name;
  uint64_t memory_bytes = 0;
  std::string compute_capability;  // "9.0"; empty for reference devices
  std::string pci_bus_id;          // "0000:18:00.0", how NVML finds the GPU; empty for reference devices
};

// A point in a stream. Created once (never per step), recorded every step.
class Event {
 public:
  virtual ~Event() = default;
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  virtual void record(StreamKind stream) = 0;
  // Host blocks until the work before the recorded point has finished.
  virtual void synchronize() = 0;
  // True when the work before the recorded point has finished; never blocks.
  virtual bool query() = 0;
  // Milliseconds from `start` to this event; both recorded, both complete, both timing events.
  virtual double elapsed_ms_since(const Event& start) const = 0;
};

// Owning handle to device (or host-visible) memory; the deleter knows how to free it, and its
// ledger entry takes it off the device's MemoryLedger when it goes.
class Buffer {
 public:
  using Deleter = void (*)(void*);
  Buffer() = default;
  Buffer(void* data, size_t bytes, Deleter deleter) : data_(data), bytes_(bytes), deleter_(deleter) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = other.data_;
      bytes_ = other.bytes_;
      deleter_ = other.deleter_;
      entry_ = std::move(other.entry_);
      other.data_ = nullptr;
      other.bytes_ = 0;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }
  // Device::allocate records each buffer it hands out here.
  void account(LedgerEntry entry) { entry_ = std::move(entry); }

 private:
  void reset() {
    if (data_ && deleter_) deleter_(data_);
    data_ = nullptr;
    entry_.release();
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Deleter deleter_ = nullptr;
  LedgerEntry entry_;
};

// Work recorded once and replayed as a unit (a CUDA graph): one launch instead of one per kernel.
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  // Enqueues the recorded work on the stream it was captured from.
  virtual void launch() = 0;
  // Kernels one launch runs (the graph's kernel nodes, those of child graphs included); -1 where
  // the work is not a graph of kernels.
  virtual int64_t kernel_count() const { return -1; }
};

class Device {
 public:
  virtual ~Device();
  Device();  // engine/backend/device.cpp: with its StepTrace
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual BackendKind kind() const = 0;
  virtual const DeviceDescription& description() const = 0;
  int index() const { return description().index; }

  // Make this device current for the calling host thread (cudaSetDevice). Each runner thread
  // calls it once before touching the device.
  virtual void make_current() = 0;

  // The ops, enqueued on the given stream. Every op that enqueues work counts itself on this
  // device (enqueued()).
  virtual Backend& ops(StreamKind stream = StreamKind::compute) = 0;

  // Device memory, uninitialised, recorded in memory() under `tag` for as long as the buffer
  // lives: every allocation says what it holds and whose it is. Throws RuntimeError naming the
  // size when memory runs out.
  Buffer allocate(size_t bytes, const MemoryTag& tag);
  // Page-locked host memory that kernels can write directly (zero-copy); data() is valid on both
  // host and device. Used for per-step loss values, so reading them needs no copy in the step.
  // Recorded as pinned host memory (Note [pinned host memory in the ledger]).
  Buffer allocate_host_visible(size_t bytes, const MemoryTag& tag);

  // The most bytes dpbench may hold on the device at once, by its ledger: --device_memory where
  // given, else on a GPU what was free when the device was made; 0: no limit (a reference
  // device's default: its memory is the host's). allocate() refuses to pass it, before it
  // allocates, with OutOfDeviceMemory (engine/errors.h).
  uint64_t memory_limit() const { return memory_limit_.load(); }
  void set_memory_limit(uint64_t bytes) {
    memory_limit_ = bytes;
    memory_->set_limit(bytes);
  }

  // Where this device's memory went (engine/machine/memory_ledger.h). Whatever allocates on the
  // device outside allocate() (a backend's plans and workspaces) records itself here too.
  MemoryLedger& memory() const { return *memory_; }
  // What the device itself says is in use now (the GPU's used bytes from cudaMemGetInfo: every
  // process's, its CUDA context included), and what it said when the device was made, before
  // dpbench allocated anything (the context, and other processes). nullopt where the device says
  // nothing (the reference backend: its memory is the process's heap).
  virtual std::optional<uint64_t> reported_memory_used() const { return std::nullopt; }
  virtual std::optional<uint64_t> reported_memory_used_at_creation() const { return std::nullopt; }

  // Blocking copies (they wait for all streams of the device to reach them first).
  virtual void copy_to_host(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual void copy_from_host(void* device_dst, const void* host_src, size_t bytes) = 0;

  virtual std::unique_ptr<Event> create_event(bool timing) = 0;
  // Work enqueued on `waiter` after this call starts only after `event`'s point is reached.
  virtual void wait(StreamKind waiter, const Event& event) = 0;
  // Host blocks until every stream of the device is idle.
  virtual void synchronize() = 0;

  // Runs `work` on the host when `stream` reaches this point, without blocking the calling thread
  // (cudaLaunchHostFunc; `work` must not call CUDA). Later work on the stream waits for it. The
  // reference device runs it at once.
  virtual void enqueue_host_function(StreamKind stream, std::function<void()> work) = 0;

  // Records (without running) what `enqueue` puts on the compute stream, for replay. Returns
  // nullptr where there is nothing to gain: the reference backend runs work as it is enqueued.
  virtual std::unique_ptr<CapturedWork> capture(const std::function<void()>& enqueue) { return nullptr; }

  // Work enqueued on `stream` since the device was made: backend ops, collectives of the
  // communicators over it (engine/communication/communicator.cpp) and host functions, one each (queries such
  // as workspace sizes and blocking copies do not count). Note [counted launches]: a step that
  // cannot be captured as a graph reports its exchange's launches from these counts, never
  // from numbers kept by hand. Any thread may count; reads are exact once the counting threads
  // have stopped.
  int64_t enqueued(StreamKind stream) const { return enqueued_[static_cast<int>(stream)].load(); }
  void count_enqueued(StreamKind stream, int64_t work = 1) { enqueued_[static_cast<int>(stream)] += work; }

  // Starts or stops a profiler's capture range (cudaProfilerStart/Stop), so `ncu
  // --profile-from-start off` sees only the work in between. No-op where there is no profiler.
  virtual void set_profiler_capture(bool on) {}

  // The timeline of its traced steps (--trace_file) and NVTX ranges (--nvtx): whatever enqueues
  // work marks its spans here (engine/backend/step_trace.h).
  StepTrace& trace() { return *trace_; }

 protected:
  // The backends' allocations, before allocate() records them.
  virtual Buffer allocate_memory(size_t bytes) = 0;
  virtual Buffer allocate_host_visible_memory(size_t bytes) = 0;

 private:
  std::shared_ptr<MemoryLedger> memory_;  // before trace_, which allocates through it
  std::atomic<uint64_t> memory_limit_{0};
  std::unique_ptr<StepTrace> trace_;
  std::atomic<int64_t> enqueued_[kNumStreamKinds] = {};
};

}  // namespace dpbench
