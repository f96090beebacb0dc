// Runs stopped early (Ctrl-C, SIGTERM) keep what they measured: every device stops after the same
// step and has trained exactly the steps of a run asked for that many; the result says it was
// interrupted and reports leave it out with a note; a stop before any measured step writes
// nothing and exits 128 + the signal.
#include <catch2/catch.hpp>

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/interrupt_signals.h"
#include "reports/report_loader.h"
#include "reports/result_json.h"
#include "tests/host/strategy_test_support.h"
#include "tests/host/test_support.h"

using namespace dpbench;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;

namespace {

struct StoppedRun {
  RunMeasurements measured;
  std::vector<std::vector<float>> parameters;  // per replica
};

// Trains `args` on reference devices; the stop is asked for once the devices have asked
// `asks_before_stop` times in all (each asks before each step).
StoppedRun train_until_stopped(const std::vector<std::string>& args, int asks_before_stop) {
  DeviceInventory inventory;
  std::vector<std::string> all = args;
  all.push_back("--device=cpu");
  RunConfig config = parse_run_flags(all, inventory).config;
  std::unique_ptr<Model> model = find_model(config.model)->create(config);
  std::unique_ptr<Strategy> strategy = find_strategy(config.variable_update)->create(config, config);
  std::vector<std::unique_ptr<Device>> devices = create_devices(config.backend, config.gpu_indices);
  RunnerSettings settings = runner_settings(config);
  std::atomic<int> asks{0};
  settings.stop_requested = [&] { return ++asks > asks_before_stop; };
  Runner runner(*model, *strategy, devices, settings);
  StoppedRun run;
  run.measured = runner.run(nullptr, nullptr);
  for (int r = 0; r < config.num_devices(); ++r) run.parameters.push_back(runner.parameters_of(r));
  return run;
}

}  // namespace

TEST_CASE("a stop request ends every device after the same step, with what was measured kept", "[interrupt]") {
  const std::vector<std::string> args = {"--model=trivial", "--num_gpus=3", "--batch_size=2",
                                         "--variable_update=replicated", "--num_warmup_batches=2"};
  std::vector<std::string> long_run = args;
  long_run.push_back("--num_batches=40");
  // Three devices ask before each step: the request comes during the fifth step or so.
  const StoppedRun stopped = train_until_stopped(long_run, 14);
  const RunMeasurements& m = stopped.measured;
  REQUIRE(m.stopped_early);
  const int64_t steps = static_cast<int64_t>(m.step_time_ms.size());
  CHECK(steps >= 5);
  CHECK(steps < 42);
  CHECK(m.step_loss.size() == m.step_time_ms.size());
  CHECK(m.warmup_steps == 2);
  for (double ms : m.step_time_ms) CHECK(ms > 0);
  CHECK(m.total_time_s > 0);

  // The devices trained exactly the steps of a run asked for that many: the same parameters on
  // every replica, bit for bit those of the uninterrupted run.
  std::vector<std::string> exact_run = args;
  exact_run.push_back("--num_batches=" + std::to_string(steps - 2));
  const dpbench::testing::Trained exact = dpbench::testing::train(exact_run);
  for (const std::vector<float>& replica : stopped.parameters) CHECK(replica == exact.parameters[0]);
}

TEST_CASE("a stop during warm-up measures nothing", "[interrupt]") {
  const StoppedRun stopped =
      train_until_stopped({"--model=trivial", "--num_gpus=2", "--batch_size=2", "--variable_update=replicated",
                           "--num_warmup_batches=20", "--num_batches=5"},
                          4);
  CHECK(stopped.measured.stopped_early);
  CHECK(stopped.measured.step_time_ms.size() <= static_cast<size_t>(stopped.measured.warmup_steps));
  CHECK(stopped.measured.total_time_s == 0);
  CHECK(stopped.parameters[0] == stopped.parameters[1]);
}

TEST_CASE("a run without a stop request is not marked stopped", "[interrupt]") {
  const StoppedRun run = train_until_stopped({"--model=trivial", "--batch_size=2", "--num_warmup_batches=1",
                                              "--num_batches=3"},
                                             1000);
  CHECK_FALSE(run.measured.stopped_early);
  CHECK(run.measured.step_time_ms.size() == 4);
}

TEST_CASE("a signal before any measured step exits 128 + the signal and writes no result", "[interrupt]") {
  TempDir dir;
  install_interrupt_handlers(false);
  for (const auto& [signal_number, code] : {std::pair{SIGINT, 130}, std::pair{SIGTERM, 143}}) {
    const std::string out = dir.file("out.json");
    REQUIRE(raise(signal_number) == 0);  // the handler records it; the run then stops before its first step
    CHECK(interrupt_signal() == signal_number);
    CHECK(run_cli({"--device=cpu", "--model=trivial", "--batch_size=2", "--num_batches=5", "--result_file=" + out}) ==
          code);
    CHECK_FALSE(std::filesystem::exists(out));
    forget_interrupt_for_testing();
  }
  CHECK(interrupt_signal() == 0);
}

TEST_CASE("an interrupted result says so, and reports skip it with a note", "[interrupt]") {
  TempDir dir;
  const std::string complete = dir.file("complete.json"), interrupted = dir.file("interrupted.json");
  REQUIRE(run_cli({"--device=cpu", "--model=trivial", "--batch_size=2", "--num_batches=3", "--num_warmup_batches=1",
                   "--result_file=" + complete}) == 0);
  nlohmann::json document = read_json(complete);
  CHECK(document["summary"]["interrupted"] == false);
  Result result = result_from_json(document);
  CHECK_FALSE(result.summary.interrupted);
  result.summary.interrupted = true;
  result.summary.measured_steps = 2;
  write_result_atomically(result, interrupted);
  CHECK(read_json(interrupted)["summary"]["interrupted"] == true);
  CHECK(read_result_file(interrupted).summary.interrupted);

  const LoadedResults loaded = load_results({dir.path().string()});
  REQUIRE(loaded.results.size() == 1);
  CHECK(loaded.results[0].path == complete);
  REQUIRE(loaded.skipped.size() == 1);
  CHECK(loaded.skipped[0].path == interrupted);
  CHECK_THAT(loaded.skipped[0].reason, Catch::Contains("an interrupted run (stopped early, after 2 measured steps)"));

  // Results from before the field existed were never interrupted.
  document["summary"].erase("interrupted");
  CHECK_FALSE(result_from_json(document).summary.interrupted);
}
