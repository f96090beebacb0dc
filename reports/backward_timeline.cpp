// summary.timeline (see backward_timeline.h).
#include "reports/backward_timeline.h"

#include <algorithm>
#include <string>

#include "engine/errors.h"

namespace dpbench {
namespace {

using json = nlohmann::json;

double ms_between(int64_t from_ns, int64_t to_ns) { return static_cast<double>(to_ns - from_ns) / 1e6; }

const TimelineSpan* find_span(const TracedStep& step, const std::string& name, const std::string& category) {
  for (const TimelineSpan& span : step.spans)
    if (span.category == category && (name.empty() || span.name == name)) return &span;
  return nullptr;
}

// One traced step's parts, or none where it lacks one (a truncated or forward-only step).
struct StepParts {
  double step_ms = 0, forward_ms = 0, backward_ms = 0, after_backward_ms = 0;
  std::vector<ProducedRange> produced;
};

std::optional<StepParts> parts_of(const TracedStep& step) {
  const TimelineSpan* whole = find_span(step, "", "step");
  const TimelineSpan* forward = find_span(step, "forward", "forward");
  const TimelineSpan* backward = find_span(step, "backward", "backward");
  if (whole == nullptr || forward == nullptr || backward == nullptr || step.truncated) return std::nullopt;
  StepParts parts;
  parts.step_ms = ms_between(whole->begin_ns, whole->end_ns);
  parts.forward_ms = ms_between(forward->begin_ns, forward->end_ns);
  parts.backward_ms = ms_between(backward->begin_ns, backward->end_ns);
  parts.after_backward_ms = ms_between(backward->end_ns, whole->end_ns);
  for (const TimelineInstant& instant : step.instants)
    if (instant.name == kGradientsProducedInstant)
      parts.produced.push_back({instant.args.at("offset").get<int64_t>(), instant.args.at("count").get<int64_t>(),
                                ms_between(backward->begin_ns, instant.at_ns)});
  return parts;
}

[[noreturn]] void reject(const std::string& key, const std::string& why) {
  throw RuntimeError("summary.timeline." + key + ": " + why);
}

const json& field(const json& object, const std::string& key) {
  if (!object.contains(key)) reject(key, "missing");
  return object.at(key);
}

double number_field(const json& object, const std::string& key, const std::string& where) {
  const json& value = field(object, key);
  if (!value.is_number() || value.get<double>() < 0) reject(where + key, "not a number >= 0");
  return value.get<double>();
}

}  // namespace

std::optional<BackwardTimeline> summarize_backward_timeline(const DeviceTimeline& timeline,
                                                            std::vector<int64_t> tensor_elements) {
  BackwardTimeline summary;
  summary.tensor_elements = std::move(tensor_elements);
  for (const TracedStep& step : timeline.steps) {
    if (!step.measured || !step.ran) continue;
    const std::optional<StepParts> parts = parts_of(step);
    if (!parts) continue;
    // Every step announces the same ranges in the same order; a step that did not is left out.
    if (summary.traced_steps == 0) {
      summary.produced = parts->produced;
      for (ProducedRange& range : summary.produced) range.ready_ms = 0;
    } else if (parts->produced.size() != summary.produced.size()) {
      continue;
    }
    summary.step_ms += parts->step_ms;
    summary.forward_ms += parts->forward_ms;
    summary.backward_ms += parts->backward_ms;
    summary.after_backward_ms += parts->after_backward_ms;
    for (size_t i = 0; i < summary.produced.size(); ++i) summary.produced[i].ready_ms += parts->produced[i].ready_ms;
    ++summary.traced_steps;
  }
  if (summary.traced_steps == 0) return std::nullopt;
  const double steps = static_cast<double>(summary.traced_steps);
  for (double* mean : {&summary.step_ms, &summary.forward_ms, &summary.backward_ms, &summary.after_backward_ms})
    *mean /= steps;
  for (ProducedRange& range : summary.produced) range.ready_ms /= steps;
  return summary;
}

json backward_timeline_to_json(const BackwardTimeline& timeline) {
  json produced = json::array();
  for (const ProducedRange& range : timeline.produced)
    produced.push_back({{"offset", range.offset}, {"count", range.count}, {"ready_ms", range.ready_ms}});
  return {{"source", "device 0's measured traced steps (--trace_file), device timestamps"},
          {"traced_steps", timeline.traced_steps},
          {"step_ms", timeline.step_ms},
          {"forward_ms", timeline.forward_ms},
          {"backward_ms", timeline.backward_ms},
          {"after_backward_ms", timeline.after_backward_ms},
          {"gradient_element_bytes", timeline.gradient_element_bytes},
          {"tensor_elements", timeline.tensor_elements},
          {"produced", produced}};
}

BackwardTimeline backward_timeline_from_json(const json& object) {
  if (!object.is_object()) throw RuntimeError("summary.timeline: not an object");
  BackwardTimeline timeline;
  timeline.traced_steps = static_cast<int64_t>(number_field(object, "traced_steps", ""));
  timeline.step_ms = number_field(object, "step_ms", "");
  timeline.forward_ms = number_field(object, "forward_ms", "");
  timeline.backward_ms = number_field(object, "backward_ms", "");
  timeline.after_backward_ms = number_field(object, "after_backward_ms", "");
  timeline.gradient_element_bytes = static_cast<int64_t>(number_field(object, "gradient_element_bytes", ""));
  const json& tensors = field(object, "tensor_elements");
  if (!tensors.is_array()) reject("tensor_elements", "not an array");
  for (const json& count : tensors) {
    if (!count.is_number_integer() || count.get<int64_t>() < 0) reject("tensor_elements", "not counts >= 0");
    timeline.tensor_elements.push_back(count.get<int64_t>());
  }
  const json& produced = field(object, "produced");
  if (!produced.is_array() || produced.empty()) reject("produced", "not a non-empty array");
  for (const json& range : produced) {
    if (!range.is_object()) reject("produced", "an entry is not an object");
    timeline.produced.push_back({static_cast<int64_t>(number_field(range, "offset", "produced[].")),
                                 static_cast<int64_t>(number_field(range, "count", "produced[].")),
                                 number_field(range, "ready_ms", "produced[].")});
  }
  return timeline;
}

double ready_ms_of(const BackwardTimeline& timeline, int64_t offset, int64_t count) {
  double ready = 0;
  for (const ProducedRange& range : timeline.produced)
    if (range.offset < offset + count && offset < range.offset + range.count) ready = std::max(ready, range.ready_ms);
  return ready;
}

}  // namespace dpbench
