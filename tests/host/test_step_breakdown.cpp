// summary.breakdown: where a step's time went, per device and on average, from the devices' own
// clocks; the parts add up to the wall time per step (Note [step time breakdown] in
// reports/result_assembly.cpp), here on the reference backend and, with made-up timings, in the
// assembly alone.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "reports/result_assembly.h"
#include "tests/host/test_support.h"

using namespace dpbench;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;

namespace {

const char* const kParts[] = {"data_wait_ms", "forward_ms", "backward_ms", "exposed_comm_ms", "update_ms",
                              "straggler_wait_ms", "host_gap_ms"};

double sum_of_parts(const nlohmann::json& parts) {
  double sum = 0;
  for (const char* key : kParts) sum += parts[key].get<double>();
  return sum;
}

}  // namespace

TEST_CASE("the breakdown's parts add up to the wall time per step, with made-up timings", "[breakdown]") {
  ResultInputs run;
  run.unit = "images";
  run.items_per_step = 64;
  run.num_devices = 2;
  run.measured.warmup_steps = 1;
  run.measured.step_time_ms = {50, 10, 10, 10, 10};  // measured: 10 ms each (the slowest device's)
  run.measured.step_loss = {1, 1, 1, 1, 1};
  run.measured.total_time_s = 0.044;                 // 11 ms of wall time per step: 1 ms between steps
  // Device 0: 1 + 3 + 4 + 0.5 exposed = 8.5 of its 9.5 ms step, so 1 ms of update; it ended 0.5 ms
  // before the slowest, device 1, whose 10 ms step is the step's time.
  run.measured.step_phases = {{1.0, 3.0, 4.0, 9.5, 0.5}, {0.0, 3.0, 5.0, 10.0, 1.5}};
  const Result result = assemble_result(run);
  const nlohmann::json& b = result.summary.breakdown;
  REQUIRE(b["per_device"].size() == 2);
  const nlohmann::json& first = b["per_device"][0];
  CHECK(first["data_wait_ms"] == 1.0);
  CHECK(first["forward_ms"] == 3.0);
  CHECK(first["backward_ms"] == 4.0);
  CHECK(first["exposed_comm_ms"] == 0.5);
  CHECK(first["update_ms"].get<double>() == Approx(1.0));
  CHECK(first["straggler_wait_ms"].get<double>() == Approx(0.5));
  CHECK(first["host_gap_ms"].get<double>() == Approx(1.0));
  CHECK(b["per_device"][1]["straggler_wait_ms"].get<double>() == Approx(0.0));
  CHECK(b["per_device"][1]["update_ms"].get<double>() == Approx(0.5));
  CHECK(b["wall_ms_per_step"].get<double>() == Approx(11.0));
  for (const auto& device : b["per_device"]) CHECK(sum_of_parts(device) == Approx(11.0));
  CHECK(sum_of_parts(b["ms_per_step"]) == Approx(11.0));
  CHECK(b["ms_per_step"]["forward_ms"] == 3.0);
  CHECK(b["window_s"]["forward_s"].get<double>() == Approx(0.012));  // 3 ms x 4 measured steps
}

TEST_CASE("reference runs carry a breakdown whose parts add up to the wall time per step", "[breakdown]") {
  TempDir dir;
  const std::string out = dir.file("out.json");
  struct Case {
    std::vector<std::string> flags;
    bool backward, data;
  };
  const Case cases[] = {
      {{"--num_gpus=2", "--variable_update=replicated"}, true, false},
      {{"--num_gpus=2", "--variable_update=parameter_server"}, true, false},
      {{"--forward_only"}, false, false},
      {{"--data_feed=host", "--num_gpus=2"}, true, true},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--device=cpu", "--model=trivial", "--batch_size=16", "--num_batches=12",
                                     "--num_warmup_batches=2", "--result_file=" + out};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    REQUIRE(run_cli(args) == 0);
    const nlohmann::json b = read_json(out)["summary"]["breakdown"];
    INFO(b.dump(1));
    const double wall = b["wall_ms_per_step"];
    CHECK(sum_of_parts(b["ms_per_step"]) == Approx(wall).epsilon(0.02));
    for (const auto& device : b["per_device"]) {
      CHECK(sum_of_parts(device) == Approx(wall).epsilon(0.02));
      for (const char* key : kParts) CHECK(device[key].get<double>() >= 0);
      CHECK(device["forward_ms"].get<double>() > 0);
      CHECK((device["backward_ms"].get<double>() > 0) == c.backward);
      CHECK((device["data_wait_ms"].get<double>() > 0) == c.data);
    }
  }
}
