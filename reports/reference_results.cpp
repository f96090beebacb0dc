// Matching a run with its reference result and saying how they compare (see reference_results.h).
#include "reports/reference_results.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "engine/machine/text_content.h"
#include "reports/report_series.h"
#include "reports/table_cells.h"
#include "reports/workload_flags.h"

namespace dpbench {
namespace {

using nlohmann::json;

// The two sides as workload_differences names them.
const char* const kThisRun = "this run";
const char* const kReference = "reference";

std::string both_values(const std::string& run_value, const std::string& reference_value) {
  return " (" + std::string(kThisRun) + " " + escaped_value(run_value) + "; " + kReference + " " +
         escaped_value(reference_value) + ")";
}

// "NVIDIA H200" (or "NVIDIA A100 + NVIDIA H100" for a mix), as report's series key names the GPU
// type; "" on the reference backend, whose devices are host threads.
std::string gpu_name_of(const Result& result) {
  if (result.environment.backend == "reference") return "";
  std::vector<std::string> names;
  for (const DeviceRecord& device : result.environment.devices)
    if (std::find(names.begin(), names.end(), device.name) == names.end()) names.push_back(device.name);
  return join_parts(names, " + ");
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// A PCIe card by its name: "NVIDIA H100 PCIe", "NVIDIA A100-PCIE-40GB", "NVIDIA H200 NVL" (the
// H100 NVL and H200 NVL are PCIe cards bridged in pairs); SXM modules' names say neither.
bool is_pcie_card(const std::string& gpu) {
  const std::string name = lower(gpu);
  if (name.find("pcie") != std::string::npos) return true;
  const size_t nvl = name.find(" nvl");
  return nvl != std::string::npos &&
         (nvl + 4 == name.size() || !std::isalnum(static_cast<unsigned char>(name[nvl + 4])));
}

const json* telemetry_of(const Result& result) {
  const json& telemetry = result.summary.gpu_telemetry;
  if (!telemetry.is_object() || !telemetry.value("available", false)) return nullptr;
  return &telemetry;
}

std::optional<double> telemetry_number(const Result& result, const char* key) {
  const json* telemetry = telemetry_of(result);
  if (telemetry == nullptr) return std::nullopt;
  const auto found = telemetry->find(key);
  if (found == telemetry->end() || !found->is_number()) return std::nullopt;
  return found->get<double>();
}

// The largest of a per-device telemetry figure, e.g. max_sm_clock_mhz.
std::optional<double> largest_per_device(const Result& result, const char* key) {
  const json* telemetry = telemetry_of(result);
  if (telemetry == nullptr || !telemetry->contains("devices") || !(*telemetry)["devices"].is_array())
    return std::nullopt;
  std::optional<double> largest;
  for (const json& device : (*telemetry)["devices"]) {
    if (!device.is_object()) continue;
    const auto found = device.find(key);
    if (found == device.end() || !found->is_number()) continue;
    largest = std::max(largest.value_or(found->get<double>()), found->get<double>());
  }
  return largest;
}

// The GPUs' power limit: the measured window's mean, else the devices' own (a run too short for a
// sample of its window still records each GPU's limit).
std::optional<double> power_limit_of(const Result& result) {
  if (const std::optional<double> mean = telemetry_number(result, "power_limit_w_mean")) return mean;
  const json* telemetry = telemetry_of(result);
  if (telemetry == nullptr || !telemetry->contains("devices") || !(*telemetry)["devices"].is_array())
    return std::nullopt;
  double sum = 0;
  int count = 0;
  for (const json& device : (*telemetry)["devices"])
    if (device.is_object() && device.contains("power_limit_w") && device["power_limit_w"].is_number()) {
      sum += device["power_limit_w"].get<double>();
      ++count;
    }
  if (count == 0) return std::nullopt;
  return sum / count;
}

// Whether every GPU of the run reaches another over NVLink; none without telemetry.
std::optional<bool> over_nvlink(const Result& result) {
  const json* telemetry = telemetry_of(result);
  if (telemetry == nullptr || !telemetry->contains("devices") || !(*telemetry)["devices"].is_array() ||
      (*telemetry)["devices"].empty())
    return std::nullopt;
  for (const json& device : (*telemetry)["devices"]) {
    if (!device.is_object() || !device.contains("nvlink_peers")) return std::nullopt;
    if (!device["nvlink_peers"].is_array() || device["nvlink_peers"].empty()) return false;
  }
  return true;
}

std::string whole(double value) { return fmt::format("{:.0f}", value); }
std::string share_text(double share) { return fmt::format("{:.0f}%", 100.0 * share); }

// Flags of the execution kind (reports/workload_flags.h) that cannot change a step's time: they
// name a folder, bound a wait or only enter MFU's denominator.
bool execution_flag_without_speed(const std::string& flag) {
  static const std::set<std::string> flags = {"collective_timeout", "peak_tflops",  "data_dir",
                                              "vocab_file",         "train_prefix", "vocab_prefix"};
  return flags.count(flag) > 0;
}

bool strong_scaling(const Result& result) {
  const json& config = result.config;
  return config.is_object() && config.contains("total_batch_size") && config["total_batch_size"].is_number_integer() &&
         config["total_batch_size"].get<int64_t>() > 0;
}

std::string launcher_words(const std::string& launcher) {
  return launcher.empty() || launcher == "none" ? "one process" : launcher;
}

// The NCCL_* variables a run set, but NCCL_VERSION (which names the container's NCCL, not a setting).
std::map<std::string, std::string> nccl_settings(const Result& result) {
  std::map<std::string, std::string> settings;
  for (const auto& [name, value] : result.environment.variables)
    if (name.rfind("NCCL_", 0) == 0 && name != "NCCL_VERSION") settings[name] = value;
  return settings;
}

std::string date_of(const Result& result) { return result.environment.date.substr(0, 10); }

// What machine_differences finds, each with both values: "power limit 600 W (reference 700 W)".
struct Differences {
  std::vector<std::string> items;
  void add(const std::string& what, const std::string& run_value, const std::string& reference_value) {
    items.push_back(what + " " + escaped_value(run_value) + " (reference " + escaped_value(reference_value) + ")");
  }
};

// The GPU and its form (a PCIe card or an SXM module), or, the same GPU, its memory.
void add_gpu_differences(const Result& run, const Result& reference, Differences& differences) {
  const std::string run_gpu = gpu_name_of(run), reference_gpu = gpu_name_of(reference);
  if (run_gpu != reference_gpu && !run_gpu.empty() && !reference_gpu.empty()) {
    const bool run_pcie = is_pcie_card(run_gpu), reference_pcie = is_pcie_card(reference_gpu);
    if (run_pcie && !reference_pcie)
      differences.add("a PCIe card instead of SXM, with a lower power limit and clocks:", run_gpu, reference_gpu);
    else if (!run_pcie && reference_pcie)
      differences.add("an SXM module instead of a PCIe card, with a higher power limit and clocks:", run_gpu,
                      reference_gpu);
    else
      differences.add("another GPU:", run_gpu, reference_gpu);
  } else if (!run_gpu.empty() && !run.environment.devices.empty() && !reference.environment.devices.empty()) {
    const double run_gib = static_cast<double>(run.environment.devices.front().memory_bytes) / (1ull << 30);
    const double reference_gib = static_cast<double>(reference.environment.devices.front().memory_bytes) / (1ull << 30);
    if (run_gib > 0 && reference_gib > 0 && std::abs(run_gib - reference_gib) > 0.02 * reference_gib)
      differences.add("GPU memory", whole(run_gib) + " GiB", whole(reference_gib) + " GiB");
  }
  // The reference backend's machine is the host's CPU.
  const EnvironmentRecord &mine = run.environment, &theirs = reference.environment;
  if (mine.backend == "reference" && theirs.backend == "reference" && mine.cpu_model != theirs.cpu_model &&
      !mine.cpu_model.empty() && !theirs.cpu_model.empty())
    differences.add("CPU", mine.cpu_model, theirs.cpu_model);
}

// What NVML says the GPUs are set to: the power limit and the highest SM clock.
void add_power_and_clock_differences(const Result& run, const Result& reference, Differences& differences) {
  if (telemetry_of(run) == nullptr && telemetry_of(reference) != nullptr && run.environment.backend == "cuda") {
    const std::string why = run.summary.gpu_telemetry.is_object() ? run.summary.gpu_telemetry.value("reason", "") : "";
    differences.items.push_back("no GPU telemetry in this run" +
                                (why.empty() ? std::string() : " (" + escaped_value(why) + ")") +
                                ", so its power limit and clocks are not known");
  }
  const std::optional<double> run_limit = power_limit_of(run), reference_limit = power_limit_of(reference);
  if (run_limit && reference_limit && std::abs(*run_limit - *reference_limit) >= 1)
    differences.add("power limit", whole(*run_limit) + " W", whole(*reference_limit) + " W");
  const std::optional<double> run_max_clock = largest_per_device(run, "max_sm_clock_mhz"),
                              reference_max_clock = largest_per_device(reference, "max_sm_clock_mhz");
  if (run_max_clock && reference_max_clock && *run_max_clock > 0 && *reference_max_clock > 0 &&
      std::abs(*run_max_clock - *reference_max_clock) >= 1)
    differences.add("maximum SM clock", whole(*run_max_clock) + " MHz", whole(*reference_max_clock) + " MHz");
}

// How this run's clocks went, against the reference's: a mean 3% or more off (and whether the
// power cap held it), thermal limits and hardware slowdowns in 5 points more of the samples.
void add_run_conditions(const Result& run, const Result& reference, Differences& differences) {
  const std::optional<double> run_clock = telemetry_number(run, "sm_clock_mhz_mean"),
                              reference_clock = telemetry_number(reference, "sm_clock_mhz_mean");
  if (run_clock && reference_clock && *reference_clock > 0 &&
      std::abs(*run_clock - *reference_clock) >= 0.03 * *reference_clock) {
    std::string what = "SM clock " + whole(*run_clock) + " MHz mean (reference " + whole(*reference_clock) + " MHz)";
    const std::optional<double> capped = telemetry_number(run, "power_capped_share");
    if (*run_clock < *reference_clock && capped && *capped >= 0.5)
      what += ", held by the power cap in " + share_text(*capped) + " of samples";
    differences.items.push_back(what);
  }
  const std::optional<double> run_thermal = telemetry_number(run, "thermal_limited_share"),
                              reference_thermal = telemetry_number(reference, "thermal_limited_share");
  if (run_thermal && *run_thermal >= reference_thermal.value_or(0) + 0.05)
    differences.add("clocks thermally limited in", share_text(*run_thermal) + " of samples",
                    reference_thermal ? share_text(*reference_thermal) : "not known");
  const std::optional<double> run_slowdown = largest_per_device(run, "hardware_slowdown_share"),
                              reference_slowdown = largest_per_device(reference, "hardware_slowdown_share");
  if (run_slowdown && *run_slowdown >= reference_slowdown.value_or(0) + 0.05)
    differences.add("hardware slowdown (power brake, overheating) in", share_text(*run_slowdown) + " of samples",
                    reference_slowdown ? share_text(*reference_slowdown) : "not known");
}

// How the steps executed: the execution flags that can change their time, and tracing.
void add_execution_differences(const Result& run, const Result& reference, Differences& differences) {
  if (!run.config.is_object() || !reference.config.is_object()) return;
  const bool strong = strong_scaling(run);
  for (const auto& [flag, value] : run.config.items()) {
    if (config_flag_role(flag, strong) != FlagRole::execution || execution_flag_without_speed(flag)) continue;
    const auto other = reference.config.find(flag);
    if (other == reference.config.end()) continue;
    const std::string run_text = config_value_text(value), reference_text = config_value_text(*other);
    if (run_text != reference_text)
      differences.items.push_back("--" + escaped_value(flag) + "=" + escaped_value(run_text) + " (reference " +
                                  escaped_value(reference_text) + ")");
  }
  if (!config_text(run.config, "trace_file").empty() && config_text(reference.config, "trace_file").empty())
    differences.items.push_back("traced (--trace_file), which adds work to every traced step (reference untraced)");
}

// The launch and the links between the GPUs.
void add_launch_differences(const Result& run, const Result& reference, Differences& differences) {
  if (launcher_words(run.environment.launcher) != launcher_words(reference.environment.launcher))
    differences.add("launched by", launcher_words(run.environment.launcher),
                    launcher_words(reference.environment.launcher));
  const size_t run_hosts = std::max<size_t>(1, run.environment.ranks_per_host.size()),
               reference_hosts = std::max<size_t>(1, reference.environment.ranks_per_host.size());
  if (run_hosts != reference_hosts)
    differences.items.push_back(std::to_string(run_hosts) + " hosts (reference " + std::to_string(reference_hosts) +
                                ")");
  if (run.summary.num_devices <= 1) return;
  const std::optional<bool> run_nvlink = over_nvlink(run), reference_nvlink = over_nvlink(reference);
  if (run_nvlink && reference_nvlink && *run_nvlink != *reference_nvlink)
    differences.add("GPUs linked by", *run_nvlink ? "NVLink" : "PCIe only", *reference_nvlink ? "NVLink" : "PCIe only");
}

// The software under dpbench and dpbench's own version; NCCL and its settings only where GPUs
// exchange (one GPU exchanges nothing).
void add_software_differences(const Result& run, const Result& reference, Differences& differences) {
  const EnvironmentRecord &mine = run.environment, &theirs = reference.environment;
  const bool several = run.summary.num_devices > 1;
  const std::vector<std::tuple<const char*, const std::string*, const std::string*>> versions = {
      {"driver", &mine.driver, &theirs.driver},
      {"CUDA runtime", &mine.cuda_runtime, &theirs.cuda_runtime},
      {"cuBLAS", &mine.cublas, &theirs.cublas},
      {"cuDNN", &mine.cudnn, &theirs.cudnn},
      {"NCCL", &mine.nccl, &theirs.nccl}};
  for (const auto& [name, run_version, reference_version] : versions) {
    if (std::string(name) == "NCCL" && !several) continue;
    if (!run_version->empty() && !reference_version->empty() && *run_version != *reference_version)
      differences.add(name, *run_version, *reference_version);
  }
  if (several) {
    const std::map<std::string, std::string> run_nccl = nccl_settings(run), reference_nccl = nccl_settings(reference);
    std::set<std::string> names;
    for (const auto& entry : run_nccl) names.insert(entry.first);
    for (const auto& entry : reference_nccl) names.insert(entry.first);
    for (const std::string& name : names) {
      const auto a = run_nccl.find(name), b = reference_nccl.find(name);
      if (a != run_nccl.end() && b != reference_nccl.end() && a->second == b->second) continue;
      const std::string run_value = a == run_nccl.end() ? name + " unset" : name + "=" + a->second;
      const std::string reference_value = b == reference_nccl.end() ? "unset" : name + "=" + b->second;
      differences.items.push_back(escaped_value(run_value) + " (reference " + escaped_value(reference_value) + ")");
    }
  }
  if (!run.tool_version.empty() && !reference.tool_version.empty() && run.tool_version != reference.tool_version)
    differences.add("dpbench", run.tool_version, reference.tool_version);
}

}  // namespace

std::vector<std::string> workload_mismatches(const Result& run, const Result& reference,
                                             const StrategyCatalog& strategies) {
  std::vector<std::string> mismatches;
  SeriesKey run_key = series_key_of(run, strategies), reference_key = series_key_of(reference, strategies);
  if (run_key.backend != reference_key.backend)
    mismatches.push_back("backend" + both_values(run_key.backend, reference_key.backend));
  if (run.summary.num_devices != reference.summary.num_devices)
    mismatches.push_back("devices" + both_values(std::to_string(run.summary.num_devices),
                                                 std::to_string(reference.summary.num_devices)));
  FlagValues run_flags, reference_flags;
  add_workload_values(run.config, run_key.scaling == Scaling::strong, {}, &run_flags);
  add_workload_values(reference.config, reference_key.scaling == Scaling::strong, {}, &reference_flags);
  // The backend is a config flag too: named once.
  run_flags.erase("backend");
  reference_flags.erase("backend");
  for (std::string& difference : workload_differences({{kThisRun, run_flags}, {kReference, reference_flags}}))
    mismatches.push_back(std::move(difference));
  if (!mismatches.empty()) return mismatches;
  // The flags agree; a key field can still differ where it is made of more than flags (the data:
  // a data set read from a folder, or only its shape, which --data_dir decides).
  run_key.device_name.clear();
  reference_key.device_name.clear();
  const KeyFields run_fields = run_key.fields(), reference_fields = reference_key.fields();
  for (size_t i = 0; i < run_fields.size() && i < reference_fields.size(); ++i)
    if (run_fields[i].second != reference_fields[i].second)
      mismatches.push_back(run_fields[i].first + both_values(run_fields[i].second, reference_fields[i].second));
  return mismatches;
}

std::vector<std::string> machine_differences(const Result& run, const Result& reference, bool with_conditions) {
  Differences differences;
  add_gpu_differences(run, reference, differences);
  add_power_and_clock_differences(run, reference, differences);
  if (with_conditions) add_run_conditions(run, reference, differences);
  add_execution_differences(run, reference, differences);
  add_launch_differences(run, reference, differences);
  add_software_differences(run, reference, differences);
  return differences.items;
}

ReferenceChoice choose_reference(const Result& run, const std::vector<LoadedResult>& references,
                                 const StrategyCatalog& strategies) {
  ReferenceChoice choice;
  const std::string run_gpu = gpu_name_of(run);
  std::vector<const LoadedResult*> matches;
  // Nearest: the fewest differences, then the run's GPU type, then the newest.
  bool nearest_other_gpu = false;
  for (const LoadedResult& reference : references) {
    std::vector<std::string> mismatches = workload_mismatches(run, reference.result, strategies);
    if (mismatches.empty()) {
      matches.push_back(&reference);
      continue;
    }
    if (!matches.empty()) continue;
    const bool other_gpu = gpu_name_of(reference.result) != run_gpu;
    bool better = choice.nearest == nullptr || mismatches.size() < choice.nearest_differences.size();
    if (!better && mismatches.size() == choice.nearest_differences.size())
      better = other_gpu != nearest_other_gpu
                   ? !other_gpu
                   : reference.result.environment.date > choice.nearest->result.environment.date;
    if (better) {
      choice.nearest = &reference;
      choice.nearest_differences = std::move(mismatches);
      nearest_other_gpu = other_gpu;
    }
  }
  if (matches.empty()) return choice;
  choice.nearest = nullptr;
  choice.nearest_differences.clear();

  // The run's GPU type first, then the fewest differences of machine, then the newest; path order
  // decides the rest (stable).
  struct Ranked {
    const LoadedResult* reference;
    bool other_gpu;
    size_t differences;
  };
  std::vector<Ranked> ranked;
  for (const LoadedResult* match : matches)
    ranked.push_back(
        {match, gpu_name_of(match->result) != run_gpu, machine_differences(run, match->result, false).size()});
  std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.other_gpu != b.other_gpu) return !a.other_gpu;
    if (a.differences != b.differences) return a.differences < b.differences;
    return a.reference->result.environment.date > b.reference->result.environment.date;
  });
  const LoadedResult* chosen = ranked.front().reference;
  choice.chosen = chosen;
  choice.runs.push_back(chosen);
  // Its repeats: the same build on the same machine description.
  for (const Ranked& entry : ranked) {
    const Result& other = entry.reference->result;
    if (entry.reference == chosen || other.git_sha != chosen->result.git_sha ||
        gpu_name_of(other) != gpu_name_of(chosen->result))
      continue;
    if (machine_differences(other, chosen->result, false).empty() &&
        machine_differences(chosen->result, other, false).empty())
      choice.runs.push_back(entry.reference);
  }
  // In path order, as compare lists a side's runs.
  std::sort(choice.runs.begin(), choice.runs.end(),
            [](const LoadedResult* a, const LoadedResult* b) { return a->path < b->path; });
  choice.machine_differences = machine_differences(run, chosen->result, true);
  return choice;
}

std::string reference_label(const Result& reference) {
  std::string label;
  if (reference.environment.backend == "reference") {
    label = "reference-backend reference";
  } else {
    std::string gpu = gpu_name_of(reference);
    if (gpu.rfind("NVIDIA ", 0) == 0) gpu = gpu.substr(7);
    if (gpu.empty()) gpu = "GPU";
    const int64_t devices = reference.summary.num_devices;
    label = (devices > 1 ? std::to_string(devices) + " x " : std::string()) + escaped_value(gpu) + " reference";
  }
  std::vector<std::string> details;
  if (!reference.environment.date.empty()) details.push_back(escaped_value(date_of(reference)));
  if (const std::optional<double> limit = power_limit_of(reference)) details.push_back(whole(*limit) + " W");
  return details.empty() ? label : label + " (" + join_parts(details, ", ") + ")";
}

std::string path_in_folder(const std::string& path, const std::string& folder) {
  const std::filesystem::path relative = std::filesystem::path(path).lexically_relative(folder);
  if (relative.empty() || relative == "." || *relative.begin() == "..")
    return std::filesystem::path(path).filename().string();
  return relative.string();
}

nlohmann::json reference_summary(const Result& run, const std::string& folder, const LoadedResults& references,
                                 const StrategyCatalog& strategies, const ComparisonSettings& settings) {
  const ReferenceChoice choice = choose_reference(run, references.results, strategies);
  json summary = {{"matched", choice.matched()}, {"folder", folder}};
  if (!choice.matched()) {
    summary["references"] = references.results.size();
    summary["reason"] =
        references.results.empty() ? "no reference results in the folder" : "no reference result of this workload";
    summary["nearest"] = choice.nearest == nullptr ? json()
                                                   : json{{"file", path_in_folder(choice.nearest->path, folder)},
                                                          {"label", reference_label(choice.nearest->result)},
                                                          {"differs_in", choice.nearest_differences}};
    return summary;
  }
  const Result& reference = choice.chosen->result;
  std::vector<std::string> files;
  std::vector<std::vector<StepSample>> reference_samples, run_samples;
  for (const LoadedResult* repeat : choice.runs) {
    files.push_back(path_in_folder(repeat->path, folder));
    std::vector<StepSample> samples = measured_steps_of(repeat->result);
    if (why_too_few_samples(samples).empty()) reference_samples.push_back(std::move(samples));
  }
  std::vector<StepSample> samples = measured_steps_of(run);
  if (why_too_few_samples(samples).empty()) run_samples.push_back(std::move(samples));
  const SpeedComparison speeds = compare_speeds(reference_samples, run_samples, settings);
  summary["files"] = files;
  summary["label"] = reference_label(reference);
  summary["date"] = reference.environment.date;
  summary["git_sha"] = reference.git_sha;
  summary["version"] = reference.tool_version;
  summary["gpu"] = gpu_name_of(reference);
  summary["num_devices"] = reference.summary.num_devices;
  summary["power_limit_w"] = json_number(power_limit_of(reference));
  summary["driver"] = reference.environment.driver;
  summary["unit"] = reference.summary.unit;
  summary["reference_speed"] = json_number(speeds.base_speed);
  summary["run_speed"] = json_number(speeds.new_speed);
  summary["ratio"] = json_number(speeds.ratio);
  summary["ratio_low"] = json_number(speeds.ratio_low);
  summary["ratio_high"] = json_number(speeds.ratio_high);
  summary["verdict"] = verdict_name(speeds.verdict);
  summary["noise_floor_pct"] = settings.noise_floor_pct;
  summary["machine_differences"] = choice.machine_differences;
  return summary;
}

nlohmann::json unreadable_references_summary(const std::string& folder, const std::string& why) {
  return {{"matched", false}, {"folder", folder}, {"references", 0}, {"reason", why}, {"nearest", nullptr}};
}

std::string readable_speed(double items_per_sec) {
  if (!std::isfinite(items_per_sec)) return "n/a";
  if (std::abs(items_per_sec) < 100) return fmt::format("{:.1f}", items_per_sec);
  const std::string digits = fmt::format("{:.0f}", std::abs(items_per_sec));
  std::string grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return (items_per_sec < 0 ? "-" : "") + grouped;
}

std::vector<std::string> reference_console_lines(const nlohmann::json& reference) {
  if (!reference.is_object() || reference.empty()) return {};
  auto text = [&](const json& object, const char* key) {
    const auto found = object.find(key);
    return found != object.end() && found->is_string() ? escaped_value(found->get<std::string>()) : std::string();
  };
  auto strings = [](const json& object, const char* key) {
    std::vector<std::string> items;
    const auto found = object.find(key);
    if (found != object.end() && found->is_array())
      for (const json& item : *found)
        if (item.is_string()) items.push_back(escaped_value(item.get<std::string>()));
    return items;
  };
  const std::string folder = text(reference, "folder");
  if (!reference.value("matched", false)) {
    const json nearest = reference.value("nearest", json());
    if (!nearest.is_object())
      return {"none: " + text(reference, "reason") + (folder.empty() ? "" : " (" + folder + ")")};
    std::vector<std::string> differs = strings(nearest, "differs_in");
    if (differs.size() > 3) {
      const size_t more = differs.size() - 3;
      differs.resize(3);
      differs.push_back("and " + std::to_string(more) + " more");
    }
    const size_t count = reference.value("references", size_t{0});
    return {"none for this workload among " + count_of(count, "reference result") + " in " + folder +
            " (nearest: " + text(nearest, "file") + ", " + text(nearest, "label") + ", which differs in " +
            join_parts(differs, ", ") + ")"};
  }
  const std::vector<std::string> files = strings(reference, "files");
  std::string label = text(reference, "label");
  if (files.size() > 1) label += ", mean of " + std::to_string(files.size()) + " runs";
  const json speed = reference.value("reference_speed", json()), ratio = reference.value("ratio", json());
  const std::string verdict = text(reference, "verdict");
  std::string line = label + ": " + (speed.is_number() ? readable_speed(speed.get<double>()) : std::string("n/a")) +
                     " " + text(reference, "unit") + "; this run ";
  if (ratio.is_number()) {
    line += fmt::format("{:.0f}%", 100.0 * ratio.get<double>());
    line += verdict == "slower"   ? " (slower beyond the noise)"
            : verdict == "faster" ? " (faster beyond the noise)"
                                  : " (" + verdict + ")";
  } else {
    line += "not compared (too few measured steps)";
  }
  std::vector<std::string> lines = {line};
  const std::vector<std::string> differences = strings(reference, "machine_differences");
  if (!differences.empty())
    lines.push_back(std::string("the machines differ") + (verdict == "slower" ? ", which could explain a gap" : "") +
                    ": " + join_parts(differences, "; "));
  else if (verdict == "slower")
    lines.push_back(
        "the machines' descriptions agree (GPU, power limit, clocks, execution flags, driver, libraries): "
        "look at this machine's state (other processes, cooling) or this dpbench build");
  return lines;
}

}  // namespace dpbench
