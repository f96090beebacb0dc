// summary.memory and the console's "Memory:" line (see memory_summary.h).
#include "reports/memory_summary.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace dpbench {
namespace {

using nlohmann::json;

json categories_to_json(const CategoryBytes& bytes) {
  json object = json::object();
  for (const MemoryCategoryInfo& category : memory_categories())
    object[category.key] = bytes[static_cast<size_t>(category.category)];
  return object;
}

json device_to_json(const DeviceMemoryRecord& record) {
  const MemoryFigures& figures = record.figures;
  const uint64_t steady = total_bytes(figures.held);
  json device = {{"device", record.device_index},
                 {"peak_bytes", figures.peak_bytes},
                 {"at_peak", categories_to_json(figures.at_peak)},
                 {"step_peak_bytes", figures.window_peak_bytes},
                 {"at_step_peak", categories_to_json(figures.at_window_peak)},
                 {"steady_bytes", steady},
                 {"steady", categories_to_json(figures.held)},
                 {"pinned_host_peak_bytes", figures.pinned_host_peak_bytes},
                 {"pinned_host_steady", categories_to_json(figures.pinned_host_held)}};
  if (record.reported_used_bytes >= 0) {
    // Signed: another process may free memory between the two readings.
    const int64_t unaccounted = record.reported_used_bytes - static_cast<int64_t>(steady);
    device["device_reported_bytes"] = record.reported_used_bytes;
    device["unaccounted_bytes"] = unaccounted;
    if (record.reported_used_at_creation_bytes >= 0) {
      device["unaccounted"] = {{"context_bytes", record.reported_used_at_creation_bytes},
                               {"libraries_bytes", unaccounted - record.reported_used_at_creation_bytes}};
    }
    device["unaccounted_reason"] = kUnaccountedMemoryReason;
  }
  return device;
}

// ---- the console line ----

using Unit = MemoryUnit;

std::string in_unit(double bytes, const Unit& unit) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes / unit.bytes);
  return text;
}

}  // namespace

MemoryUnit memory_unit_for(double bytes) {
  if (bytes >= 1024.0 * 1024.0 * 1024.0) return {"GiB", 1024.0 * 1024.0 * 1024.0};
  if (bytes >= 1024.0 * 1024.0) return {"MiB", 1024.0 * 1024.0};
  return {"KiB", 1024.0};
}

double memory_number(const json& object, const char* key) {
  const auto found = object.find(key);
  return found != object.end() && found->is_number() ? found->get<double>() : 0.0;
}

json memory_summary_to_json(const std::vector<DeviceMemoryRecord>& devices) {
  if (devices.empty()) return json::object();
  json records = json::array();
  uint64_t peak = 0, step_peak = 0;
  size_t fullest = 0;
  for (size_t d = 0; d < devices.size(); ++d) {
    records.push_back(device_to_json(devices[d]));
    peak = std::max(peak, devices[d].figures.peak_bytes);
    if (devices[d].figures.window_peak_bytes > devices[fullest].figures.window_peak_bytes) fullest = d;
    step_peak = std::max(step_peak, devices[d].figures.window_peak_bytes);
  }
  json scaling = json::array();
  for (const MemoryCategoryInfo& category : memory_categories())
    if (category.scales_with_batch) scaling.push_back(category.key);
  return {{"devices", std::move(records)},
          {"peak_bytes", peak},
          {"step_peak_bytes", step_peak},
          {"fullest_device", fullest},
          {"scales_with_batch", std::move(scaling)}};
}

void add_nvml_memory_figures(const json& telemetry, size_t first_device, json& memory) {
  if (!telemetry.contains("devices") || !memory.contains("devices")) return;
  const json& gpus = telemetry["devices"];
  json& devices = memory["devices"];
  for (size_t d = 0; d < gpus.size() && first_device + d < devices.size(); ++d) {
    const double mib = memory_number(gpus[d], "memory_used_max_mib");
    if (mib > 0) devices[first_device + d]["nvml_used_max_bytes"] = static_cast<int64_t>(mib * 1024.0 * 1024.0 + 0.5);
  }
}

std::string describe_memory(const json& memory) {
  if (!memory.is_object() || !memory.contains("devices") || !memory["devices"].is_array() || memory["devices"].empty())
    return "";
  const json& devices = memory["devices"];
  const size_t fullest = std::min(static_cast<size_t>(memory_number(memory, "fullest_device")), devices.size() - 1);
  const json& device = devices[fullest];
  const double step_peak = memory_number(device, "step_peak_bytes");
  const Unit unit = memory_unit_for(step_peak);
  bool all_alike = true;
  for (const json& other : devices)
    all_alike = all_alike && in_unit(memory_number(other, "step_peak_bytes"), unit) == in_unit(step_peak, unit);
  std::string line = "peak " + in_unit(step_peak, unit) + " " + unit.name;
  line += all_alike ? " per device" : " on device " + std::to_string(static_cast<int>(memory_number(device, "device"))) +
                                          " (the fullest of " + std::to_string(devices.size()) + ")";
  line += " in the measured steps:";
  const json& at_step_peak = device.contains("at_step_peak") ? device["at_step_peak"] : json::object();
  const char* separator = " ";
  for (const MemoryCategoryInfo& category : memory_categories()) {
    const double bytes = memory_number(at_step_peak, category.key);
    if (bytes <= 0) continue;
    line += separator + std::string(category.console_word) + " " + in_unit(bytes, unit);
    separator = ", ";
  }
  const double setup_peak = memory_number(device, "peak_bytes");
  if (in_unit(setup_peak, unit) != in_unit(step_peak, unit)) line += "; set-up peak " + in_unit(setup_peak, unit);
  const double pinned = memory_number(device, "pinned_host_peak_bytes");
  if (std::atof(in_unit(pinned, unit).c_str()) > 0) line += "; pinned host memory " + in_unit(pinned, unit);
  if (device.contains("device_reported_bytes")) {
    line += "; device reports " + in_unit(memory_number(device, "device_reported_bytes"), unit);
    if (device.contains("unaccounted") && device["unaccounted"].is_object()) {
      const json& unaccounted = device["unaccounted"];
      line += " (" + in_unit(memory_number(unaccounted, "context_bytes"), unit) + " CUDA context and other processes, " +
              in_unit(memory_number(unaccounted, "libraries_bytes"), unit) + " libraries' own and rounding)";
    } else if (device.contains("unaccounted_bytes")) {
      line += " (" + in_unit(memory_number(device, "unaccounted_bytes"), unit) + " not dpbench's)";
    }
  }
  return line;
}

}  // namespace dpbench
