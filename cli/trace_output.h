// --trace_file: the run's traced steps, every rank's, written by rank 0 as one Chrome Trace Event
// JSON document (reports/chrome_trace.h).
#pragma once

#include <string>
#include <vector>

#include "cli/run_config.h"
#include "engine/backend/step_trace.h"

namespace dpbench {

// Every rank calls it (under mpirun the ranks align their clocks and gather their events); rank 0
// writes config.trace_file atomically and returns the line that says so (other ranks: empty).
std::string write_run_trace(const RunConfig& config, const std::vector<DeviceTimeline>& timelines,
                            int devices_per_rank, int64_t warmup_steps);

}  // namespace dpbench
