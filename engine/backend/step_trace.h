// StepTrace: the timeline of a device's traced steps (--trace_file) and its NVTX ranges (--nvtx).
//
// Every device has one (Device::trace()). While the runner enqueues a traced step, the code that
// enqueues work (layers, strategies, the optimizer, the data feed) opens and closes spans on the
// stream that runs it; each span end is a timestamp the stream itself writes into a table on the
// device (Backend::write_timestamp), so a step replayed as a CUDA graph still times itself (the
// runner captures each traced step as a graph of its own, whose stamps land in that step's row).
// Host work (the device's thread, host functions of a parameter server) is timed on the host's
// steady clock. After the run, DeviceTimeline holds every span in host steady-clock nanoseconds
// (the device clock aligned by calibrate_device_clock), ready for reports/chrome_trace.h.
//
// Outside traced steps nothing is recorded: every call returns at its first test, and with
// --nvtx alone each span is an NVTX range and no more.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/device_timeline.h"
#include "engine/data_type.h"
#include "engine/machine/host_clock.h"

namespace dpbench {

class Device;
class Buffer;

// The parts a timed step's stopwatch splits it into (Note [timed parts of a step] in
// engine/training/runner.cpp): the runner laps the first three; a block recomputed in backward
// (--activation_checkpointing=blocks) laps its recomputation apart from the backward around it.
enum class StepPart : int { data = 0, forward = 1, backward = 2, recompute = 3 };
inline constexpr int kStepParts = 4;

class StepTrace {
 public:
  // Stamps one traced step may write; past it the step is marked truncated.
  static constexpr int kSlotsPerStep = 8192;

  explicit StepTrace(Device& device);
  ~StepTrace();
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  // ---- the runner
  // Before the run: room for `steps` traced steps (device memory), and NVTX ranges or not.
  void prepare(int steps, bool nvtx);
  // Around the enqueueing of traced step `step` (row `row` of the table). A traced step's stamps
  // are taken only between these calls. A step replayed as a graph is captured before the run
  // reaches it (begin_capture ... end_step, Note [traced steps] in engine/training/runner.cpp), then run
  // (begin_step ... end_step, for the spans enqueued around the graph's launch); its row holds both.
  void begin_capture(int row, int64_t step, bool measured);
  void begin_step(int row, int64_t step, bool measured);
  void end_step();
  // After the run, the device idle: reads the stamps and resolves every time to the host clock.
  DeviceTimeline collect(int device_index, const std::string& device_name);

  // While it enqueues a timed step, where the step's stopwatch keeps its clock and its parts'
  // totals (device memory; nullptr, nullptr after it).
  void set_stopwatch(int64_t* clock, int64_t* totals) {
    stopwatch_clock_ = clock;
    stopwatch_totals_ = totals;
  }

  // ---- everyone who enqueues work
  // In a timed step, the time since the stopwatch's last lap goes to `part` (one tiny op on the
  // compute stream); nothing in the other steps.
  void lap(StepPart part);
  bool recording() const { return row_.load(std::memory_order_relaxed) >= 0; }
  bool annotating() const { return recording() || nvtx_; }  // spans are worth building

  struct Span {
    int index = -1;          // into the step's spans; -1: not recorded
    int track = 0;
    bool nvtx = false;  // an NVTX range is open
    uint64_t nvtx_range = 0;
  };
  // A span on `stream`, from the point the stream reaches now to end().
  Span begin(StreamKind stream, const std::string& name, const char* category, nlohmann::json args = nullptr);
  void end(const Span& span);
  // Ends `span` and marks an instant called `instant_name` at the same point (the same stamp).
  void end_with_instant(const Span& span, const std::string& instant_name, nlohmann::json args = nullptr);
  // Ends `open` and begins the next span of its stream at the same point (one stamp for both).
  Span next(const Span& open, const std::string& name, const char* category);
  // A point on `stream`; returns its index for flow arrows (-1: not recorded).
  int instant(StreamKind stream, const std::string& name, nlohmann::json args = nullptr);
  // Draws an arrow from instant `from` (this step's) to the start of `span`.
  void flow(int from, const Span& span);
  // A span on a host track timed by this thread's clock now (begin) and at end_host().
  Span begin_host(HostTrack track, const std::string& name, const char* category, nlohmann::json args = nullptr);
  void end_host(const Span& span);
  // A host span timed later by whoever runs the work (a host function): it stores its own
  // steady-clock nanoseconds at the pointers returned; nullptr pair when not recording.
  struct HostTimes {
    int64_t* begin_ns = nullptr;
    int64_t* end_ns = nullptr;
  };
  HostTimes deferred_host_span(HostTrack track, const std::string& name, const char* category,
                               nlohmann::json args = nullptr);

 private:
  int stamp(StreamKind stream);  // a slot of this row written by `stream`, or -1 when full
  void open_row(int row, int64_t step, bool measured, bool runs);
  Span open_handle(int track, const std::string& name) const;
  void add_span(Span& span, const std::string& name, const char* category, nlohmann::json args, int begin_slot,
                int64_t begin_ns);
  TracedStep& current() { return steps_[static_cast<size_t>(row_.load())]; }

  Device& device_;
  bool nvtx_ = false;
  int64_t* stopwatch_clock_ = nullptr;
  int64_t* stopwatch_totals_ = nullptr;
  // The row being recorded; -1: not recording. Atomic: another device's thread may enqueue here
  // (the leader of a rendezvous), after this device's thread began the step.
  std::atomic<int> row_{-1};
  int rows_ = 0;
  std::unique_ptr<Buffer> table_;  // int64 (rows, kSlotsPerStep) of device clock nanoseconds
  // One per row. Host functions may fill a span (deferred_host_span) until collect().
  std::vector<TracedStep> steps_;
  std::mutex mutex_;  // a parameter server's or peer exchange's leader enqueues for other devices
};

// Scoped span: begins on construction and ends on destruction, when the device's trace annotates.
class TracedSpan {
 public:
  TracedSpan(Device& device, StreamKind stream, const std::string& name, const char* category,
             nlohmann::json args = nullptr);
  ~TracedSpan();
  TracedSpan(const TracedSpan&) = delete;
  TracedSpan& operator=(const TracedSpan&) = delete;

 private:
  StepTrace* trace_ = nullptr;
  StepTrace::Span span_;
};

// Measures host = device + offset for `device`'s clock (Backend::write_timestamp): the stream
// writes its clock into host-visible memory while the host watches; the offset lies between the
// host clock before the launch and the moment the value was seen. Best of a few tries; the device
// must be idle. {offset, uncertainty}.
std::pair<int64_t, int64_t> calibrate_device_clock(Device& device);

}  // namespace dpbench
