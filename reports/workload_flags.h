// Which of a result's config flags say what a run computed (its workload: the model and its
// settings, the batch, the precision, the optimizer, the data, the strategy and its options) and
// which do not: those that differ between the runs of one series by design (the GPU count, step
// counts, where the result and trace went) and those that say only how or where it executed (CUDA
// graphs, cuDNN's autotuning, the data's folder). `report` notes every difference but the first
// kind; `compare` and `predict` refuse to put runs that differ in their workload side by side,
// naming the flags.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "reports/result.h"

namespace dpbench {

enum class FlagRole { varies_by_design, execution, workload };

// `strong_scaling`: the batch per GPU (batch_size) follows the GPU count, so it varies by design.
FlagRole config_flag_role(const std::string& flag, bool strong_scaling);

// A config value in words: strings as they are, numbers and booleans as JSON writes them.
std::string config_value_text(const nlohmann::json& value);
// The value of `config`'s flag `name` in words; "" where it records none (or null).
std::string config_text(const nlohmann::json& config, const char* name);

// Flag -> the values the runs recorded for it (config_value_text). A flag a run does not record
// (one an older dpbench did not have, or one its model or strategy does not take) adds nothing.
using FlagValues = std::map<std::string, std::set<std::string>>;

// Adds `config`'s workload flags (config_flag_role), but those in `left_out`, to `values`.
void add_workload_values(const nlohmann::json& config, bool strong_scaling, const std::set<std::string>& left_out,
                         FlagValues* values);

// Named groups of runs ("BASE", "NEW"): every flag recorded with more than one value over all of
// them, as "num_units (BASE 8; NEW 256)" (a group's values in order, ", " between them), in flag
// order; none where the runs agree. Values escaped for printing (escaped_value).
std::vector<std::string> workload_differences(const std::vector<std::pair<std::string, FlagValues>>& groups);

}  // namespace dpbench
