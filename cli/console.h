// Console output of a run: the resolved-configuration header, tf_cnn_benchmarks-style progress
// lines (step, items/s, +/-, jitter, loss) and the closing summary.
#pragma once

#include <string>
#include <vector>

#include "cli/run_config.h"
#include "engine/backend/device.h"
#include "engine/training/runner.h"
#include "reports/result.h"

namespace dpbench {

std::string format_run_header(const RunConfig& config, const std::string& unit,
                              int64_t num_parameters, const std::vector<DeviceDescription>& devices);
// One progress line; rates are per-step (items_per_step / step time), as tf_cnn_benchmarks.
std::string format_progress_line(const ProgressSnapshot& snapshot, int64_t items_per_step,
                                 const std::string& unit);
std::string format_summary(const Result& result);

}  // namespace dpbench
