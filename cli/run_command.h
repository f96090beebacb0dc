// `dpbench run`: builds devices, model and strategy from the resolved flags, runs the benchmark,
// prints header, progress and summary, and writes the result JSON atomically.
#pragma once

#include "cli/flags.h"
#include "engine/runner.h"
#include "reports/result.h"

namespace dpbench {

// The optimizer and the runner's settings the resolved flags ask for.
OptimizerConfig optimizer_config(const RunConfig& config);
RunnerSettings runner_settings(const RunConfig& config);

// Runs and returns the result (also written to config.result_file unless that is empty).
Result run_benchmark(const ParsedRunFlags& flags);

}  // namespace dpbench
