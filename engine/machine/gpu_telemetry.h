// GPU telemetry beside a run: a host thread reads every GPU's SM clock, power draw, temperature,
// energy counter and the reasons its clocks are held back, through NVML (loaded at run time, so
// dpbench needs no NVML to build or to run on the reference backend). A GPU at its power limit
// lowers its clocks, and then whatever else draws power (an exchange's kernels and NVLink
// traffic) slows the compute: a result says whether that happened, and what a step cost in joules.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace dpbench {

using TelemetryClock = std::chrono::steady_clock;

// Bits of NVML's clock event (throttle) reasons that dpbench reports.
constexpr uint64_t kClockLimitPowerCap = 0x4;                  // software power cap
constexpr uint64_t kClockLimitHardwareSlowdown = 0x8 | 0x80;   // hardware slowdown, power brake
constexpr uint64_t kClockLimitThermal = 0x20 | 0x40;           // software and hardware thermal slowdown

struct TelemetrySample {
  TelemetryClock::time_point at;
  int device = 0;                // position in the list the telemetry was started with
  double sm_clock_mhz = 0;
  double power_w = 0;
  double temperature_c = 0;
  uint64_t clock_limit_reasons = 0;
  double energy_j = -1;          // the GPU's energy counter since driver load; < 0: not supported
  double memory_used_bytes = -1;  // the GPU's memory in use, every process's; < 0: not known
};

// What does not change during a run, per GPU.
struct TelemetryDevice {
  std::string pci_bus_id;
  double max_sm_clock_mhz = 0;
  double power_limit_w = 0;
  // Its NVLinks: how many are up (-1: not known) and the host's GPUs it reaches over NVLink
  // (directly or through NVSwitches), by PCI bus id.
  int nvlinks_active = -1;
  std::vector<std::string> nvlink_peers;
};

// The measured window's telemetry as the result's summary.gpu_telemetry (README, "Result JSON"):
// per GPU the SM clock (mean, min, max), power (mean, max, limit), hottest temperature, the share
// of samples whose clocks the power cap, thermal limits or a hardware slowdown held back, the most
// memory in use, its NVLinks and NVLink peers, and the energy used; in all, joules per step and items per joule. Samples outside [from, to] are
// ignored; energy comes from the counter's rate between the window's first and last sample.
nlohmann::json summarize_telemetry(const std::vector<TelemetryDevice>& devices,
                                   const std::vector<TelemetrySample>& samples, TelemetryClock::time_point from,
                                   TelemetryClock::time_point to, int64_t steps, double items,
                                   std::chrono::milliseconds period);

class GpuTelemetry {
 public:
  // Starts sampling the GPUs with these PCI bus ids every `period`. Never throws: where NVML is
  // missing or does not know a GPU, available() is false and unavailable_reason() says why.
  GpuTelemetry(const std::vector<std::string>& pci_bus_ids, std::chrono::milliseconds period);
  ~GpuTelemetry();  // stops the sampling thread
  GpuTelemetry(const GpuTelemetry&) = delete;
  GpuTelemetry& operator=(const GpuTelemetry&) = delete;

  bool available() const { return available_; }
  const std::string& unavailable_reason() const { return reason_; }
  // summarize_telemetry over what was sampled so far, or {"available": false, "reason": ...}.
  nlohmann::json summarize(TelemetryClock::time_point from, TelemetryClock::time_point to, int64_t steps,
                           double items) const;

 private:
  struct Nvml;
  void sample_loop();

  std::unique_ptr<Nvml> nvml_;
  std::vector<TelemetryDevice> devices_;
  std::chrono::milliseconds period_;
  bool available_ = false;
  std::string reason_;
  mutable std::mutex mutex_;
  std::vector<TelemetrySample> samples_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One console line for a summary (empty where telemetry was unavailable).
std::string describe_telemetry(const nlohmann::json& telemetry);

}  // namespace dpbench
