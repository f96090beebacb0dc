// Result <-> JSON (DESIGN section 6; the schema's version in result.h) and crash-safe result files.
#include "reports/result_json.h"

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "engine/errors.h"
#include "engine/machine/text_content.h"
#include "reports/text_file.h"

namespace dpbench {
namespace {

using nlohmann::json;

// ---- writing ----------------------------------------------------------------------------------

json distribution_to_json(const std::optional<DistributionStats>& stats) {
  if (!stats) return nullptr;
  return {{"count", stats->count}, {"mean", stats->mean},     {"median", stats->median},
          {"stddev", stats->stddev}, {"min", stats->min},     {"max", stats->max},
          {"p5", stats->p5},         {"p95", stats->p95}};
}

json summary_to_json(const Summary& summary) {
  json object = {{"items_per_sec", summary.items_per_sec},
                  {"unit", summary.unit},
                  {"total_time_s", summary.total_time_s},
                  {"measured_steps", summary.measured_steps},
                  {"warmup_steps", summary.warmup_steps},
                  {"interrupted", summary.interrupted},
                  {"num_devices", summary.num_devices},
                  {"global_batch_size", summary.global_batch_size},
                  {"items_per_step", summary.items_per_step},
                  {"step_time_ms", distribution_to_json(summary.step_time_ms)},
                  {"items_per_sec_per_step", distribution_to_json(summary.items_per_sec_per_step)},
                  {"jitter", summary.jitter ? json(*summary.jitter) : json(nullptr)},
                  {"final_loss", summary.final_loss},
                  {"num_parameters", summary.num_parameters},
                  {"param_norm", summary.param_norm},
                  {"comm", summary.comm},
                  {"cuda_graph", summary.cuda_graph},
                  {"kernel_launches_per_step", summary.kernel_launches_per_step
                                                   ? json(*summary.kernel_launches_per_step)
                                                   : json(nullptr)},
                  {"math", summary.math},
                  {"loss_scaling", summary.loss_scaling},
                  {"final_loss_scale", summary.final_loss_scale},
                  {"math_paths", summary.math_paths},
                  {"data", summary.data},
                  {"gpu_telemetry", summary.gpu_telemetry},
                  {"breakdown", summary.breakdown},
                  {"flops", summary.flops},
                  {"memory", summary.memory}};
  // Only runs with --trace_file have it (reports/backward_timeline.h).
  if (!summary.timeline.empty()) object["timeline"] = summary.timeline;
  if (!summary.reference.empty()) object["reference"] = summary.reference;
  return object;
}

// ---- reading ----------------------------------------------------------------------------------
// Each accessor takes the dotted path of the key so that an error names exactly what is wrong.

[[noreturn]] void reject(const std::string& what) {
  throw RuntimeError("not a dpbench result: " + what);
}

std::string join(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

const json& member(const json& object, const std::string& where, const char* key) {
  auto found = object.find(key);
  if (found == object.end()) reject("missing key '" + join(where, key) + "'");
  return *found;
}

void expect(bool ok, const json& value, const std::string& path, const char* expected) {
  if (!ok) {
    reject("'" + path + "' is " + std::string(value.type_name()) + ", expected " + expected);
  }
}

const json& object_member(const json& object, const std::string& where, const char* key) {
  const json& value = member(object, where, key);
  expect(value.is_object(), value, join(where, key), "an object");
  return value;
}

// The environment's CUDA library fields under their JSON keys: written only when set, read when
// present (a reference-backend run records none).
template <typename Environment>
auto cuda_library_fields(Environment& environment) {
  return std::vector<std::pair<const char*, decltype(&environment.cudnn)>>{
      {"cuda", &environment.cuda_runtime}, {"cuda_driver", &environment.cuda_driver},
      {"driver", &environment.driver},     {"cudnn", &environment.cudnn},
      {"nccl", &environment.nccl},         {"cublas", &environment.cublas}};
}

std::string string_member(const json& object, const std::string& where, const char* key) {
  const json& value = member(object, where, key);
  expect(value.is_string(), value, join(where, key), "a string");
  return value.get<std::string>();
}

int64_t integer_member(const json& object, const std::string& where, const char* key) {
  const json& value = member(object, where, key);
  expect(value.is_number_integer(), value, join(where, key), "an integer");
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    reject("'" + join(where, key) + "' is too large");
  }
  return value.get<int64_t>();
}

uint64_t unsigned_member(const json& object, const std::string& where, const char* key) {
  const json& value = member(object, where, key);
  expect(value.is_number_unsigned(), value, join(where, key), "a non-negative integer");
  return value.get<uint64_t>();
}

// null is how a non-finite double was written (JSON has no NaN), so it reads back as NaN.
double double_member(const json& object, const std::string& where, const char* key) {
  const json& value = member(object, where, key);
  if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();
  expect(value.is_number(), value, join(where, key), "a number or null");
  return value.get<double>();
}

bool bool_member(const json& object, const std::string& where, const char* key) {
  const json& value = member(object, where, key);
  expect(value.is_boolean(), value, join(where, key), "a boolean");
  return value.get<bool>();
}

std::optional<DistributionStats> distribution_member(const json& object, const std::string& where,
                                                     const char* key) {
  const json& value = member(object, where, key);
  if (value.is_null()) return std::nullopt;
  const std::string path = join(where, key);
  expect(value.is_object(), value, path, "an object or null");
  DistributionStats stats;
  stats.count = integer_member(value, path, "count");
  stats.mean = double_member(value, path, "mean");
  stats.median = double_member(value, path, "median");
  stats.stddev = double_member(value, path, "stddev");
  stats.min = double_member(value, path, "min");
  stats.max = double_member(value, path, "max");
  stats.p5 = double_member(value, path, "p5");
  stats.p95 = double_member(value, path, "p95");
  return stats;
}

EnvironmentRecord environment_from_json(const json& document) {
  const std::string where = "environment";
  const json& object = object_member(document, "", "environment");
  EnvironmentRecord environment;
  environment.hostname = string_member(object, where, "hostname");
  environment.date = string_member(object, where, "date");
  environment.backend = string_member(object, where, "backend");
  if (object.contains("launcher")) environment.launcher = string_member(object, where, "launcher");
  if (object.contains("cpu_model")) environment.cpu_model = string_member(object, where, "cpu_model");
  for (const char* key : {"ranks_per_host", "variables"}) {
    if (!object.contains(key)) continue;
    const json& map = object[key];
    expect(map.is_object(), map, join(where, key), "an object");
    for (const auto& [name, value] : map.items()) {
      if (std::string(key) == "ranks_per_host") {
        expect(value.is_number_integer(), value, join(where, key) + "." + name, "an integer");
        environment.ranks_per_host[name] = value.get<int>();
      } else {
        expect(value.is_string(), value, join(where, key) + "." + name, "a string");
        environment.variables[name] = value.get<std::string>();
      }
    }
  }
  const json& devices = member(object, where, "devices");
  expect(devices.is_array(), devices, "environment.devices", "an array");
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string path = "environment.devices[" + std::to_string(i) + "]";
    expect(devices[i].is_object(), devices[i], path, "an object");
    DeviceRecord device;
    const int64_t index = integer_member(devices[i], path, "index");
    if (index < std::numeric_limits<int>::min() || index > std::numeric_limits<int>::max()) {
      reject("'" + path + ".index' is out of range");
    }
    device.index = static_cast<int>(index);
    device.name = string_member(devices[i], path, "name");
    device.memory_bytes = unsigned_member(devices[i], path, "memory_bytes");
    device.compute_capability = string_member(devices[i], path, "compute_capability");
    if (devices[i].contains("pci_bus_id")) device.pci_bus_id = string_member(devices[i], path, "pci_bus_id");
    environment.devices.push_back(std::move(device));
  }
  for (const auto& [key, version] : cuda_library_fields(environment))
    if (object.contains(key)) *version = string_member(object, where, key);
  return environment;
}

Summary summary_from_json(const json& document) {
  const std::string where = "summary";
  const json& object = object_member(document, "", "summary");
  Summary summary;
  summary.items_per_sec = double_member(object, where, "items_per_sec");
  summary.unit = string_member(object, where, "unit");
  summary.total_time_s = double_member(object, where, "total_time_s");
  summary.measured_steps = integer_member(object, where, "measured_steps");
  summary.warmup_steps = integer_member(object, where, "warmup_steps");
  // Added later: older results were never interrupted (a stopped run wrote nothing).
  summary.interrupted = object.contains("interrupted") && bool_member(object, where, "interrupted");
  summary.num_devices = integer_member(object, where, "num_devices");
  summary.global_batch_size = integer_member(object, where, "global_batch_size");
  summary.items_per_step = integer_member(object, where, "items_per_step");
  summary.step_time_ms = distribution_member(object, where, "step_time_ms");
  summary.items_per_sec_per_step = distribution_member(object, where, "items_per_sec_per_step");
  const json& jitter = member(object, where, "jitter");
  if (!jitter.is_null()) {
    expect(jitter.is_number(), jitter, "summary.jitter", "a number or null");
    summary.jitter = jitter.get<double>();
  }
  summary.final_loss = double_member(object, where, "final_loss");
  summary.num_parameters = integer_member(object, where, "num_parameters");
  summary.param_norm = double_member(object, where, "param_norm");
  summary.comm = object_member(object, where, "comm");
  // Added after the first results were written: absent means no graphs were used.
  summary.cuda_graph = object.contains("cuda_graph") && bool_member(object, where, "cuda_graph");
  if (object.contains("kernel_launches_per_step") && !object["kernel_launches_per_step"].is_null())
    summary.kernel_launches_per_step = integer_member(object, where, "kernel_launches_per_step");
  if (object.contains("math")) summary.math = string_member(object, where, "math");
  if (object.contains("loss_scaling")) summary.loss_scaling = string_member(object, where, "loss_scaling");
  if (object.contains("final_loss_scale"))
    summary.final_loss_scale = double_member(object, where, "final_loss_scale");
  if (object.contains("data")) summary.data = object_member(object, where, "data");
  // Added later: older results do not say which kernels ran.
  if (object.contains("math_paths")) summary.math_paths = object_member(object, where, "math_paths");
  // Added later too: older results have no telemetry.
  if (object.contains("gpu_telemetry")) summary.gpu_telemetry = object_member(object, where, "gpu_telemetry");
  if (object.contains("flops")) summary.flops = object_member(object, where, "flops");
  if (object.contains("breakdown")) summary.breakdown = object_member(object, where, "breakdown");
  // Schema 3 on: older results have no memory accounting.
  if (object.contains("memory")) summary.memory = object_member(object, where, "memory");
  if (object.contains("timeline")) summary.timeline = object_member(object, where, "timeline");
  if (object.contains("reference")) summary.reference = object_member(object, where, "reference");
  return summary;
}

std::vector<StepRecord> steps_from_json(const json& document) {
  const json& steps = member(document, "", "steps");
  expect(steps.is_array(), steps, "steps", "an array");
  std::vector<StepRecord> records;
  records.reserve(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string path = "steps[" + std::to_string(i) + "]";
    expect(steps[i].is_object(), steps[i], path, "an object");
    StepRecord record;
    record.step = integer_member(steps[i], path, "step");
    record.time_ms = double_member(steps[i], path, "time_ms");
    record.loss = double_member(steps[i], path, "loss");
    record.warmup = bool_member(steps[i], path, "warmup");
    if (steps[i].contains("after_measurement"))
      record.after_measurement = bool_member(steps[i], path, "after_measurement");
    if (steps[i].contains("data_wait_ms")) record.data_wait_ms = double_member(steps[i], path, "data_wait_ms");
    if (steps[i].contains("items")) record.items = integer_member(steps[i], path, "items");
    records.push_back(record);
  }
  return records;
}

}  // namespace

nlohmann::json environment_to_json(const EnvironmentRecord& environment) {
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceRecord& device : environment.devices) {
    devices.push_back({{"index", device.index},
                       {"name", device.name},
                       {"memory_bytes", device.memory_bytes},
                       {"compute_capability", device.compute_capability},
                       {"pci_bus_id", device.pci_bus_id}});
  }
  json object = {{"hostname", environment.hostname},
                 {"date", environment.date},
                 {"backend", environment.backend},
                 {"launcher", environment.launcher},
                 {"cpu_model", environment.cpu_model},
                 {"variables", environment.variables},
                 {"devices", std::move(devices)}};
  if (!environment.ranks_per_host.empty()) object["ranks_per_host"] = environment.ranks_per_host;
  // The CUDA libraries only where a run used them (none on the reference backend).
  for (const auto& [key, version] : cuda_library_fields(environment))
    if (!version->empty()) object[key] = *version;
  return object;
}

json result_to_json(const Result& result) {
  json steps = json::array();
  for (const StepRecord& step : result.steps) {
    json record = {{"step", step.step}, {"time_ms", step.time_ms}, {"loss", step.loss}, {"warmup", step.warmup}};
    if (step.after_measurement) record["after_measurement"] = true;
    if (step.data_wait_ms) record["data_wait_ms"] = *step.data_wait_ms;
    if (step.items) record["items"] = *step.items;
    steps.push_back(std::move(record));
  }
  json document = {{"schema_version", result.schema_version},
                   {"tool", {{"version", result.tool_version}, {"git_sha", result.git_sha}}},
                   {"environment", environment_to_json(result.environment)},
                   {"config", result.config},
                   {"summary", summary_to_json(result.summary)},
                   {"steps", std::move(steps)}};
  if (!result.invocation.empty()) document["invocation"] = result.invocation;
  return document;
}

Result result_from_json(const json& document) {
  if (!document.is_object()) {
    reject("expected a JSON object, got " + std::string(document.type_name()));
  }
  // The identifying keys first, so a foreign document gets one plain message, not a type error.
  for (const char* key : {"schema_version", "summary", "steps"}) member(document, "", key);
  const json& version = document.at("schema_version");
  expect(version.is_number_integer(), version, "schema_version", "an integer");
  if (version.get<int64_t>() < kOldestReadableSchemaVersion || version.get<int64_t>() > kResultSchemaVersion) {
    throw RuntimeError("result schema_version " + version.dump() + " is not supported (this dpbench reads " +
                       readable_schema_versions() + ")");
  }

  Result result;
  result.schema_version = kResultSchemaVersion;
  const json& tool = object_member(document, "", "tool");
  result.tool_version = string_member(tool, "tool", "version");
  result.git_sha = string_member(tool, "tool", "git_sha");
  result.environment = environment_from_json(document);
  result.config = object_member(document, "", "config");
  result.summary = summary_from_json(document);
  result.steps = steps_from_json(document);
  if (document.contains("invocation") && document["invocation"].is_object()) result.invocation = document["invocation"];
  return result;
}

void write_result_atomically(const Result& result, const std::string& path) {
  // error_handler_t::replace: a hostname or device name with invalid UTF-8 must not lose the run.
  write_text_atomically(path, result_to_json(result).dump(2, ' ', false, json::error_handler_t::replace) + "\n",
                        "result file");
}

std::string parse_json_text(const std::string& text, json* document, std::string* detail) {
  try {
    *document = json::parse(text);
    return "";
  } catch (const json::parse_error& error) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." without the prefix.
    const std::string what = error.what();
    const size_t at = what.find(" at line ");
    if (detail != nullptr) *detail = escaped_value(at == std::string::npos ? what : what.substr(at + 4));
    return "not JSON";
  } catch (const json::out_of_range& error) {
    // "[json.exception.out_of_range.406] number overflow parsing '1e400'"
    const std::string what = error.what();
    const size_t open = what.find('\''), close = what.rfind('\'');
    const std::string number = open != std::string::npos && close > open ? what.substr(open + 1, close - open - 1) : "";
    if (detail != nullptr) detail->clear();
    return "holds the number " + escaped_value(number, kQuotedExcerptBytes) +
           ", beyond the range of a double (no file dpbench writes)";
  }
}

Result read_result_file(const std::string& path) {
  const std::string text = read_text_file(path, "result file");
  json document;
  std::string detail;
  const std::string why_not = parse_json_text(text, &document, &detail);
  if (why_not == "not JSON") throw RuntimeError("result file '" + path + "' is not valid JSON: " + detail);
  if (!why_not.empty()) throw RuntimeError("result file '" + path + "' " + why_not);
  try {
    return result_from_json(document);
  } catch (const RuntimeError& error) {
    throw RuntimeError("result file '" + path + "': " + error.what());
  }
}

}  // namespace dpbench
