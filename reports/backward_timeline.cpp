// summary.timeline (see backward_timeline.h).
#include "reports/backward_timeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "engine/errors.h"
#include "engine/machine/text_content.h"
#include "reports/report_loader.h"

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
  throw RuntimeError("summary.timeline." + key + " " + why);
}

const json& field(const json& object, const std::string& key, const std::string& where = "") {
  if (!object.contains(key)) reject(where + key, "is missing");
  return object.at(key);
}

// A number as JSON writes it, quoted short and escaped (a file may hold anything).
std::string shown(const json& value) { return escaped_value(value.dump(), kQuotedExcerptBytes); }

// A whole number from `low` to `high` (a count: as JSON writes one, no fraction).
int64_t count_field(const json& object, const std::string& key, const std::string& where, int64_t low, int64_t high) {
  const json& value = field(object, key, where);
  const bool whole = value.is_number_integer() && !(value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(high));
  if (!whole || value.get<int64_t>() < low || value.get<int64_t>() > high)
    reject(where + key, "is " + shown(value) + ", impossible for a run (expected a whole number from " +
                            std::to_string(low) + " to " + std::to_string(high) + ")");
  return value.get<int64_t>();
}

// Milliseconds: a finite number from 0 to `high` (above 0 where `positive`).
double ms_field(const json& object, const std::string& key, const std::string& where, double high, bool positive) {
  const json& value = field(object, key, where);
  const double ms = value.is_number() ? value.get<double>() : std::nan("");
  if (!std::isfinite(ms) || (positive ? !(ms > 0) : ms < 0) || ms > high)
    reject(where + key, "is " + shown(value) + ", impossible for a run (expected " + (positive ? "> 0" : ">= 0") +
                            " and <= " + fmt::format("{:g}", high) + " ms)");
  return ms;
}

// Note [timeline consistency]
// The step's parts are spans inside its span (forward, then backward, then what follows it), and
// each range is announced during backward, so a timeline a run wrote has forward + backward +
// after_backward <= step and every ready time <= the step. Each is a mean over the same steps, and
// the spans are rounded to ns, so a small excess is allowed; a part far longer than the step
// comes from an edited file, and a prediction from it would be nonsense.
bool within_step(double ms, double step_ms) { return ms <= step_ms * 1.01 + 1e-3; }

// Every tensor's size, their total elements and bytes within kMaxGradientBytes.
std::vector<int64_t> tensor_elements_of(const json& object, int64_t element_bytes) {
  const json& tensors = field(object, "tensor_elements");
  if (!tensors.is_array() || tensors.empty()) reject("tensor_elements", "is not a non-empty array of tensor sizes");
  const int64_t max_elements = kMaxGradientBytes / element_bytes;
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string key = "tensor_elements[" + std::to_string(i) + "]";
    const json& count = tensors[i];
    if (!count.is_number_integer() || count.get<int64_t>() < 1 ||
        (count.is_number_unsigned() && count.get<uint64_t>() > uint64_t(max_elements)))
      reject(key, "is " + shown(count) + ", not a tensor size (a whole number >= 1)");
    sizes.push_back(count.get<int64_t>());
    if (sizes.back() > max_elements - total)  // checked before the sum, which could overflow
      reject("tensor_elements", "add up to more than " + std::to_string(max_elements) + " elements of " +
                                    std::to_string(element_bytes) + " bytes (1 PiB), impossible for a run");
    total += sizes.back();
  }
  return sizes;
}

// summary.timeline.units and unit_uses (optional: a result of an older dpbench has neither):
// each unit a range of the gradient buffer, each use one of those units in a pass.
ParameterUnits units_of(const json& object, int64_t max_elements) {
  ParameterUnits units;
  const json& listed = field(object, "units");
  if (!listed.is_array() || listed.empty()) reject("units", "is not a non-empty array");
  for (size_t i = 0; i < listed.size(); ++i) {
    const std::string where = "units[" + std::to_string(i) + "].";
    if (!listed[i].is_object()) reject("units[" + std::to_string(i) + "]", "is not an object");
    ParameterUnit unit;
    if (listed[i].contains("name") && listed[i]["name"].is_string()) unit.name = listed[i]["name"].get<std::string>();
    unit.range.offset = static_cast<size_t>(count_field(listed[i], "offset", where, 0, max_elements));
    unit.range.count = static_cast<size_t>(count_field(listed[i], "count", where, 1, max_elements));
    // Optional (a result of an older dpbench has none): 0, not counted.
    if (listed[i].contains("vector_elements"))
      unit.vector_elements =
          static_cast<size_t>(count_field(listed[i], "vector_elements", where, 0, static_cast<int64_t>(unit.range.count)));
    units.units.push_back(unit);
  }
  const json& uses = field(object, "unit_uses");
  if (!uses.is_array() || uses.empty()) reject("unit_uses", "is not a non-empty array");
  for (size_t i = 0; i < uses.size(); ++i) {
    const std::string where = "unit_uses[" + std::to_string(i) + "].";
    if (!uses[i].is_object()) reject("unit_uses[" + std::to_string(i) + "]", "is not an object");
    UnitUse use;
    use.unit = static_cast<int>(count_field(uses[i], "unit", where, 0, static_cast<int64_t>(listed.size()) - 1));
    const json& pass = field(uses[i], "pass", where);
    if (pass != "forward" && pass != "backward") reject(where + "pass", "is " + shown(pass) + ", not forward or backward");
    use.pass = pass == "forward" ? UnitPass::forward : UnitPass::backward;
    const json& writes = field(uses[i], "writes_gradients", where);
    if (!writes.is_boolean()) reject(where + "writes_gradients", "is " + shown(writes) + ", not true or false");
    use.writes_gradients = writes.get<bool>();
    units.uses.push_back(use);
  }
  return units;
}

}  // namespace

int64_t BackwardTimeline::total_elements() const {
  int64_t total = 0;
  for (int64_t count : tensor_elements) total += count;
  return total;
}

std::optional<BackwardTimeline> summarize_backward_timeline(const DeviceTimeline& timeline,
                                                            std::vector<int64_t> tensor_elements,
                                                            ParameterUnits units) {
  BackwardTimeline summary;
  summary.tensor_elements = std::move(tensor_elements);
  summary.units = std::move(units);
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
  json object = {{"source", "device 0's measured traced steps (--trace_file), device timestamps"},
          {"traced_steps", timeline.traced_steps},
          {"step_ms", timeline.step_ms},
          {"forward_ms", timeline.forward_ms},
          {"backward_ms", timeline.backward_ms},
          {"after_backward_ms", timeline.after_backward_ms},
          {"gradient_element_bytes", timeline.gradient_element_bytes},
          {"tensor_elements", timeline.tensor_elements},
          {"produced", produced}};
  if (!timeline.units.empty()) {
    json units = json::array(), uses = json::array();
    for (const ParameterUnit& unit : timeline.units.units)
      units.push_back({{"name", unit.name},
                       {"offset", unit.range.offset},
                       {"count", unit.range.count},
                       {"vector_elements", unit.vector_elements}});
    for (const UnitUse& use : timeline.units.uses)
      uses.push_back({{"unit", use.unit},
                      {"pass", use.pass == UnitPass::forward ? "forward" : "backward"},
                      {"writes_gradients", use.writes_gradients}});
    object["units"] = units;
    object["unit_uses"] = uses;
  }
  return object;
}

BackwardTimeline backward_timeline_from_json(const json& object) {
  if (!object.is_object()) throw RuntimeError("summary.timeline: not an object");
  BackwardTimeline timeline;
  timeline.traced_steps = count_field(object, "traced_steps", "", 1, std::numeric_limits<int32_t>::max());
  timeline.step_ms = ms_field(object, "step_ms", "", kMaxStepMs, true);
  timeline.forward_ms = ms_field(object, "forward_ms", "", kMaxStepMs, false);
  timeline.backward_ms = ms_field(object, "backward_ms", "", kMaxStepMs, true);
  timeline.after_backward_ms = ms_field(object, "after_backward_ms", "", kMaxStepMs, false);
  const double parts_ms = timeline.forward_ms + timeline.backward_ms + timeline.after_backward_ms;
  if (!within_step(parts_ms, timeline.step_ms))  // Note [timeline consistency]
    reject("step_ms", fmt::format("is {:g} ms, shorter than its parts (forward {:g} + backward {:g} + after backward "
                                  "{:g} ms), impossible for a run", timeline.step_ms, timeline.forward_ms,
                                  timeline.backward_ms, timeline.after_backward_ms));
  // The widest element a gradient has (fp64); they are fp32 today, whatever the precision.
  timeline.gradient_element_bytes = count_field(object, "gradient_element_bytes", "", 1, 8);
  timeline.tensor_elements = tensor_elements_of(object, timeline.gradient_element_bytes);
  // Offsets count the gradient buffer's elements, the gaps that align each tensor included: the
  // caller, who lays the tensors out, checks that each range lies within them.
  const int64_t max_elements = kMaxGradientBytes / timeline.gradient_element_bytes;
  const json& produced = field(object, "produced");
  if (!produced.is_array() || produced.empty()) reject("produced", "is not a non-empty array");
  for (size_t i = 0; i < produced.size(); ++i) {
    const std::string where = "produced[" + std::to_string(i) + "].";
    if (!produced[i].is_object()) reject("produced[" + std::to_string(i) + "]", "is not an object");
    ProducedRange range;
    range.offset = count_field(produced[i], "offset", where, 0, max_elements);
    range.count = count_field(produced[i], "count", where, 1, max_elements);
    range.ready_ms = ms_field(produced[i], "ready_ms", where, kMaxStepMs, false);
    if (!within_step(range.ready_ms, timeline.step_ms))
      reject(where + "ready_ms", fmt::format("is {:g} ms, after the step's end ({:g} ms), impossible for a run",
                                             range.ready_ms, timeline.step_ms));
    timeline.produced.push_back(range);
  }
  if (object.contains("units")) timeline.units = units_of(object, max_elements);
  return timeline;
}

double ready_ms_of(const BackwardTimeline& timeline, int64_t offset, int64_t count) {
  double ready = 0;
  for (const ProducedRange& range : timeline.produced)
    if (range.offset < offset + count && offset < range.offset + range.count) ready = std::max(ready, range.ready_ms);
  return ready;
}

}  // namespace dpbench
