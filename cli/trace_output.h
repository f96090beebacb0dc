// --trace_file: the run's traced steps, written after the run in the --trace_format asked for:
// perfetto, every rank's timeline in one Chrome Trace Event JSON document written by rank 0
// (reports/chrome_trace.h); hta, a folder of one trace per device, each written by the process
// that drove it, as Holistic Trace Analysis reads them (reports/hta_trace.h).
#pragma once

#include <string>
#include <vector>

#include "cli/flag_parsing.h"
#include "cli/run_config.h"
#include "engine/backend/step_trace.h"

namespace dpbench {

const std::vector<Choice<TraceFormat>>& trace_format_choices();
const char* trace_format_name(TraceFormat format);

// Before the run, so that a long measurement never ends in an unwritable trace: perfetto, rank 0's
// file (check_output_path); hta, the folder (made if missing, in an existing parent) and the files
// this process will write there. The folder must hold no other trace, nor the result
// (`result_path`): HTA reads every .json and .gz file in it as a rank's. Throws ConfigError.
void check_trace_destination(const RunConfig& config, const std::string& result_path);

// Every rank calls it (under mpirun the ranks align their clocks; with perfetto they also gather
// their events for rank 0). Returns the line that says what was written (other ranks: empty).
std::string write_run_trace(const RunConfig& config, const std::vector<DeviceTimeline>& timelines,
                            int devices_per_rank, int64_t warmup_steps);

}  // namespace dpbench
