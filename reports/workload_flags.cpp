// What defines a run's workload among its config flags (see workload_flags.h).
#include "reports/workload_flags.h"

#include "engine/machine/text_content.h"

namespace dpbench {

FlagRole config_flag_role(const std::string& flag, bool strong_scaling) {
  // Spellings whose resolved meaning is recorded elsewhere count as varying too (use_fp16 is
  // precision=fp16; independent_replica is variable_update=independent), and so does what
  // records a run without changing it.
  static const std::set<std::string> by_design = {"num_gpus",     "gpu_indices", "result_file",
                                                  "display_every", "num_batches", "num_warmup_batches",
                                                  "profile_step", "device",      "seed",
                                                  "use_fp16",     "independent_replica", "trace_file",
                                                  "trace_steps",  "trace_format", "rendezvous_port"};
  // The same arithmetic on the same data, run another way or read from another folder (the
  // vocabulary loss in chunks: the same rows, the logits held fewer at a time;
  // activation_checkpointing recomputes with the same bits).
  static const std::set<std::string> execution = {"cuda_graph",   "cudnn_benchmark",  "deterministic",
                                                  "activation_checkpointing",
                                                  "nvtx",         "collective_timeout", "peak_tflops", "device_memory",
                                                  "data_dir",     "vocab_file",       "train_prefix",
                                                  "vocab_prefix", "datasets_num_private_threads", "loss_chunk_rows"};
  if (by_design.count(flag) > 0 || (strong_scaling && flag == "batch_size")) return FlagRole::varies_by_design;
  if (execution.count(flag) > 0) return FlagRole::execution;
  return FlagRole::workload;
}

std::string config_value_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string config_text(const nlohmann::json& config, const char* name) {
  if (!config.is_object()) return "";
  const auto found = config.find(name);
  return found == config.end() || found->is_null() ? "" : config_value_text(*found);
}

void add_workload_values(const nlohmann::json& config, bool strong_scaling, const std::set<std::string>& left_out,
                         FlagValues* values) {
  if (!config.is_object()) return;
  for (const auto& [flag, value] : config.items())
    if (config_flag_role(flag, strong_scaling) == FlagRole::workload && left_out.count(flag) == 0)
      (*values)[flag].insert(config_value_text(value));
}

std::vector<std::string> workload_differences(const std::vector<std::pair<std::string, FlagValues>>& groups) {
  std::set<std::string> flags;
  for (const auto& group : groups)
    for (const auto& entry : group.second) flags.insert(entry.first);
  std::vector<std::string> differences;
  for (const std::string& flag : flags) {
    std::set<std::string> all;
    std::string by_group;
    for (const auto& [name, values] : groups) {
      const auto found = values.find(flag);
      if (found == values.end()) continue;
      all.insert(found->second.begin(), found->second.end());
      std::string listed;
      for (const std::string& value : found->second) listed += (listed.empty() ? "" : ", ") + escaped_value(value);
      by_group += (by_group.empty() ? "" : "; ") + name + " " + listed;
    }
    if (all.size() > 1) differences.push_back(escaped_value(flag) + " (" + by_group + ")");
  }
  return differences;
}

}  // namespace dpbench
