// The records of a device's timeline: its streams, the spans and instants a traced step holds, and
// what a device's trace holds after the run (engine/backend/step_trace.h records them;
// reports/chrome_trace.h and reports/backward_timeline.h read them). Plain data, no device.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dpbench {

// Each device has four in-order streams. Work on different streams runs concurrently and is
// ordered only by events (Event::record on one stream, Device::wait on another). `auxiliary` is a
// second compute stream for work off the critical path (a weight gradient computed while the
// compute stream goes on with the layers below).
enum class StreamKind { compute = 0, communication = 1, copy = 2, auxiliary = 3 };
constexpr int kNumStreamKinds = 4;

// The tracks of one device besides its streams (whose tracks are their StreamKind values).
enum class HostTrack { device_thread = 0, host_workers = 1 };

// A span or instant as recorded: where it lies, and its times once resolved.
struct TimelineSpan {
  std::string name, category;
  int track = 0;  // a StreamKind value, or kHostTrackBase + a HostTrack value
  int begin_slot = -1, end_slot = -1;  // device stamps (-1: a host time)
  int64_t begin_ns = 0, end_ns = 0;    // host steady clock; host spans directly, device ones once resolved
  nlohmann::json args;
  int flow_in = -1;  // index (into instants) of the instant an arrow leads from, or -1
};
struct TimelineInstant {
  std::string name;
  int track = 0;
  int slot = -1;
  int64_t at_ns = 0;
  nlohmann::json args;
};

// One traced step of one device.
struct TracedStep {
  int64_t step = 0;  // 0-based over the run, warm-up first
  bool measured = false;
  bool ran = false;  // begin_step was called for it (a captured step may never run: a stopped run)
  std::deque<TimelineSpan> spans;  // a deque: host functions fill their span's times later
  std::vector<TimelineInstant> instants;
  int slots_used = 0;
  bool truncated = false;  // more stamps than a row holds: the rest were dropped
};

// What a device's trace holds after the run, in host steady-clock nanoseconds.
struct DeviceTimeline {
  int device_index = 0;
  std::string device_name;
  int64_t clock_offset_ns = 0;       // host = device + this (0 where the device clock is the host's)
  int64_t clock_uncertainty_ns = 0;  // half the width of the interval the offset lies in
  std::vector<TracedStep> steps;
};

constexpr int kHostTrackBase = 16;

// The instant the runner marks on the compute stream, in traced steps, where the model announces a
// finished range of its gradient buffer (args: "offset", "count" in elements): summary.timeline
// (reports/backward_timeline.h) and `dpbench predict` read when each bucket became ready from it.
inline constexpr char kGradientsProducedInstant[] = "gradients produced";
inline int host_track_id(HostTrack track) { return kHostTrackBase + static_cast<int>(track); }

}  // namespace dpbench
