// System files (see system_description.h).
#include "reports/system_description.h"

#include <functional>
#include <vector>

#include "engine/errors.h"
#include "engine/machine/text_content.h"
#include "reports/result_json.h"
#include "reports/text_file.h"

namespace dpbench {
namespace {

using json = nlohmann::json;

// A sourced field: {"value": ..., "source": "URL or measured: where"}; `apply` stores the value.
struct SourcedField {
  const char* name;
  const char* accepted;  // what its value may be, for the error line
  std::function<bool(const json& value, SystemModel& model)> apply;  // false: not accepted
  bool optional = false;  // absent: the model's default
};

bool positive_number(const json& value, double& into) {
  if (!value.is_number() || !(value.get<double>() > 0)) return false;
  into = value.get<double>();
  return true;
}

bool non_negative_number(const json& value, double& into) {
  if (!value.is_number() || value.get<double>() < 0) return false;
  into = value.get<double>();
  return true;
}

const std::vector<SourcedField>& sourced_fields() {
  static const std::vector<SourcedField> fields = {
      {"gpus_per_host", "a whole number >= 1",
       [](const json& v, SystemModel& m) {
         if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1 << 20) return false;
         m.gpus_per_host = v.get<int>();
         return true;
       }},
      {"intra_host_bandwidth_GBps", "GB/s (1e9 bytes) per GPU and direction, > 0",
       [](const json& v, SystemModel& m) { return positive_number(v, m.intra_host.bandwidth_gb_per_s); }},
      {"intra_host_latency_us", "microseconds per algorithm step, >= 0",
       [](const json& v, SystemModel& m) { return non_negative_number(v, m.intra_host.latency_us); }},
      {"inter_host_bandwidth_GBps", "GB/s per host (all its network adapters) and direction, > 0",
       [](const json& v, SystemModel& m) { return positive_number(v, m.inter_host.bandwidth_gb_per_s); }},
      {"inter_host_latency_us", "microseconds per algorithm step, >= 0",
       [](const json& v, SystemModel& m) { return non_negative_number(v, m.inter_host.latency_us); }},
      {"host_copy_bandwidth_GBps", "GB/s per GPU between its memory and the host's, > 0",
       [](const json& v, SystemModel& m) { return positive_number(v, m.host_copy.bandwidth_gb_per_s); }},
      {"host_copy_latency_us", "microseconds per copy, >= 0",
       [](const json& v, SystemModel& m) { return non_negative_number(v, m.host_copy.latency_us); }},
      {"algorithm", "\"ring\" or \"tree\"",
       [](const json& v, SystemModel& m) {
         if (v == "ring") m.algorithm = CollectiveAlgorithm::ring;
         else if (v == "tree") m.algorithm = CollectiveAlgorithm::tree;
         else return false;
         return true;
       }},
      {"communication_overlaps_compute", "true or false",
       [](const json& v, SystemModel& m) {
         if (!v.is_boolean()) return false;
         m.communication_overlaps_compute = v.get<bool>();
         return true;
       }},
      {"compute_slowdown_beside_communication", "a fraction >= 0 and < 5 (0.08: compute 8% slower beside a transfer)",
       [](const json& v, SystemModel& m) {
         if (!v.is_number() || !(v.get<double>() >= 0) || !(v.get<double>() < 5)) return false;
         m.compute_slowdown_beside_communication = v.get<double>();
         return true;
       },
       true},
  };
  return fields;
}

std::string accepted_names() {
  std::string names = "name, description";
  for (const SourcedField& field : sourced_fields()) names += std::string(", ") + field.name;
  return names;
}

}  // namespace

SystemDescription parse_system_description(const json& document, const std::string& path) {
  const std::string where = "system file '" + path + "'";
  // Escaped whole: the line may quote the file (an unknown field's name).
  auto fail = [&](const std::string& why) -> void {
    throw RuntimeError(escaped_value(where + ": " + why + " (systems/README.md)"));
  };
  if (!document.is_object()) fail("not a JSON object");
  SystemDescription system;
  for (const auto& [key, value] : document.items()) {
    if (key == "name" || key == "description") {
      if (!value.is_string()) fail("'" + key + "' is not a string");
      (key == "name" ? system.model.name : system.description) = value.get<std::string>();
      continue;
    }
    const SourcedField* field = nullptr;
    for (const SourcedField& candidate : sourced_fields())
      if (key == candidate.name) field = &candidate;
    if (field == nullptr) fail("unknown field '" + key + "'; accepted: " + accepted_names());
    if (!value.is_object() || !value.contains("value") || !value.contains("source") || value.size() != 2 ||
        !value.at("source").is_string() || value.at("source").get<std::string>().empty())
      fail("'" + key + "' must be {\"value\": ..., \"source\": \"where the value comes from\"}");
    if (!field->apply(value.at("value"), system.model))
      fail("'" + key + "': value " + value.at("value").dump() + " not accepted; accepted: " + field->accepted);
    system.sources[key] = value.at("source").get<std::string>();
  }
  if (system.model.name.empty()) fail("missing 'name'");
  for (const SourcedField& field : sourced_fields())
    if (!field.optional && system.sources.count(field.name) == 0) fail(std::string("missing '") + field.name + "'");
  return system;
}

SystemDescription load_system_description(const std::string& path) {
  const std::string text = read_text_file(path, "system file");
  json document;
  std::string detail;
  const std::string why_not = parse_json_text(text, &document, &detail);
  if (!why_not.empty())
    throw RuntimeError(
        escaped_value("system file '" + path + "': " + why_not + (detail.empty() ? "" : " (" + detail + ")")));
  return parse_system_description(document, path);
}

}  // namespace dpbench
