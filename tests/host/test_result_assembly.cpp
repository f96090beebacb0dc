// assemble_result: a run's measurements in, its Result out, checked against hand-computed values
// (the step times are chosen so that every rate is exact).
#include <catch2/catch.hpp>

#include "reports/result_assembly.h"

using dpbench::Precision;
using dpbench::ResultInputs;

namespace {

// Two warm-up steps far slower than the four measured ones, 100 items per step.
ResultInputs four_measured_steps() {
  ResultInputs run;
  run.unit = "images";
  run.items_per_step = 100;
  run.num_devices = 2;
  run.global_batch_size = 100;
  run.environment.backend = "reference";
  run.measured.step_time_ms = {1000, 1000, 10, 20, 10, 20};
  run.measured.step_loss = {2.5, 2.4, 2.3, 2.2, 2.1, 2.0};
  run.measured.warmup_steps = 2;
  run.measured.total_time_s = 0.08;
  return run;
}

}  // namespace

TEST_CASE("result: items per second is measured items over total time, warm-up excluded", "[result_assembly]") {
  const dpbench::Result result = dpbench::assemble_result(four_measured_steps());
  const dpbench::Summary& summary = result.summary;
  CHECK(summary.unit == "images/s");
  CHECK(summary.measured_steps == 4);
  CHECK(summary.warmup_steps == 2);
  CHECK(summary.items_per_step == 100);
  CHECK(summary.items_per_sec == Approx(400 / 0.08));
  CHECK(summary.final_loss == 2.0);
  REQUIRE(result.steps.size() == 6);
  CHECK(result.steps[1].warmup);
  CHECK_FALSE(result.steps[2].warmup);
  CHECK(result.steps[5].loss == 2.0);
}

TEST_CASE("result: step statistics and jitter cover the measured steps only", "[result_assembly]") {
  const dpbench::Summary summary = dpbench::assemble_result(four_measured_steps()).summary;
  REQUIRE(summary.step_time_ms.has_value());
  CHECK(summary.step_time_ms->count == 4);
  CHECK(summary.step_time_ms->mean == Approx(15));
  CHECK(summary.step_time_ms->max == Approx(20));
  REQUIRE(summary.items_per_sec_per_step.has_value());
  CHECK(summary.items_per_sec_per_step->min == Approx(5000));   // 100 items in 20 ms
  CHECK(summary.items_per_sec_per_step->max == Approx(10000));  // 100 items in 10 ms
  REQUIRE(summary.jitter.has_value());
  CHECK(*summary.jitter == Approx(1.4826 * 2500));  // every rate lies 2500 from the median
}

TEST_CASE("result: untimed trailing steps are recorded but not measured", "[result_assembly]") {
  ResultInputs run = four_measured_steps();
  run.measured.trailing_steps = 2;
  run.measured.total_time_s = 0.03;
  const dpbench::Result result = dpbench::assemble_result(run);
  CHECK(result.summary.measured_steps == 2);
  CHECK(result.summary.items_per_sec == Approx(200 / 0.03));
  CHECK(result.summary.step_time_ms->mean == Approx(15));
  CHECK(result.steps[4].after_measurement);
  CHECK_FALSE(result.steps[3].after_measurement);
}

TEST_CASE("result: what was not measured stays absent", "[result_assembly]") {
  ResultInputs run = four_measured_steps();
  run.measured.warmup_steps = 5;  // one measured step: no distribution from a single sample
  const dpbench::Result result = dpbench::assemble_result(run);
  CHECK(result.summary.measured_steps == 1);
  CHECK_FALSE(result.summary.step_time_ms.has_value());
  CHECK_FALSE(result.summary.items_per_sec_per_step.has_value());
  CHECK_FALSE(result.summary.jitter.has_value());
  CHECK_FALSE(result.summary.kernel_launches_per_step.has_value());
  CHECK(result.summary.loss_scaling == "none");
  CHECK_FALSE(result.summary.data.contains("wait_ms_per_step"));
  CHECK_FALSE(result.summary.data.contains("epochs"));
  CHECK_FALSE(result.steps[5].items.has_value());
  CHECK_FALSE(result.steps[5].data_wait_ms.has_value());
}

TEST_CASE("result: a host feed counts each batch's own items and its waits", "[result_assembly]") {
  ResultInputs run = four_measured_steps();
  run.measured.step_items = {1, 1, 90, 100, 101, 110};
  run.measured.data_wait_ms = {0, 0, 1, 2, 1, 4};
  run.measured.host_wait_s = 0.5;
  run.data = {{"feed", "host_prefetch"}};
  const dpbench::Result result = dpbench::assemble_result(run);
  const dpbench::Summary& summary = result.summary;
  CHECK(summary.items_per_sec == Approx(401 / 0.08));
  CHECK(summary.items_per_step == 100);  // 401 / 4, rounded
  CHECK(summary.items_per_sec_per_step->max == Approx(10100));  // 101 items in 10 ms
  CHECK(summary.data["feed"] == "host_prefetch");
  CHECK(summary.data["wait_ms_per_step"].get<double>() == Approx(2));
  CHECK(summary.data["wait_share_of_step_time"].get<double>() == Approx(8.0 / 60));
  CHECK(summary.data["host_wait_s"].get<double>() == 0.5);
  CHECK(result.steps[3].items == 100);
  CHECK(result.steps[5].data_wait_ms == 4.0);
}

TEST_CASE("result: epochs are listed with the timed ones marked", "[result_assembly]") {
  ResultInputs run = four_measured_steps();
  run.measured.epoch_time_s = {1.0, 2.0, 4.0};
  run.timed_epoch_first = 1;
  run.timed_epoch_last = 2;
  const nlohmann::json data = dpbench::assemble_result(run).summary.data;
  REQUIRE(data["epochs"].size() == 3);
  CHECK_FALSE(data["epochs"][0]["timed"].get<bool>());
  CHECK(data["epochs"][2]["timed"].get<bool>());
  CHECK(data["timed_epochs_time_s"].get<double>() == 6.0);
}

TEST_CASE("result: the arithmetic named is the one the backend ran", "[result_assembly]") {
  ResultInputs run = four_measured_steps();
  run.precision = Precision::tf32;
  CHECK(dpbench::assemble_result(run).summary.math == "fp32");  // the reference backend has no TF32
  run.environment.backend = "cuda";
  CHECK(dpbench::assemble_result(run).summary.math == "tf32");
  run.precision = Precision::fp16;
  run.automatic_loss_scale = true;
  run.measured.final_loss_scale = 1024;
  const dpbench::Summary summary = dpbench::assemble_result(run).summary;
  CHECK(summary.math == "fp16");
  CHECK(summary.loss_scaling == "automatic");
  CHECK(summary.final_loss_scale == 1024);
}

TEST_CASE("result: identity, environment and flags are carried over", "[result_assembly]") {
  ResultInputs run = four_measured_steps();
  run.tool_version = "1.2.3";
  run.git_sha = "abc";
  run.environment.hostname = "node7";
  run.config = {{"model", "trivial"}};
  run.measured.param_norm = 3.5;
  run.measured.num_parameters = 42;
  run.measured.kernels_per_step = 17;
  const dpbench::Result result = dpbench::assemble_result(run);
  CHECK(result.tool_version == "1.2.3");
  CHECK(result.git_sha == "abc");
  CHECK(result.environment.hostname == "node7");
  CHECK(result.config["model"] == "trivial");
  CHECK(result.summary.param_norm == 3.5);
  CHECK(result.summary.num_parameters == 42);
  CHECK(result.summary.kernel_launches_per_step == 17);
  CHECK(result.summary.num_devices == 2);
  CHECK(result.summary.global_batch_size == 100);
}
