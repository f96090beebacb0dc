// The strategies' table: every --variable_update value, whether it is built yet, and its factory.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/run_config.h"
#include "engine/strategy.h"

namespace dpbench {

struct StrategyEntry {
  std::string name;
  std::string description;
  bool implemented = false;
  std::function<std::unique_ptr<Strategy>(const RunConfig&)> create;  // empty when not implemented
};

const std::vector<StrategyEntry>& strategy_registry();
const StrategyEntry* find_strategy(const std::string& name);

}  // namespace dpbench
