// The strategies' table. Planned strategies are listed (implemented = false) so that asking for one
// gives "not implemented yet" rather than "unknown strategy".
#include "strategies/strategy_registry.h"

#include "strategies/independent.h"
#include "strategies/parameter_server.h"
#include "strategies/replicated.h"

namespace dpbench {

const std::vector<StrategyEntry>& strategy_registry() {
  static const std::vector<StrategyEntry> entries = {
      {"independent", "every replica updates from its own gradients; nothing is exchanged", true,
       [](const RunConfig&) { return std::make_unique<IndependentStrategy>(); }},
      {"parameter_server", "one master copy on the GPUs or the CPU", true,
       [](const RunConfig& config) { return std::make_unique<ParameterServerStrategy>(config); }},
      {"replicated", "every device holds a copy; gradients are all-reduced", true,
       [](const RunConfig& config) { return std::make_unique<ReplicatedStrategy>(config); }},
      // One process per GPU (mpirun): the same strategies with a communicator across the processes.
      {"distributed_all_reduce", "one process per GPU (mpirun); gradients all-reduced with NCCL", true,
       [](const RunConfig& config) { return std::make_unique<ReplicatedStrategy>(config); }},
      {"distributed_replicated", "parameter server across processes (mpirun): NCCL reduce to the owner, broadcast back",
       true, [](const RunConfig& config) { return std::make_unique<ParameterServerStrategy>(config); }},
      {"horovod", "tf_cnn_benchmarks' spelling of distributed_all_reduce", true,
       [](const RunConfig& config) { return std::make_unique<ReplicatedStrategy>(config); }},
  };
  return entries;
}

const StrategyEntry* find_strategy(const std::string& name) {
  for (const StrategyEntry& entry : strategy_registry())
    if (entry.name == name) return &entry;
  return nullptr;
}

}  // namespace dpbench
