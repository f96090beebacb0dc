// GPU telemetry's summary on made-up samples: the measured window, clock and power statistics,
// the shares of samples whose clocks a limit held back, and energy from the counter's rate.
#include <catch2/catch.hpp>

#include "engine/machine/gpu_telemetry.h"

namespace dpbench {
namespace {

TelemetrySample sample_at(TelemetryClock::time_point start, int ms, int device, double clock, double power,
                          uint64_t reasons, double energy_j) {
  TelemetrySample sample;
  sample.at = start + std::chrono::milliseconds(ms);
  sample.device = device;
  sample.sm_clock_mhz = clock;
  sample.power_w = power;
  sample.temperature_c = 50 + device;
  sample.clock_limit_reasons = reasons;
  sample.energy_j = energy_j;
  return sample;
}

}  // namespace

TEST_CASE("telemetry summary: window, clocks, limits and energy per step", "[telemetry]") {
  const TelemetryClock::time_point t0 = TelemetryClock::now();
  const std::vector<TelemetryDevice> devices = {{"0000:18:00.0", 1980, 700}, {"0000:2a:00.0", 1980, 700}};
  std::vector<TelemetrySample> samples;
  // Outside the window [1000, 2000] ms: an idle reading that must not count.
  samples.push_back(sample_at(t0, 500, 0, 345, 80, 0x1, 100.0));
  // Device 0: 5 samples, 100 ms apart, at the power cap from the third on, 700 W -> 70 J per 100 ms.
  for (int i = 0; i < 5; ++i)
    samples.push_back(sample_at(t0, 1000 + 100 * i, 0, i < 2 ? 1980 : 1700, 700, i < 2 ? 0 : kClockLimitPowerCap,
                                200.0 + 70.0 * i));
  // Device 1: 3 samples 200 ms apart at 350 W, one of them thermally limited.
  for (int i = 0; i < 3; ++i)
    samples.push_back(sample_at(t0, 1100 + 200 * i, 1, 1900, 350, i == 1 ? 0x20 : 0, 50.0 + 70.0 * i));
  samples.push_back(sample_at(t0, 2500, 1, 345, 80, 0x1, 9999.0));  // after the window

  const nlohmann::json summary = summarize_telemetry(devices, samples, t0 + std::chrono::milliseconds(1000),
                                                     t0 + std::chrono::milliseconds(2000), 10, 5000.0,
                                                     std::chrono::milliseconds(100));
  REQUIRE(summary["available"] == true);
  CHECK(summary["window_s"].get<double>() == Approx(1.0));
  const nlohmann::json& first = summary["devices"][0];
  CHECK(first["samples"] == 5);
  CHECK(first["sm_clock_mhz"]["mean"].get<double>() == Approx((2 * 1980 + 3 * 1700) / 5.0));
  CHECK(first["sm_clock_mhz"]["min"] == 1700);
  CHECK(first["sm_clock_mhz"]["max"] == 1980);
  CHECK(first["power_capped_share"].get<double>() == Approx(0.6));
  CHECK(first["thermal_limited_share"].get<double>() == 0);
  // 280 J over the 0.4 s between its first and last sample: 700 W over the 1 s window.
  CHECK(first["energy_j"].get<double>() == Approx(700.0));
  const nlohmann::json& second = summary["devices"][1];
  CHECK(second["samples"] == 3);
  CHECK(second["thermal_limited_share"].get<double>() == Approx(1.0 / 3));
  CHECK(second["energy_j"].get<double>() == Approx(350.0));
  CHECK(second["temperature_c_max"] == 51);
  CHECK(summary["samples_per_device_min"] == 3);
  CHECK(summary["power_capped_share"].get<double>() == Approx(0.3));
  CHECK(summary["power_limit_w_mean"].get<double>() == Approx(700));
  CHECK(summary["energy_j"].get<double>() == Approx(1050.0));
  CHECK(summary["energy_j_per_step"].get<double>() == Approx(105.0));
  CHECK(summary["items_per_joule"].get<double>() == Approx(5000.0 / 1050.0));
  CHECK(describe_telemetry(summary) ==
        "SM clock 1856 MHz mean (max 1980), 525 W mean of a 700 W limit, clocks held by the power cap in 30% of "
        "samples, by thermal limits in 17%; 105.00 J per step (all GPUs)");
}

TEST_CASE("telemetry summary: no energy counter, or no samples in the window", "[telemetry]") {
  const TelemetryClock::time_point t0 = TelemetryClock::now();
  const std::vector<TelemetryDevice> devices = {{"0000:18:00.0", 1410, 400}};
  const std::vector<TelemetrySample> samples = {sample_at(t0, 10, 0, 1400, 300, 0, -1),
                                                sample_at(t0, 110, 0, 1400, 300, 0, -1)};
  const auto window_end = t0 + std::chrono::milliseconds(200);
  nlohmann::json summary = summarize_telemetry(devices, samples, t0, window_end, 4, 100.0, std::chrono::milliseconds(100));
  CHECK(summary["devices"][0]["samples"] == 2);
  CHECK_FALSE(summary.contains("energy_j_per_step"));
  CHECK(describe_telemetry(summary) == "SM clock 1400 MHz mean (max 1410), 300 W mean of a 400 W limit");

  summary = summarize_telemetry(devices, samples, t0 + std::chrono::milliseconds(150), window_end, 4, 100.0,
                                std::chrono::milliseconds(100));
  CHECK(summary["devices"][0]["samples"] == 0);
  CHECK(summary["samples_per_device_min"] == 0);
  CHECK_FALSE(summary.contains("sm_clock_mhz_mean"));
  CHECK(describe_telemetry(summary).empty());
}

TEST_CASE("telemetry without GPUs says why, and describes nothing", "[telemetry]") {
  GpuTelemetry none({}, std::chrono::milliseconds(100));
  CHECK_FALSE(none.available());
  const nlohmann::json summary = none.summarize(TelemetryClock::now(), TelemetryClock::now(), 1, 1.0);
  CHECK(summary == nlohmann::json({{"available", false}, {"reason", "no GPUs (reference backend)"}}));
  CHECK(describe_telemetry(summary).empty());
  GpuTelemetry reference({"", ""}, std::chrono::milliseconds(100));
  CHECK_FALSE(reference.available());
}

}  // namespace dpbench
