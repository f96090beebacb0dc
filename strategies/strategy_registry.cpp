// The strategies' table. Planned strategies are listed (implemented = false) so that asking for one
// gives "not implemented yet" rather than "unknown strategy".
#include "strategies/strategy_registry.h"

#include "strategies/independent.h"
#include "strategies/parameter_server.h"
#include "strategies/replicated.h"
#include "strategies/strategy_options.h"

namespace dpbench {
namespace {

// What the strategies read of the run's flags.
StrategyOptions strategy_options_of(const RunConfig& config) {
  StrategyOptions options;
  options.all_reduce_spec = config.all_reduce_spec;
  options.local_parameter_device = config.local_parameter_device;
  options.gradient_repacking = config.gradient_repacking;
  options.bucket_cap_mb = config.bucket_cap_mb;
  options.agg_small_grads_max_bytes = config.agg_small_grads_max_bytes;
  options.agg_small_grads_max_group = config.agg_small_grads_max_group;
  options.overlap_comm = config.overlap_comm;
  options.sparse_embedding_grads = config.sparse_embedding_grads;
  options.compact_gradient_transfer = config.compact_gradient_transfer;
  options.sharded_update = config.sharded_update;
  options.num_processes = config.num_processes;
  options.process_rank = config.process_rank;
  return options;
}

}  // namespace

const std::vector<StrategyEntry>& strategy_registry() {
  static const std::vector<StrategyEntry> entries = {
      {"independent", "every replica updates from its own gradients; nothing is exchanged", true,
       [](const RunConfig&) { return std::make_unique<IndependentStrategy>(); }},
      {"parameter_server", "one master copy on the GPUs or the CPU", true,
       [](const RunConfig& config) { return std::make_unique<ParameterServerStrategy>(strategy_options_of(config)); }},
      {"replicated", "every device holds a copy; gradients are all-reduced", true,
       [](const RunConfig& config) { return std::make_unique<ReplicatedStrategy>(strategy_options_of(config)); }},
      // One process per GPU (mpirun): the same strategies with a communicator across the processes.
      {"distributed_all_reduce", "one process per GPU (mpirun); gradients all-reduced with NCCL", true,
       [](const RunConfig& config) { return std::make_unique<ReplicatedStrategy>(strategy_options_of(config)); }},
      {"distributed_replicated", "parameter server across processes (mpirun): NCCL reduce to the owner, broadcast back",
       true,
       [](const RunConfig& config) { return std::make_unique<ParameterServerStrategy>(strategy_options_of(config)); }},
      {"horovod", "tf_cnn_benchmarks' spelling of distributed_all_reduce", true,
       [](const RunConfig& config) { return std::make_unique<ReplicatedStrategy>(strategy_options_of(config)); }},
  };
  return entries;
}

const StrategyEntry* find_strategy(const std::string& name) {
  for (const StrategyEntry& entry : strategy_registry())
    if (entry.name == name) return &entry;
  return nullptr;
}

}  // namespace dpbench
