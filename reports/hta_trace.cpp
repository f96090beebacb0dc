// Holistic Trace Analysis documents from device timelines (see the header).
#include "reports/hta_trace.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace dpbench {
namespace {

// Note [HTA kernels from nested spans]
// HTA reads every event with a "stream" argument as a GPU kernel, and adds kernel time up as if
// kernels on a stream never overlapped: a "step 23" span holding "backward" holding "layer3.2"
// would count three times. So each stream's time is cut at every span edge and each piece goes to
// the innermost span covering it (the one begun last; for equal begins the one ending first, then
// the one recorded last): a layer group's piece is a kernel named after it, and what a pass does
// outside its groups (the loss, the first layer) a kernel named after the pass. Two kinds of span
// give no kernel, so that their time reads as HTA's idle time: the step (a frame around the work,
// whose uncovered time is the stream waiting for the host or for another stream) and "wait for
// exchange" (the stream waiting for communication: HTA's non-compute time when an exchange runs
// alone then). Times are written in whole microseconds, each edge rounded to the nearest, so
// pieces that touch still touch: HTA would round fractional starts up and ends down, opening a
// microsecond of idle time at every edge.

bool makes_kernel(const std::string& category) { return category != "step" && category != "exposed communication"; }

// HTA's kernel type comes from the name: "ncclKernel..." is communication, "Memcpy..." memory, the
// rest compute. A pass's layer group keeps its pass in the name ("backward: layer3.2") so that HTA's
// kernel breakdown tells the two apart.
std::pair<std::string, std::string> kernel_name_and_category(const TimelineSpan& span) {
  if (span.category == "communication") return {kHtaCommunicationPrefix + span.name, "kernel"};
  if (span.category == "data") return {"Memcpy HtoD (" + span.name + ")", "gpu_memcpy"};
  if (span.name.rfind(span.category, 0) == 0) return {span.name, "kernel"};
  return {span.category + ": " + span.name, "kernel"};
}

struct StreamSpan {
  const TimelineSpan* span = nullptr;
  int64_t run_step = 0;
};

// One stream's spans cut into kernels (the note).
void add_stream_kernels(const std::vector<StreamSpan>& spans, std::vector<HtaKernel>& kernels) {
  struct Edge {
    int64_t at;
    bool opens;
    size_t span;
  };
  std::vector<Edge> edges;
  for (size_t i = 0; i < spans.size(); ++i) {
    const TimelineSpan& span = *spans[i].span;
    if (span.end_ns <= span.begin_ns) continue;  // takes no time: owns nothing
    edges.push_back({span.begin_ns, true, i});
    edges.push_back({span.end_ns, false, i});
  }
  // Closing before opening at the same time: a span that ends where the next begins owns nothing after.
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return std::tie(a.at, a.opens, a.span) < std::tie(b.at, b.opens, b.span);
  });
  // Ordered so that the last is the innermost: latest begin, then earliest end, then last recorded.
  std::set<std::tuple<int64_t, int64_t, size_t>> open;
  auto key = [&](size_t i) { return std::make_tuple(spans[i].span->begin_ns, -spans[i].span->end_ns, i); };
  size_t last = kernels.size();  // this stream's latest kernel, none yet
  size_t last_owner = 0;
  for (size_t e = 0; e < edges.size();) {
    const int64_t at = edges[e].at;
    for (; e < edges.size() && edges[e].at == at; ++e) {
      if (edges[e].opens) {
        open.insert(key(edges[e].span));
      } else {
        open.erase(key(edges[e].span));
      }
    }
    if (open.empty() || e == edges.size()) continue;
    const size_t owner = std::get<2>(*open.rbegin());
    const StreamSpan& owning = spans[owner];
    if (!makes_kernel(owning.span->category)) continue;
    const int64_t until = edges[e].at;
    if (last < kernels.size() && last_owner == owner && kernels[last].end_ns == at) {
      kernels[last].end_ns = until;  // its owner goes on past an edge that changed nothing for it
      continue;
    }
    auto [name, category] = kernel_name_and_category(*owning.span);
    HtaKernel kernel;
    kernel.name = std::move(name);
    kernel.category = std::move(category);
    kernel.track = owning.span->track;
    kernel.begin_ns = at;
    kernel.end_ns = until;
    kernel.run_step = owning.run_step;
    kernel.args = owning.span->args.is_null() ? nlohmann::json::object() : owning.span->args;
    last = kernels.size();
    last_owner = owner;
    kernels.push_back(std::move(kernel));
  }
}

bool is_stream_track(int track) { return track >= 0 && track < kNumStreamKinds; }

// Whole microseconds, rounded to the nearest (the note).
int64_t whole_us(int64_t ns) { return ns >= 0 ? (ns + 500) / 1000 : -((-ns + 500) / 1000); }

nlohmann::json metadata_event(const char* name, int pid, int tid, nlohmann::json args) {
  return {{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"ts", 0}, {"args", std::move(args)}};
}

// A complete event from [begin_ns, end_ns) shifted onto rank 0's clock, in whole microseconds.
nlohmann::json complete_event(const std::string& name, const std::string& category, int pid, int tid, int64_t begin_ns,
                              int64_t end_ns, int64_t shift_ns, nlohmann::json args) {
  const int64_t begin = whole_us(begin_ns + shift_ns);
  const int64_t end = std::max(begin, whole_us(end_ns + shift_ns));
  return {{"ph", "X"}, {"name", name}, {"cat", category}, {"pid", pid}, {"tid", tid},
          {"ts", begin}, {"dur", end - begin}, {"args", std::move(args)}};
}

// Pids at or above this are no process's (Linux's pid_max is at most 2^22): the host's tracks move
// there where the process's pid is also a device's index (pid 1 in a container).
constexpr int kAbovePidMax = 1 << 22;

}  // namespace

std::vector<HtaKernel> hta_kernels(const DeviceTimeline& timeline) {
  std::vector<HtaKernel> kernels;
  for (int track = 0; track < kNumStreamKinds; ++track) {
    std::vector<StreamSpan> spans;
    for (const TracedStep& step : timeline.steps)
      for (const TimelineSpan& span : step.spans)
        if (span.track == track) spans.push_back({&span, step.step});
    add_stream_kernels(spans, kernels);
  }
  return kernels;
}

std::string hta_trace_file_name(int rank) { return "rank" + std::to_string(rank) + ".json"; }

std::string hta_trace_document(const DeviceTimeline& timeline, const HtaRank& rank, const TraceOrigin& origin,
                               const nlohmann::json& metadata) {
  const int device_pid = timeline.device_index;
  const int host_pid = rank.host_process_id == device_pid ? rank.host_process_id + kAbovePidMax : rank.host_process_id;
  const int64_t shift = origin.clock_shift_ns;
  std::vector<nlohmann::json> events;
  const std::string host_name =
      origin.num_ranks > 1 ? "rank " + std::to_string(origin.rank) + " (" + origin.host + ") host" : "host";
  events.push_back(metadata_event("process_name", device_pid, 0, {{"name", trace_process_name(timeline, origin)}}));
  events.push_back(metadata_event("process_sort_index", device_pid, 0, {{"sort_index", 0}}));
  events.push_back(metadata_event("process_labels", device_pid, 0, {{"labels", trace_clock_label(timeline, origin)}}));
  events.push_back(metadata_event("process_name", host_pid, 0, {{"name", host_name}}));
  events.push_back(metadata_event("process_sort_index", host_pid, 0, {{"sort_index", 1}}));
  std::set<int> tracks;
  for (const TracedStep& step : timeline.steps) {
    for (const TimelineSpan& span : step.spans) tracks.insert(span.track);
    for (const TimelineInstant& instant : step.instants) tracks.insert(instant.track);
  }
  for (int track : tracks) {
    const int pid = is_stream_track(track) ? device_pid : host_pid;
    const int tid = trace_thread_id(track);
    events.push_back(metadata_event("thread_name", pid, tid, {{"name", trace_track_name(track)}}));
    events.push_back(metadata_event("thread_sort_index", pid, tid, {{"sort_index", tid}}));
  }

  // The kernels: HTA's view of each stream (the note); "stream" and "device" as Kineto writes them.
  for (const HtaKernel& kernel : hta_kernels(timeline)) {
    nlohmann::json args = kernel.args;
    args["device"] = device_pid;
    args["stream"] = trace_thread_id(kernel.track);
    args["run_step"] = kernel.run_step;
    nlohmann::json event = complete_event(kernel.name, kernel.category, device_pid, trace_thread_id(kernel.track),
                                          kernel.begin_ns, kernel.end_ns, shift, std::move(args));
    if (event["dur"].get<int64_t>() > 0) events.push_back(std::move(event));
  }
  // The spans as the Chrome trace has them (without "stream": HTA would take them for kernels),
  // their instants and the arrows from each gradient's readiness to its exchange.
  int64_t next_flow = 0;
  for (const TracedStep& step : timeline.steps) {
    for (const TimelineInstant& instant : step.instants) {
      nlohmann::json event = {{"ph", "i"}, {"s", "t"}, {"name", instant.name}, {"cat", "marker"},
                              {"pid", is_stream_track(instant.track) ? device_pid : host_pid},
                              {"tid", trace_thread_id(instant.track)}, {"ts", whole_us(instant.at_ns + shift)}};
      if (!instant.args.is_null()) event["args"] = instant.args;
      events.push_back(std::move(event));
    }
    for (const TimelineSpan& span : step.spans) {
      const bool on_device = is_stream_track(span.track);
      nlohmann::json args = span.args.is_null() ? nlohmann::json::object() : span.args;
      args["run_step"] = step.step;
      events.push_back(complete_event(span.name, on_device ? "gpu_user_annotation" : "user_annotation",
                                      on_device ? device_pid : host_pid, trace_thread_id(span.track), span.begin_ns,
                                      span.end_ns, shift, std::move(args)));
      if (span.flow_in >= 0 && static_cast<size_t>(span.flow_in) < step.instants.size()) {
        const TimelineInstant& from = step.instants[static_cast<size_t>(span.flow_in)];
        const int64_t id = next_flow++;
        events.push_back({{"ph", "s"}, {"id", id}, {"name", "gradient ready"}, {"cat", "flow"},
                          {"pid", is_stream_track(from.track) ? device_pid : host_pid},
                          {"tid", trace_thread_id(from.track)}, {"ts", whole_us(from.at_ns + shift)}});
        events.push_back({{"ph", "f"}, {"bp", "e"}, {"id", id}, {"name", "gradient ready"}, {"cat", "flow"},
                          {"pid", device_pid}, {"tid", trace_thread_id(span.track)},
                          {"ts", whole_us(span.begin_ns + shift)}});
      }
    }
  }

  // Written by hand around the events: HTA's folder reader finds a file's rank with the pattern
  // `"rank":\s+(\d+)` on its first line that has one, so distributedInfo comes first, spaced.
  std::string text = "{\"schemaVersion\": 1,\n\"distributedInfo\": {\"rank\": " + std::to_string(rank.rank) +
                     ", \"world_size\": " + std::to_string(rank.world_size) + "},\n\"displayTimeUnit\": \"ms\",\n" +
                     "\"otherData\": " + metadata.dump() + ",\n\"traceEvents\": [";
  for (size_t i = 0; i < events.size(); ++i) text += (i == 0 ? "\n" : ",\n") + events[i].dump();
  text += "\n]}\n";
  return text;
}

}  // namespace dpbench
