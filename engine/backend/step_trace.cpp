// StepTrace (see the header).
#include "engine/backend/step_trace.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "engine/backend/device.h"
#include "engine/backend/nvtx_ranges.h"
#include "engine/errors.h"

namespace dpbench {

StepTrace::StepTrace(Device& device) : device_(device) {}
StepTrace::~StepTrace() = default;

void StepTrace::prepare(int steps, bool nvtx) {
  nvtx_ = nvtx;
  rows_ = steps;
  steps_.assign(static_cast<size_t>(std::max(steps, 0)), TracedStep{});
  if (steps > 0) {
    device_.make_current();
    table_ = std::make_unique<Buffer>(device_.allocate(sizeof(int64_t) * kSlotsPerStep * static_cast<size_t>(steps),
                                                       MemoryTag{MemoryCategory::trace, "step trace"}));
  }
}

void StepTrace::open_row(int row, int64_t step, bool measured, bool runs) {
  if (row < 0 || row >= rows_) throw RuntimeError("trace: step row " + std::to_string(row) + " was not prepared");
  std::lock_guard<std::mutex> lock(mutex_);
  TracedStep& traced = steps_[static_cast<size_t>(row)];
  traced.step = step;
  traced.measured = measured;
  traced.ran = traced.ran || runs;
  row_ = row;
}

void StepTrace::begin_capture(int row, int64_t step, bool measured) { open_row(row, step, measured, false); }
void StepTrace::begin_step(int row, int64_t step, bool measured) { open_row(row, step, measured, true); }

void StepTrace::end_step() {
  std::lock_guard<std::mutex> lock(mutex_);
  row_ = -1;
}

int StepTrace::stamp(StreamKind stream) {
  TracedStep& step = current();
  if (step.slots_used == kSlotsPerStep) {
    step.truncated = true;
    return -1;
  }
  const int slot = step.slots_used++;
  device_.ops(stream).write_timestamp(table_->as<int64_t>() + static_cast<size_t>(row_.load()) * kSlotsPerStep + slot);
  return slot;
}

// A handle for a span of `track`, its NVTX range opened when asked for.
StepTrace::Span StepTrace::open_handle(int track, const std::string& name) const {
  Span span;
  span.track = track;
  if (nvtx_) {
    span.nvtx = true;
    span.nvtx_range = nvtx_range_start(name);
  }
  return span;
}

// Records a span of the current step (the caller holds the mutex) and points `span` at it.
void StepTrace::add_span(Span& span, const std::string& name, const char* category, nlohmann::json args,
                         int begin_slot, int64_t begin_ns) {
  TimelineSpan recorded;
  recorded.name = name;
  recorded.category = category;
  recorded.track = span.track;
  recorded.args = std::move(args);
  recorded.begin_slot = begin_slot;
  recorded.begin_ns = begin_ns;
  span.index = static_cast<int>(current().spans.size());
  current().spans.push_back(std::move(recorded));
}

StepTrace::Span StepTrace::begin(StreamKind stream, const std::string& name, const char* category,
                                 nlohmann::json args) {
  Span span = open_handle(static_cast<int>(stream), name);
  if (!recording()) return span;
  std::lock_guard<std::mutex> lock(mutex_);
  const int slot = stamp(stream);
  if (slot >= 0) add_span(span, name, category, std::move(args), slot, 0);
  return span;
}

void StepTrace::end(const Span& span) { end_with_instant(span, std::string()); }

void StepTrace::lap(StepPart part) {
  if (stopwatch_totals_ == nullptr) return;
  device_.ops(StreamKind::compute).lap(stopwatch_clock_, stopwatch_totals_ + static_cast<int>(part));
}

void StepTrace::end_with_instant(const Span& span, const std::string& instant_name, nlohmann::json args) {
  if (span.nvtx) nvtx_range_end(span.nvtx_range);
  if (span.index < 0 || !recording()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const int slot = stamp(static_cast<StreamKind>(span.track));
  current().spans[static_cast<size_t>(span.index)].end_slot = slot;
  if (slot >= 0 && !instant_name.empty())
    current().instants.push_back(TimelineInstant{instant_name, span.track, slot, 0, std::move(args)});
}

StepTrace::Span StepTrace::next(const Span& open, const std::string& name, const char* category) {
  if (open.nvtx) nvtx_range_end(open.nvtx_range);
  Span span = open_handle(open.track, name);
  if (!recording()) return span;
  std::lock_guard<std::mutex> lock(mutex_);
  const int slot = stamp(static_cast<StreamKind>(open.track));
  if (open.index >= 0) current().spans[static_cast<size_t>(open.index)].end_slot = slot;
  if (slot >= 0) add_span(span, name, category, nullptr, slot, 0);
  return span;
}

int StepTrace::instant(StreamKind stream, const std::string& name, nlohmann::json args) {
  if (!recording()) return -1;
  std::lock_guard<std::mutex> lock(mutex_);
  const int slot = stamp(stream);
  if (slot < 0) return -1;
  current().instants.push_back(TimelineInstant{name, static_cast<int>(stream), slot, 0, std::move(args)});
  return static_cast<int>(current().instants.size()) - 1;
}

void StepTrace::flow(int from, const Span& span) {
  if (from < 0 || span.index < 0 || !recording()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  current().spans[static_cast<size_t>(span.index)].flow_in = from;
}

StepTrace::Span StepTrace::begin_host(HostTrack track, const std::string& name, const char* category,
                                      nlohmann::json args) {
  Span span = open_handle(host_track_id(track), name);
  if (!recording()) return span;
  std::lock_guard<std::mutex> lock(mutex_);
  add_span(span, name, category, std::move(args), -1, host_clock_ns());
  return span;
}

void StepTrace::end_host(const Span& span) {
  if (span.nvtx) nvtx_range_end(span.nvtx_range);
  if (span.index < 0 || !recording()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  current().spans[static_cast<size_t>(span.index)].end_ns = host_clock_ns();
}

StepTrace::HostTimes StepTrace::deferred_host_span(HostTrack track, const std::string& name, const char* category,
                                                   nlohmann::json args) {
  if (!recording()) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  Span span;
  span.track = host_track_id(track);
  add_span(span, name, category, std::move(args), -1, 0);
  TimelineSpan& stored = current().spans.back();  // a deque: its address stays
  return HostTimes{&stored.begin_ns, &stored.end_ns};
}

DeviceTimeline StepTrace::collect(int device_index, const std::string& device_name) {
  DeviceTimeline timeline;
  timeline.device_index = device_index;
  timeline.device_name = device_name;
  if (std::none_of(steps_.begin(), steps_.end(), [](const TracedStep& step) { return step.ran; })) return timeline;
  device_.make_current();
  device_.synchronize();
  const auto [offset, uncertainty] = calibrate_device_clock(device_);
  timeline.clock_offset_ns = offset;
  timeline.clock_uncertainty_ns = uncertainty;
  std::vector<int64_t> stamps(kSlotsPerStep);
  for (size_t row = 0; row < steps_.size(); ++row) {
    TracedStep& step = steps_[row];
    if (!step.ran) continue;
    if (step.slots_used > 0)
      device_.copy_to_host(stamps.data(), table_->as<int64_t>() + row * kSlotsPerStep,
                           sizeof(int64_t) * static_cast<size_t>(step.slots_used));
    auto at = [&](int slot) { return stamps[static_cast<size_t>(slot)] + offset; };
    std::deque<TimelineSpan> kept;
    for (TimelineSpan& span : step.spans) {
      if (span.begin_slot >= 0) span.begin_ns = at(span.begin_slot);
      if (span.end_slot >= 0) span.end_ns = at(span.end_slot);
      // A span never closed (a truncated step), or a host function that never ran, is left out.
      const bool closed = span.begin_slot >= 0 ? span.end_slot >= 0 : (span.begin_ns != 0 && span.end_ns != 0);
      if (closed) kept.push_back(std::move(span));
      else step.truncated = true;
    }
    // Flow arrows name instants by index, which stay; spans were only filtered.
    step.spans = std::move(kept);
    for (TimelineInstant& instant : step.instants) instant.at_ns = at(instant.slot);
    timeline.steps.push_back(std::move(step));
  }
  steps_.assign(steps_.size(), TracedStep{});
  return timeline;
}

std::pair<int64_t, int64_t> calibrate_device_clock(Device& device) {
  Buffer slot = device.allocate_host_visible(sizeof(int64_t), MemoryTag{MemoryCategory::trace, "step trace"});
  volatile int64_t* seen = slot.as<int64_t>();
  int64_t lowest_upper = std::numeric_limits<int64_t>::max();
  int64_t highest_lower = std::numeric_limits<int64_t>::min();
  for (int attempt = 0; attempt < 16; ++attempt) {
    *seen = 0;
    const int64_t before = host_clock_ns();
    device.ops(StreamKind::compute).write_timestamp(slot.as<int64_t>());
    int64_t device_now = 0;
    const int64_t give_up = before + 1'000'000'000;  // a second: the device is idle, so never
    while ((device_now = *seen) == 0 && host_clock_ns() < give_up) {
    }
    const int64_t after = host_clock_ns();
    if (device_now == 0) break;
    // host time of the stamp lies in [before, after]: host = device + offset.
    highest_lower = std::max(highest_lower, before - device_now);
    lowest_upper = std::min(lowest_upper, after - device_now);
  }
  device.synchronize();
  if (highest_lower > lowest_upper) return {0, 0};  // never seen: leave the clock as it is
  return {highest_lower + (lowest_upper - highest_lower) / 2, (lowest_upper - highest_lower) / 2};
}

TracedSpan::TracedSpan(Device& device, StreamKind stream, const std::string& name, const char* category,
                       nlohmann::json args) {
  StepTrace& trace = device.trace();
  if (!trace.annotating()) return;
  trace_ = &trace;
  span_ = trace.begin(stream, name, category, std::move(args));
}

TracedSpan::~TracedSpan() {
  if (trace_) trace_->end(span_);
}

}  // namespace dpbench
