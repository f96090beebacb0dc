// What reports know of the strategies, handed to them by the caller (the CLI fills it from the
// strategies' descriptions, strategies/strategy_registry.h), so that reports name no strategy
// themselves: the column order of comparison tables, the options each strategy records with the
// value a result written before an option existed meant, and the label of a strategy with its
// options.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dpbench {

struct StrategyCatalog {
  struct Option {
    std::string key;           // the config key
    std::string default_text;  // its value where a result lacks the key
  };
  struct Entry {
    std::string name;
    std::vector<Option> options;  // the keys it records
    // It runs as one process driving every GPU or as one process per GPU (fully_sharded): the
    // two are series of their own, since the launch changes what a step costs.
    bool runs_either_way = false;
  };
  std::vector<Entry> strategies;         // in the column order of comparison tables
  std::vector<std::string> option_keys;  // every option, in the order keys list them
  // "replicated (nccl, bucket 10 MB)": only what differs from the defaults.
  std::function<std::string(const std::string& strategy, const std::map<std::string, std::string>& options)> label;

  const Entry* find(const std::string& name) const {
    for (const Entry& entry : strategies)
      if (entry.name == name) return &entry;
    return nullptr;
  }
  // Known strategies in their order, then any other (a newer build's) after them.
  int column_rank(const std::string& name) const {
    for (size_t i = 0; i < strategies.size(); ++i)
      if (strategies[i].name == name) return static_cast<int>(i);
    return static_cast<int>(strategies.size());
  }
};

}  // namespace dpbench
