// Reading a --trace_file back (Chrome Trace Event JSON) and the checks every traced run must pass,
// shared by the host tests (reference backend) and the [gpu] suite (real CUDA runs).
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace dpbench::testing {

struct ReadSpan {
  int pid = 0, tid = 0;
  std::string name, category;
  double begin_us = 0, end_us = 0;
  int64_t run_step = -1;
  nlohmann::json args;
};

class TraceView {
 public:
  explicit TraceView(const nlohmann::json& document) {
    REQUIRE(document.contains("traceEvents"));
    for (const nlohmann::json& event : document["traceEvents"]) {
      const std::string phase = event.at("ph");
      const int pid = event.at("pid"), tid = event.at("tid");
      if (phase == "M" && event["name"] == "process_name") processes[pid] = event["args"]["name"];
      if (phase == "M" && event["name"] == "thread_name") threads[{pid, tid}] = event["args"]["name"];
      if (phase == "s") flow_starts.insert(event.at("id").get<int64_t>());
      if (phase == "f") flow_ends.insert(event.at("id").get<int64_t>());
      if (phase == "i") ++instants[event.at("name").get<std::string>()];
      if (phase != "X") continue;
      ReadSpan span;
      span.pid = pid;
      span.tid = tid;
      span.name = event.at("name");
      span.category = event.at("cat");
      span.begin_us = event.at("ts");
      span.end_us = span.begin_us + event.at("dur").get<double>();
      span.args = event.value("args", nlohmann::json::object());
      span.run_step = span.args.value("run_step", int64_t{-1});
      spans.push_back(std::move(span));
    }
  }

  // The thread of `pid` called `name`; -1 when it has none.
  int thread(int pid, const std::string& name) const {
    for (const auto& [key, value] : threads)
      if (key.first == pid && value == name) return key.second;
    return -1;
  }
  std::vector<const ReadSpan*> find(int pid, const std::string& category, int64_t run_step = -1) const {
    std::vector<const ReadSpan*> found;
    for (const ReadSpan& span : spans)
      if (span.pid == pid && span.category == category && (run_step < 0 || span.run_step == run_step))
        found.push_back(&span);
    return found;
  }
  std::set<int64_t> run_steps(int pid) const {
    std::set<int64_t> steps;
    for (const ReadSpan* span : find(pid, "step")) steps.insert(span->run_step);
    return steps;
  }

  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  std::vector<ReadSpan> spans;
  std::set<int64_t> flow_starts, flow_ends;
  std::map<std::string, int> instants;
};

inline bool overlaps(const ReadSpan& a, const ReadSpan& b) { return a.begin_us < b.end_us && b.begin_us < a.end_us; }

// What every trace of `devices` devices must show: a process per device with its host thread and
// compute stream (and communication stream when the strategy exchanges), every step's device
// spans inside the step's span, layer groups inside their pass, and, with `exchanges`, each
// step's first exchange on the communication stream while backward still runs (or after it, not
// `overlapped`), labelled with its
// bytes and collective, with an arrow from its "gradient ready" instant.
// `overlapped` false (--overlap_comm=false): the first exchange starts once backward has ended.
inline void check_trace(const TraceView& trace, int devices, bool exchanges, bool overlapped = true) {
  REQUIRE(trace.processes.size() == static_cast<size_t>(devices));
  // Clocks are aligned per device to a few microseconds; the nesting allows for that.
  const double tolerance_us = 20;
  for (const auto& [pid, name] : trace.processes) {
    INFO("device track " << name);
    const int compute = trace.thread(pid, "compute stream");
    const int communication = trace.thread(pid, "communication stream");
    CHECK(trace.thread(pid, "host: the device's thread") >= 0);
    REQUIRE(compute >= 0);
    CHECK((communication >= 0) == exchanges);
    const std::set<int64_t> steps = trace.run_steps(pid);
    REQUIRE(!steps.empty());
    for (int64_t run_step : steps) {
      INFO("run step " << run_step);
      const std::vector<const ReadSpan*> step = trace.find(pid, "step", run_step);
      REQUIRE(step.size() == 1);
      CHECK(step[0]->tid == compute);
      for (const ReadSpan& span : trace.spans) {
        if (span.pid != pid || span.run_step != run_step || (span.tid != compute && span.tid != communication)) continue;
        INFO(span.name << " [" << span.begin_us << ", " << span.end_us << "] in step [" << step[0]->begin_us << ", "
                       << step[0]->end_us << "]");
        CHECK(span.begin_us >= step[0]->begin_us - tolerance_us);
        CHECK(span.end_us <= step[0]->end_us + tolerance_us);
      }
      const ReadSpan* forward = nullptr;
      const ReadSpan* backward = nullptr;
      for (const ReadSpan* span : trace.find(pid, "forward", run_step))
        if (span->name == "forward") forward = span;
      for (const ReadSpan* span : trace.find(pid, "backward", run_step))
        if (span->name == "backward") backward = span;
      REQUIRE(forward != nullptr);
      REQUIRE(backward != nullptr);
      int groups = 0;
      for (const ReadSpan* span : trace.find(pid, "forward", run_step)) {
        if (span == forward) continue;
        ++groups;
        CHECK(span->begin_us >= forward->begin_us - tolerance_us);
        CHECK(span->end_us <= forward->end_us + tolerance_us);
      }
      CHECK(groups >= 2);  // the passes are split into layer groups
      if (!exchanges) continue;
      std::vector<const ReadSpan*> transfers;
      for (const ReadSpan* span : trace.find(pid, "communication", run_step))
        if (span->name.rfind("exchange ", 0) == 0) transfers.push_back(span);
      REQUIRE(!transfers.empty());
      for (const ReadSpan* transfer : transfers) {
        CHECK(transfer->tid == communication);
        CHECK(transfer->args.value("bytes", 0) > 0);
        CHECK(!transfer->args.value("exchange", std::string()).empty());
      }
      INFO("first exchange [" << transfers.front()->begin_us << ", " << transfers.front()->end_us << "], backward ["
                              << backward->begin_us << ", " << backward->end_us << "]");
      if (overlapped) {
        CHECK(overlaps(*transfers.front(), *backward));
      } else {
        CHECK(transfers.front()->begin_us >= backward->end_us - tolerance_us);
      }
      CHECK(!trace.find(pid, "exposed communication", run_step).empty());
    }
  }
  // The update shows: on the devices, or (parameter server on the host) on the host's threads.
  size_t updates = 0;
  for (const ReadSpan& span : trace.spans) updates += span.category == "optimizer" || span.category == "parameter server";
  CHECK(updates > 0);
  if (exchanges) {
    CHECK(!trace.flow_starts.empty());
    CHECK(trace.instants.count("gradient ready") == 1);
    CHECK(trace.instants.count("exchange done") == 1);
  }
  CHECK(trace.flow_starts == trace.flow_ends);
}

}  // namespace dpbench::testing
