// `dpbench predict BASE [MEASURED...] --system FILE [--curves FILE...]`: the step time, speed,
// efficiency and exposed communication of every strategy at 1, 2, 4, ... --max_gpus GPUs,
// predicted from a 1-GPU result's summary.timeline (a run with --trace_file) on the system a
// system file describes (systems/), its collectives priced by measured comm_bench curves where
// given (reports/collective_curves.h); measured N-GPU results given after BASE are put beside
// their predictions with the error. The simulation is reports/step_prediction.h, the output
// reports/prediction_tables.h, the checks of the results read and the matching of measured runs
// to strategies cli/predict_inputs.h; this file is flags, loading, the bucket plan and output.
#pragma once

#include <string>
#include <vector>

#include "cli/flag_reader.h"
#include "cli/offline_command.h"

namespace dpbench {

struct PredictOptions {
  std::string base_path;
  std::vector<std::string> measured_paths;  // files or folders of measured N-GPU results
  std::string system_path;
  std::vector<std::string> curve_paths;  // `dpbench comm_bench --json` files
  int max_gpus = 1024;
  std::string bucket_cap_mb;  // empty: the base run's, else --bucket_cap_mb's default
  int batch_size = 0;         // the memory table's batch per device; 0: the base run's
  int num_layers = 0;         // BASE's model at this many blocks; 0: BASE's own (Note [deeper model from its blocks])
  uint64_t device_memory = 0; // what the largest batch must fit; 0: the base run's device's
  std::string output;         // empty: stdout
  std::string plot;           // SVG file; empty: none
  ReportFormat format = ReportFormat::markdown;
  bool help = false;
};

// `dpbench predict`'s flags: what it reads, what --help lists, what shell completion offers.
FlagTable predict_flag_table();

// `args` excludes "predict". Throws ConfigError with one line: an unknown flag or format, a value
// out of range, no BASE, no --system, a path (BASE, MEASURED, --system, --curves) that does not
// exist, an output that cannot be written.
PredictOptions parse_predict_flags(const std::vector<std::string>& args);
std::string predict_help_text();

// The subcommand: parse, load, predict, write. Returns 0; an unusable BASE, system file or curve
// file (or two curves of one collective and link) is a RuntimeError naming it and the fix.
int run_predict_command(const std::vector<std::string>& args);

}  // namespace dpbench
