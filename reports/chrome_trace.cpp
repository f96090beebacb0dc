// Chrome Trace Event JSON from device timelines (see the header).
#include "reports/chrome_trace.h"

#include <algorithm>
#include <limits>


namespace dpbench {
namespace {

nlohmann::json metadata_event(const char* name, int pid, int tid, nlohmann::json args) {
  return {{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

// The tracks a timeline uses, in display order.
std::vector<int> tracks_of(const DeviceTimeline& timeline) {
  std::vector<int> tracks;
  for (const TracedStep& step : timeline.steps) {
    for (const TimelineSpan& span : step.spans) tracks.push_back(span.track);
    for (const TimelineInstant& instant : step.instants) tracks.push_back(instant.track);
  }
  std::sort(tracks.begin(), tracks.end(), [](int a, int b) { return trace_thread_id(a) < trace_thread_id(b); });
  tracks.erase(std::unique(tracks.begin(), tracks.end()), tracks.end());
  return tracks;
}

}  // namespace

std::string trace_process_name(const DeviceTimeline& timeline, const TraceOrigin& origin) {
  std::string name = "device " + std::to_string(timeline.device_index) + ": " + timeline.device_name;
  if (origin.num_ranks > 1) name = "rank " + std::to_string(origin.rank) + " (" + origin.host + ") " + name;
  return name;
}

std::string trace_clock_label(const DeviceTimeline& timeline, const TraceOrigin& origin) {
  return "clock aligned within " +
         std::to_string((timeline.clock_uncertainty_ns + origin.clock_uncertainty_ns + 500) / 1000) + " us";
}

std::string trace_track_name(int track) {
  if (track == host_track_id(HostTrack::device_thread)) return "host: the device's thread";
  if (track == host_track_id(HostTrack::host_workers)) return "host: parameter server threads";
  switch (static_cast<StreamKind>(track)) {
    case StreamKind::compute: return "compute stream";
    case StreamKind::communication: return "communication stream";
    case StreamKind::copy: return "copy stream";
    case StreamKind::auxiliary: return "auxiliary stream";
  }
  return "track " + std::to_string(track);
}

// The device's thread first, then its streams in StreamKind order, then the host's workers.
int trace_thread_id(int track) {
  if (track == host_track_id(HostTrack::device_thread)) return 0;
  if (track >= kHostTrackBase) return 1 + kNumStreamKinds + (track - kHostTrackBase);
  return 1 + track;
}

nlohmann::json trace_events(const std::vector<DeviceTimeline>& timelines, const TraceOrigin& origin) {
  nlohmann::json events = nlohmann::json::array();
  int64_t next_flow = static_cast<int64_t>(origin.rank) << 32;
  for (size_t position = 0; position < timelines.size(); ++position) {
    const DeviceTimeline& timeline = timelines[position];
    const int pid = origin.rank * origin.devices_per_rank + static_cast<int>(position);
    const int64_t shift = origin.clock_shift_ns;
    events.push_back(metadata_event("process_name", pid, 0, {{"name", trace_process_name(timeline, origin)}}));
    events.push_back(metadata_event("process_sort_index", pid, 0, {{"sort_index", pid}}));
    events.push_back(metadata_event("process_labels", pid, 0, {{"labels", trace_clock_label(timeline, origin)}}));
    for (int track : tracks_of(timeline)) {
      const int tid = trace_thread_id(track);
      events.push_back(metadata_event("thread_name", pid, tid, {{"name", trace_track_name(track)}}));
      events.push_back(metadata_event("thread_sort_index", pid, tid, {{"sort_index", tid}}));
    }
    for (const TracedStep& step : timeline.steps) {
      std::vector<int64_t> flow_of_instant(step.instants.size(), -1);
      for (size_t i = 0; i < step.instants.size(); ++i) {
        const TimelineInstant& instant = step.instants[i];
        nlohmann::json event = {{"ph", "i"}, {"s", "t"}, {"name", instant.name}, {"cat", "marker"},
                                {"pid", pid}, {"tid", trace_thread_id(instant.track)},
                                {"ts_ns", instant.at_ns + shift}};
        if (!instant.args.is_null()) event["args"] = instant.args;
        events.push_back(std::move(event));
      }
      for (const TimelineSpan& span : step.spans) {
        nlohmann::json event = {{"ph", "X"}, {"name", span.name}, {"cat", span.category},
                                {"pid", pid}, {"tid", trace_thread_id(span.track)},
                                {"ts_ns", span.begin_ns + shift},
                                {"dur_ns", std::max<int64_t>(0, span.end_ns - span.begin_ns)}};
        nlohmann::json args = span.args.is_null() ? nlohmann::json::object() : span.args;
        args["run_step"] = step.step;  // 0-based over the run, warm-up first
        event["args"] = std::move(args);
        events.push_back(std::move(event));
        if (span.flow_in >= 0 && static_cast<size_t>(span.flow_in) < step.instants.size()) {
          const TimelineInstant& from = step.instants[static_cast<size_t>(span.flow_in)];
          const int64_t id = next_flow++;
          events.push_back({{"ph", "s"}, {"id", id}, {"name", "gradient ready"}, {"cat", "flow"}, {"pid", pid},
                            {"tid", trace_thread_id(from.track)}, {"ts_ns", from.at_ns + shift}});
          events.push_back({{"ph", "f"}, {"bp", "e"}, {"id", id}, {"name", "gradient ready"}, {"cat", "flow"},
                            {"pid", pid}, {"tid", trace_thread_id(span.track)}, {"ts_ns", span.begin_ns + shift}});
        }
      }
    }
  }
  return events;
}

std::string chrome_trace_document(const std::vector<nlohmann::json>& events_by_rank, const nlohmann::json& metadata) {
  int64_t earliest = std::numeric_limits<int64_t>::max();
  for (const nlohmann::json& events : events_by_rank)
    for (const nlohmann::json& event : events)
      if (event.contains("ts_ns")) earliest = std::min(earliest, event["ts_ns"].get<int64_t>());
  if (earliest == std::numeric_limits<int64_t>::max()) earliest = 0;
  nlohmann::json all = nlohmann::json::array();
  for (const nlohmann::json& events : events_by_rank) {
    for (nlohmann::json event : events) {
      // Microseconds with nanosecond digits: viewers take fractional timestamps.
      if (event.contains("ts_ns")) {
        event["ts"] = static_cast<double>(event["ts_ns"].get<int64_t>() - earliest) / 1000.0;
        event.erase("ts_ns");
      }
      if (event.contains("dur_ns")) {
        event["dur"] = static_cast<double>(event["dur_ns"].get<int64_t>()) / 1000.0;
        event.erase("dur_ns");
      }
      all.push_back(std::move(event));
    }
  }
  nlohmann::json document = {{"traceEvents", std::move(all)}, {"displayTimeUnit", "ms"}, {"otherData", metadata}};
  return document.dump() + "\n";
}

}  // namespace dpbench
