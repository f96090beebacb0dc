// The strategies' table. Planned strategies are listed (implemented = false) so that asking for one
// gives "not implemented yet" rather than "unknown strategy".
#include "strategies/strategy_registry.h"

#include "strategies/independent.h"

namespace dpbench {

const std::vector<StrategyEntry>& strategy_registry() {
  static const std::vector<StrategyEntry> entries = {
      {"independent", "every replica updates from its own gradients; nothing is exchanged", true,
       [](const RunConfig&) { return std::make_unique<IndependentStrategy>(); }},
      {"parameter_server", "one master copy on the GPUs or the CPU", true, nullptr},
      {"replicated", "every device holds a copy; gradients are all-reduced", true, nullptr},
      {"distributed_all_reduce", "one process per GPU over MPI + NCCL", false, nullptr},
      {"distributed_replicated", "parameter server across processes over MPI + NCCL", false, nullptr},
      {"horovod", "spelling of distributed_all_reduce", false, nullptr},
  };
  return entries;
}

const StrategyEntry* find_strategy(const std::string& name) {
  for (const StrategyEntry& entry : strategy_registry())
    if (entry.name == name) return &entry;
  return nullptr;
}

}  // namespace dpbench
