// Fixtures for the `dpbench report` tests: realistic result files (config from the real flag
// parser, summary and step records as a run writes them) with chosen throughputs, so the expected
// tables can be worked out by hand.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cli/flags.h"
#include "cli/strategies_command.h"
#include "reports/backward_timeline.h"
#include "reports/report_loader.h"
#include "reports/report_series.h"
#include "reports/result_json.h"
#include "reports/statistics.h"
#include "tests/host/test_support.h"

namespace dpbench::testing {

struct FixtureRun {
  std::vector<std::string> flags;  // run flags besides --num_gpus, e.g. {"--model=resnet50", "--variable_update=replicated"}
  int gpus = 1;
  double items_per_sec = 1000;
  std::string unit = "images/s";
  std::string backend = "cuda";  // "cuda": every device an H100; "reference": --device=cpu
  std::string gpu_name = "NVIDIA H100 80GB HBM3";
  int measured_steps = 100;
  int warmup_steps = 10;
  double jitter = 10;
};

// A BASE timeline for predict: 5 traced steps of 10 ms (forward 3, backward 5, then 2 ms to the
// step's end), the given tensors produced as `produced` says.
inline BackwardTimeline ten_ms_step_timeline(std::vector<int64_t> tensor_elements, std::vector<ProducedRange> produced) {
  BackwardTimeline timeline;
  timeline.traced_steps = 5;
  timeline.step_ms = 10;
  timeline.forward_ms = 3;
  timeline.backward_ms = 5;
  timeline.after_backward_ms = 2;
  timeline.tensor_elements = std::move(tensor_elements);
  timeline.produced = std::move(produced);
  return timeline;
}

// A run with `flags` on `gpus` GPUs at `speed` items/s, the rest as FixtureRun's defaults.
inline FixtureRun run_of(std::vector<std::string> flags, int gpus, double speed) {
  FixtureRun run;
  run.flags = std::move(flags);
  run.gpus = gpus;
  run.items_per_sec = speed;
  return run;
}

// A replicated resnet50 run on `gpus` GPUs at `speed` images/s.
inline FixtureRun replicated_run(int gpus, double speed) {
  return run_of({"--model=resnet50", "--variable_update=replicated"}, gpus, speed);
}

// The result `run` describes: config through parse_run_flags + config_to_json (8 GPUs present),
// total time = items / speed, steps at the mean step time with the warm-up ones 3x slower.
inline Result make_fixture_result(const FixtureRun& run) {
  std::vector<std::string> args = run.flags;
  args.push_back("--num_gpus=" + std::to_string(run.gpus));
  args.push_back("--num_batches=" + std::to_string(run.measured_steps));
  args.push_back("--num_warmup_batches=" + std::to_string(run.warmup_steps));
  args.push_back("--result_file=");
  if (run.backend == "reference") args.push_back("--device=cpu");
  const RunConfig config = parse_run_flags(args, DeviceInventory{8, ""}).config;

  Result result;
  result.tool_version = "0.1.0";
  result.git_sha = "0123456789ab";
  result.environment.hostname = "node-1";
  result.environment.date = "2025-01-01T00:00:00Z";
  result.environment.backend = run.backend;
  for (int i = 0; i < run.gpus; ++i) {
    const std::string name = run.backend == "reference" ? "reference-cpu-" + std::to_string(i) : run.gpu_name;
    result.environment.devices.push_back({i, name, 85899345920ull, run.backend == "reference" ? "" : "9.0"});
  }
  result.config = config_to_json(config);

  Summary& summary = result.summary;
  summary.unit = run.unit;
  summary.num_devices = run.gpus;
  summary.global_batch_size = config.global_batch_size();
  summary.items_per_step = summary.global_batch_size;
  summary.measured_steps = run.measured_steps;
  summary.warmup_steps = run.warmup_steps;
  summary.items_per_sec = run.items_per_sec;
  summary.total_time_s = static_cast<double>(summary.items_per_step) * run.measured_steps / run.items_per_sec;
  summary.math = precision_name(config.precision);
  summary.jitter = run.jitter;
  const double step_ms = 1000.0 * static_cast<double>(summary.items_per_step) / run.items_per_sec;
  std::vector<double> measured_ms, rates;
  for (int step = 0; step < run.warmup_steps + run.measured_steps; ++step) {
    const bool warmup = step < run.warmup_steps;
    // Small alternating wobble, so the measured steps are not one flat line.
    const double time_ms = warmup ? 3 * step_ms : step_ms * (step % 2 == 0 ? 0.99 : 1.01);
    result.steps.push_back({step, time_ms, 2.5, warmup});
    if (!warmup) {
      measured_ms.push_back(time_ms);
      rates.push_back(summary.items_per_step / (time_ms / 1000.0));
    }
  }
  if (measured_ms.size() >= 2) {
    summary.step_time_ms = summarize(measured_ms);
    summary.items_per_sec_per_step = summarize(rates);
  }
  summary.final_loss = 2.5;
  summary.num_parameters = 25557032;
  summary.param_norm = 123.0;
  return result;
}

inline void write_fixture(const TempDir& dir, const std::string& name, const FixtureRun& run) {
  write_result_atomically(make_fixture_result(run), dir.file(name));
}

inline std::vector<std::string> flags_of(std::initializer_list<const char*> flags) {
  return std::vector<std::string>(flags.begin(), flags.end());
}

// Every occurrence of the temporary folder's path replaced by "<dir>", for exact comparisons.
inline std::string with_placeholder(std::string text, const TempDir& dir) {
  const std::string path = dir.path().string();
  for (size_t at = text.find(path); at != std::string::npos; at = text.find(path, at))
    text.replace(at, path.size(), "<dir>");
  return text;
}

// Real runs of a small series on the reference backend (trivial, replicated, batch 16 per device,
// 10 measured steps), one result per device count in `dir`: results with breakdowns and step
// records as dpbench writes them. False when a run fails.
inline bool run_reference_series(const TempDir& dir, const std::vector<int>& device_counts) {
  for (int devices : device_counts) {
    const std::string count = std::to_string(devices);
    if (run_cli({"--device=cpu", "--model=trivial", "--variable_update=replicated", "--batch_size=16",
                 "--num_gpus=" + count, "--num_batches=10", "--num_warmup_batches=2",
                 "--result_file=" + dir.file("g" + count + ".json")}) != 0)
      return false;
  }
  return true;
}

inline Report report_of(const std::vector<std::string>& paths) { return build_report(load_results(paths), strategy_catalog_for_reports()); }

}  // namespace dpbench::testing
