// `dpbench run`: builds devices, model and strategy from the resolved flags, runs the benchmark,
// prints header, progress and summary, and writes the result JSON atomically.
#pragma once

#include <stdexcept>
#include <memory>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "engine/training/runner.h"
#include "reports/result.h"

namespace dpbench {

// The optimizer and the runner's settings the resolved flags ask for.
OptimizerConfig optimizer_config(const RunConfig& config);
RunnerSettings runner_settings(const RunConfig& config);
// The resolved flags' device controls (cuDNN search, --deterministic, the LSTM algorithm, TF32
// under 16-bit precision, --device_memory) set on every device; every path that builds devices
// for a run (the run itself, tests training in-process) goes through it.
void configure_devices(const RunConfig& config, const std::vector<std::unique_ptr<Device>>& devices);

// A run stopped by SIGINT or SIGTERM (cli/interrupt_signals.h) before any step was measured:
// there is nothing to keep, so no result is written.
struct RunStoppedBeforeMeasuring : std::runtime_error {
  RunStoppedBeforeMeasuring(int signal_number, const std::string& what)
      : std::runtime_error(what), signal_number(signal_number) {}
  int signal_number;
};

// Runs and returns the result (also written to config.result_file unless that is empty). A run
// stopped early by a signal returns (and writes) what it measured, marked interrupted, or throws
// RunStoppedBeforeMeasuring when that is nothing.
Result run_benchmark(const ParsedRunFlags& flags);

}  // namespace dpbench
