// GpuTelemetry (see the header): NVML's C API reached through dlopen, its few types declared
// here (the stable ABI of nvml.h) so that the build needs no NVML header.
#include "engine/machine/gpu_telemetry.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace dpbench {

namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;           // NVML_CLOCK_SM
constexpr int kNvmlTemperatureGpu = 0;    // NVML_TEMPERATURE_GPU
constexpr int kNvmlP2pNvlink = 2;         // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int kNvmlP2pStatusOk = 0;       // NVML_P2P_STATUS_OK
constexpr unsigned kNvmlMaxLinks = 18;    // NVML_NVLINK_MAX_LINKS
struct NvmlMemory {                       // nvmlMemory_t
  unsigned long long total, free, used;
};
struct NvmlPciInfo {                      // nvmlPciInfo_t (v2/v3)
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

}  // namespace

struct GpuTelemetry::Nvml {
  void* library = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*handle_by_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned*) = nullptr;        // mW
  NvmlReturn (*power_limit)(NvmlDevice, unsigned*) = nullptr;  // mW
  NvmlReturn (*energy)(NvmlDevice, unsigned long long*) = nullptr;  // mJ
  NvmlReturn (*reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  // Optional: memory in use, and the links between the host's GPUs.
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*count)(unsigned*) = nullptr;
  NvmlReturn (*handle_by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*pci_info)(NvmlDevice, NvmlPciInfo*) = nullptr;
  NvmlReturn (*p2p_status)(NvmlDevice, NvmlDevice, int, int*) = nullptr;
  NvmlReturn (*nvlink_state)(NvmlDevice, unsigned, unsigned*) = nullptr;
  std::vector<NvmlDevice> handles;
  bool initialised = false;

  ~Nvml() {
    if (initialised && shutdown) shutdown();
    if (library) dlclose(library);
  }
  std::string describe(NvmlReturn code) const {
    return error_string ? error_string(code) : "NVML error " + std::to_string(code);
  }
  template <typename Function>
  bool bind(Function& function, const char* name) {
    function = reinterpret_cast<Function>(dlsym(library, name));
    return function != nullptr;
  }
};

namespace {

// Its active NVLinks, and every GPU of the host NVML reports NVLink peer access to (through
// NVSwitches too, where the links themselves end at a switch).
template <typename NvmlTable>
void describe_links(const NvmlTable& nvml, NvmlDevice handle, TelemetryDevice& device) {
  if (nvml.nvlink_state) {
    int active = 0;
    bool answered = false;
    for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
      unsigned state = 0;
      if (nvml.nvlink_state(handle, link, &state) != kNvmlSuccess) continue;
      answered = true;
      active += state != 0;
    }
    if (answered) device.nvlinks_active = active;
  }
  unsigned count = 0;
  if (!nvml.count || !nvml.handle_by_index || !nvml.pci_info || !nvml.p2p_status || nvml.count(&count) != kNvmlSuccess)
    return;
  for (unsigned index = 0; index < count; ++index) {
    NvmlDevice other = nullptr;
    NvmlPciInfo pci{};
    int status = -1;
    if (nvml.handle_by_index(index, &other) != kNvmlSuccess || other == handle) continue;
    if (nvml.p2p_status(handle, other, kNvmlP2pNvlink, &status) != kNvmlSuccess || status != kNvmlP2pStatusOk) continue;
    if (nvml.pci_info(other, &pci) == kNvmlSuccess) device.nvlink_peers.emplace_back(pci.bus_id);
  }
}

}  // namespace

GpuTelemetry::GpuTelemetry(const std::vector<std::string>& pci_bus_ids, std::chrono::milliseconds period)
    : period_(period) {
  if (pci_bus_ids.empty() || std::any_of(pci_bus_ids.begin(), pci_bus_ids.end(),
                                         [](const std::string& id) { return id.empty(); })) {
    reason_ = "no GPUs (reference backend)";
    return;
  }
  auto nvml = std::make_unique<Nvml>();
  nvml->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml->library == nullptr) {
    reason_ = "libnvidia-ml.so.1 (NVML, part of the NVIDIA driver) could not be loaded";
    return;
  }
  nvml->bind(nvml->error_string, "nvmlErrorString");
  const bool bound = nvml->bind(nvml->init, "nvmlInit_v2") && nvml->bind(nvml->shutdown, "nvmlShutdown") &&
                     nvml->bind(nvml->handle_by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2") &&
                     nvml->bind(nvml->clock, "nvmlDeviceGetClockInfo") &&
                     nvml->bind(nvml->max_clock, "nvmlDeviceGetMaxClockInfo") &&
                     nvml->bind(nvml->power, "nvmlDeviceGetPowerUsage") &&
                     nvml->bind(nvml->power_limit, "nvmlDeviceGetEnforcedPowerLimit") &&
                     nvml->bind(nvml->temperature, "nvmlDeviceGetTemperature") &&
                     (nvml->bind(nvml->reasons, "nvmlDeviceGetCurrentClocksEventReasons") ||
                      nvml->bind(nvml->reasons, "nvmlDeviceGetCurrentClocksThrottleReasons"));
  if (!bound) {
    reason_ = "this NVML lacks a function dpbench reads (clocks, power, temperature or clock limit reasons)";
    return;
  }
  nvml->bind(nvml->energy, "nvmlDeviceGetTotalEnergyConsumption");  // optional: older GPUs lack it
  nvml->bind(nvml->memory, "nvmlDeviceGetMemoryInfo");
  nvml->bind(nvml->count, "nvmlDeviceGetCount_v2");
  nvml->bind(nvml->handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  if (!nvml->bind(nvml->pci_info, "nvmlDeviceGetPciInfo_v3")) nvml->bind(nvml->pci_info, "nvmlDeviceGetPciInfo_v2");
  nvml->bind(nvml->p2p_status, "nvmlDeviceGetP2PStatus");
  nvml->bind(nvml->nvlink_state, "nvmlDeviceGetNvLinkState");
  const NvmlReturn started = nvml->init();
  if (started != kNvmlSuccess) {
    reason_ = "nvmlInit failed: " + nvml->describe(started);
    return;
  }
  nvml->initialised = true;
  for (const std::string& bus_id : pci_bus_ids) {
    NvmlDevice handle = nullptr;
    const NvmlReturn found = nvml->handle_by_bus_id(bus_id.c_str(), &handle);
    if (found != kNvmlSuccess) {
      reason_ = "NVML does not know the GPU at PCI " + bus_id + ": " + nvml->describe(found);
      return;
    }
    TelemetryDevice device;
    device.pci_bus_id = bus_id;
    unsigned value = 0;
    if (nvml->max_clock(handle, kNvmlClockSm, &value) == kNvmlSuccess) device.max_sm_clock_mhz = value;
    if (nvml->power_limit(handle, &value) == kNvmlSuccess) device.power_limit_w = value / 1000.0;
    describe_links(*nvml, handle, device);
    nvml->handles.push_back(handle);
    devices_.push_back(device);
  }
  nvml_ = std::move(nvml);
  available_ = true;
  thread_ = std::thread([this] { sample_loop(); });
}

GpuTelemetry::~GpuTelemetry() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void GpuTelemetry::sample_loop() {
  while (!stop_) {
    const TelemetryClock::time_point next = TelemetryClock::now() + period_;
    std::vector<TelemetrySample> taken;
    for (size_t d = 0; d < nvml_->handles.size(); ++d) {
      NvmlDevice handle = nvml_->handles[d];
      TelemetrySample sample;
      sample.at = TelemetryClock::now();
      sample.device = static_cast<int>(d);
      unsigned value = 0;
      if (nvml_->clock(handle, kNvmlClockSm, &value) == kNvmlSuccess) sample.sm_clock_mhz = value;
      if (nvml_->power(handle, &value) == kNvmlSuccess) sample.power_w = value / 1000.0;
      if (nvml_->temperature(handle, kNvmlTemperatureGpu, &value) == kNvmlSuccess) sample.temperature_c = value;
      unsigned long long bits = 0;
      if (nvml_->reasons(handle, &bits) == kNvmlSuccess) sample.clock_limit_reasons = bits;
      unsigned long long millijoules = 0;
      if (nvml_->energy && nvml_->energy(handle, &millijoules) == kNvmlSuccess) sample.energy_j = millijoules / 1000.0;
      NvmlMemory memory{};
      if (nvml_->memory && nvml_->memory(handle, &memory) == kNvmlSuccess) sample.memory_used_bytes = memory.used;
      taken.push_back(sample);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      samples_.insert(samples_.end(), taken.begin(), taken.end());
    }
    // Short naps, so that stopping never waits a whole period.
    while (!stop_ && TelemetryClock::now() < next) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

nlohmann::json GpuTelemetry::summarize(TelemetryClock::time_point from, TelemetryClock::time_point to,
                                       int64_t steps, double items) const {
  if (!available_) return {{"available", false}, {"reason", reason_}};
  std::lock_guard<std::mutex> lock(mutex_);
  return summarize_telemetry(devices_, samples_, from, to, steps, items, period_);
}

nlohmann::json summarize_telemetry(const std::vector<TelemetryDevice>& devices,
                                   const std::vector<TelemetrySample>& samples, TelemetryClock::time_point from,
                                   TelemetryClock::time_point to, int64_t steps, double items,
                                   std::chrono::milliseconds period) {
  using nlohmann::json;
  const double window_s = std::chrono::duration<double>(to - from).count();
  json result = {{"available", true}, {"source", "nvml"}, {"sample_period_ms", period.count()},
                 {"window_s", window_s}};
  json per_device = json::array();
  double total_energy_j = 0;
  bool energy_everywhere = true;
  int64_t fewest_samples = -1;
  for (size_t d = 0; d < devices.size(); ++d) {
    std::vector<const TelemetrySample*> mine;
    for (const TelemetrySample& sample : samples)
      if (sample.device == static_cast<int>(d) && sample.at >= from && sample.at <= to) mine.push_back(&sample);
    const int64_t count = static_cast<int64_t>(mine.size());
    fewest_samples = fewest_samples < 0 ? count : std::min(fewest_samples, count);
    json entry = {{"pci_bus_id", devices[d].pci_bus_id},
                  {"samples", count},
                  {"max_sm_clock_mhz", devices[d].max_sm_clock_mhz},
                  {"power_limit_w", devices[d].power_limit_w},
                  {"nvlink_peers", devices[d].nvlink_peers}};
    if (devices[d].nvlinks_active >= 0) entry["nvlinks_active"] = devices[d].nvlinks_active;
    if (count == 0) {
      energy_everywhere = false;
      per_device.push_back(entry);
      continue;
    }
    double clock_sum = 0, clock_min = mine.front()->sm_clock_mhz, clock_max = 0, power_sum = 0, power_max = 0,
           hottest = 0;
    int64_t power_capped = 0, thermal = 0, hardware = 0;
    for (const TelemetrySample* sample : mine) {
      clock_sum += sample->sm_clock_mhz;
      clock_min = std::min(clock_min, sample->sm_clock_mhz);
      clock_max = std::max(clock_max, sample->sm_clock_mhz);
      power_sum += sample->power_w;
      power_max = std::max(power_max, sample->power_w);
      hottest = std::max(hottest, sample->temperature_c);
      if (sample->clock_limit_reasons & kClockLimitPowerCap) ++power_capped;
      if (sample->clock_limit_reasons & kClockLimitThermal) ++thermal;
      if (sample->clock_limit_reasons & kClockLimitHardwareSlowdown) ++hardware;
    }
    const double n = static_cast<double>(count);
    entry["sm_clock_mhz"] = {{"mean", clock_sum / n}, {"min", clock_min}, {"max", clock_max}};
    entry["power_w"] = {{"mean", power_sum / n}, {"max", power_max}};
    entry["temperature_c_max"] = hottest;
    double memory_max = -1;
    for (const TelemetrySample* sample : mine) memory_max = std::max(memory_max, sample->memory_used_bytes);
    if (memory_max >= 0) entry["memory_used_max_mib"] = memory_max / (1024.0 * 1024.0);
    entry["power_capped_share"] = power_capped / n;
    entry["thermal_limited_share"] = thermal / n;
    entry["hardware_slowdown_share"] = hardware / n;
    // The counter's rate between the window's first and last sample, over the whole window.
    const TelemetrySample& first = *mine.front();
    const TelemetrySample& last = *mine.back();
    const double span_s = std::chrono::duration<double>(last.at - first.at).count();
    if (first.energy_j >= 0 && last.energy_j >= first.energy_j && span_s > 0) {
      const double energy_j = (last.energy_j - first.energy_j) / span_s * window_s;
      entry["energy_j"] = energy_j;
      total_energy_j += energy_j;
    } else {
      energy_everywhere = false;
    }
    per_device.push_back(entry);
  }
  result["devices"] = per_device;
  result["samples_per_device_min"] = std::max<int64_t>(fewest_samples, 0);
  double clock_sum = 0, power_sum = 0, limit_sum = 0, capped_sum = 0, thermal_sum = 0;
  int sampled = 0;
  for (const json& entry : per_device) {
    if (!entry.contains("sm_clock_mhz")) continue;
    ++sampled;
    clock_sum += entry["sm_clock_mhz"]["mean"].get<double>();
    power_sum += entry["power_w"]["mean"].get<double>();
    limit_sum += entry["power_limit_w"].get<double>();
    capped_sum += entry["power_capped_share"].get<double>();
    thermal_sum += entry["thermal_limited_share"].get<double>();
  }
  if (sampled > 0) {
    result["sm_clock_mhz_mean"] = clock_sum / sampled;
    result["power_w_mean"] = power_sum / sampled;
    result["power_limit_w_mean"] = limit_sum / sampled;
    result["power_capped_share"] = capped_sum / sampled;
    result["thermal_limited_share"] = thermal_sum / sampled;
  }
  if (energy_everywhere && sampled > 0 && steps > 0 && total_energy_j > 0) {
    result["energy_j"] = total_energy_j;
    result["energy_j_per_step"] = total_energy_j / static_cast<double>(steps);
    result["items_per_joule"] = items / total_energy_j;
  }
  return result;
}

std::string describe_telemetry(const nlohmann::json& telemetry) {
  if (!telemetry.is_object() || !telemetry.value("available", false) || !telemetry.contains("sm_clock_mhz_mean"))
    return "";
  double max_clock = 0;
  for (const nlohmann::json& entry : telemetry["devices"])
    max_clock = std::max(max_clock, entry.value("max_sm_clock_mhz", 0.0));
  std::string text = fmt::format("SM clock {:.0f} MHz mean (max {:.0f}), {:.0f} W mean of a {:.0f} W limit",
                                 telemetry["sm_clock_mhz_mean"].get<double>(), max_clock,
                                 telemetry["power_w_mean"].get<double>(),
                                 telemetry["power_limit_w_mean"].get<double>());
  const double capped = telemetry.value("power_capped_share", 0.0);
  const double thermal = telemetry.value("thermal_limited_share", 0.0);
  if (capped > 0) text += fmt::format(", clocks held by the power cap in {:.0f}% of samples", 100 * capped);
  if (thermal > 0) text += fmt::format(", by thermal limits in {:.0f}%", 100 * thermal);
  if (telemetry.contains("energy_j_per_step"))
    text += fmt::format("; {:.2f} J per step (all GPUs)", telemetry["energy_j_per_step"].get<double>());
  return text;
}

}  // namespace dpbench
