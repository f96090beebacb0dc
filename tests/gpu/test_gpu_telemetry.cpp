// [gpu] NVML telemetry on the real GPUs: every GPU found by its PCI bus id, its clocks, power and
// limits read over a window, and a benchmark's result carrying them.
#include <catch2/catch.hpp>

#include <thread>

#include "engine/backends.h"
#include "engine/machine/gpu_telemetry.h"
#include "tests/host/test_support.h"

namespace dpbench {

TEST_CASE("[gpu] telemetry reads every GPU's SM clock, power, limit and energy through NVML", "[gpu][telemetry]") {
  const int gpus = cuda_device_count();
  REQUIRE(gpus > 0);
  std::vector<int> indices;
  for (int i = 0; i < gpus; ++i) indices.push_back(i);
  std::vector<std::unique_ptr<Device>> devices = create_devices(BackendKind::cuda, indices);
  std::vector<std::string> bus_ids;
  for (const auto& device : devices) {
    CHECK(device->description().pci_bus_id.size() >= 7);  // "0000:18:00.0"
    bus_ids.push_back(device->description().pci_bus_id);
  }
  GpuTelemetry telemetry(bus_ids, std::chrono::milliseconds(50));
  INFO(telemetry.unavailable_reason());
  REQUIRE(telemetry.available());
  const TelemetryClock::time_point from = TelemetryClock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const TelemetryClock::time_point to = TelemetryClock::now();
  const nlohmann::json summary = telemetry.summarize(from, to, 6, 600.0);
  REQUIRE(summary["devices"].size() == static_cast<size_t>(gpus));
  for (const nlohmann::json& device : summary["devices"]) {
    INFO(device.dump());
    CHECK(device["samples"].get<int>() >= 5);
    CHECK(device["max_sm_clock_mhz"].get<double>() > 100);
    CHECK(device["power_limit_w"].get<double>() > 10);
    CHECK(device["sm_clock_mhz"]["min"].get<double>() > 0);
    CHECK(device["sm_clock_mhz"]["max"].get<double>() <= device["max_sm_clock_mhz"].get<double>());
    CHECK(device["power_w"]["mean"].get<double>() > 1);
    CHECK(device["temperature_c_max"].get<double>() > 0);
  }
  // Hopper GPUs count energy: an idle GPU still draws tens of watts.
  REQUIRE(summary.contains("energy_j_per_step"));
  CHECK(summary["energy_j"].get<double>() > 0.6 * gpus);
  CHECK_THAT(describe_telemetry(summary), Catch::Contains("MHz mean") && Catch::Contains("J per step"));
}

TEST_CASE("[gpu] a GPU run's result carries the measured window's telemetry", "[gpu][telemetry]") {
  testing::TempDir dir;
  const std::string out = dir.file("result.json");
  // About a second of measured steps, so that the window holds several 100 ms samples.
  REQUIRE(testing::run_cli({"--device=gpu", "--model=resnet50", "--batch_size=32", "--num_batches=20",
                            "--num_warmup_batches=2", "--cudnn_benchmark=false", "--result_file=" + out}) == 0);
  const nlohmann::json telemetry = testing::read_json(out)["summary"]["gpu_telemetry"];
  INFO(telemetry.dump());
  REQUIRE(telemetry["available"] == true);
  REQUIRE(telemetry["devices"].size() == 1);
  CHECK(telemetry["devices"][0]["samples"].get<int>() >= 2);
  CHECK(telemetry["sm_clock_mhz_mean"].get<double>() > 100);
  CHECK(telemetry["power_w_mean"].get<double>() > 1);
  CHECK(telemetry["window_s"].get<double>() > 0);
}

}  // namespace dpbench
