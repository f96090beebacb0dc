// The timeline of a run's traced steps as a Chrome Trace Event JSON document (the format of
// chrome://tracing, opened by ui.perfetto.dev): one process per device (per rank and device under
// mpirun), one thread per stream and host track, complete ("X") events for spans, instants for
// "gradient ready" and "exchange done" (every span's args carry its run_step: 0-based over the run,
// warm-up first), and flow arrows from each gradient range's readiness to
// its exchange. Built in two steps so that ranks can be merged: each process turns its
// timelines into events (times in nanoseconds on rank 0's clock), rank 0 joins every rank's and
// writes the document (times in microseconds from the earliest event).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/device_timeline.h"

namespace dpbench {

// Who recorded a set of timelines, and how its clock maps onto rank 0's.
struct TraceOrigin {
  int rank = 0;
  int num_ranks = 1;
  std::string host;               // named only when num_ranks > 1
  int devices_per_rank = 1;       // process ids: rank * devices_per_rank + the device's position
  int64_t clock_shift_ns = 0;     // rank 0's clock = this rank's + shift
  int64_t clock_uncertainty_ns = 0;
};

// This process's events ("ts_ns"/"dur_ns" on rank 0's clock; chrome_trace_document converts).
nlohmann::json trace_events(const std::vector<DeviceTimeline>& timelines, const TraceOrigin& origin);

// The document: every rank's events (by rank), times made microseconds from the earliest one,
// with `metadata` as its otherData.
std::string chrome_trace_document(const std::vector<nlohmann::json>& events_by_rank, const nlohmann::json& metadata);

// A device's process name ("device 0: NVIDIA H200", with its rank and host under mpirun) and the
// label that says how well its clock is aligned, shared with reports/hta_trace.h.
std::string trace_process_name(const DeviceTimeline& timeline, const TraceOrigin& origin);
std::string trace_clock_label(const DeviceTimeline& timeline, const TraceOrigin& origin);

// Track names and order, shared with the tests that read traces back.
std::string trace_track_name(int track);
int trace_thread_id(int track);

}  // namespace dpbench
