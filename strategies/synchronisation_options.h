// The synchronisation options a strategy may take (--all_reduce_spec, --bucket_cap_mb, ...), each
// described once: the value a result records under its flag name, and the words a label uses for
// it. Strategy entries (strategy_registry.h) name the ones they take; the command line parses and
// range-checks their texts (cli/strategy_flags_validation.cpp).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "strategies/strategy_options.h"

namespace dpbench {

// A run's recorded options: config key -> value as text (strings as they are, numbers and
// booleans as JSON writes them).
using OptionTexts = std::map<std::string, std::string>;

struct SynchronisationOption {
  std::string flag;  // the command-line name and the result's config key
  // What the strategies that take it do with it, for the message that refuses it elsewhere:
  // "only --variable_update=replicated <purpose>".
  std::string purpose;
  // The value the result records, from the resolved run.
  std::function<nlohmann::json(const StrategyOptions&)> recorded;
  // Words for a strategy label, given all of the run's recorded options (some read their
  // neighbours: a bucket size means nothing once the buffer is repacked). `every_option`: the
  // console's full description; otherwise only a value that differs from the default. "" says
  // nothing.
  std::function<std::string(const OptionTexts& options, bool every_option)> label;

  std::string default_text() const;  // what a run with every default records
};

// Every option, in the order labels and report keys list them.
const std::vector<SynchronisationOption>& synchronisation_options();
const SynchronisationOption* find_synchronisation_option(const std::string& flag);

// A JSON value as OptionTexts hold it: a string as it is, anything else as JSON writes it.
std::string option_text(const nlohmann::json& value);

}  // namespace dpbench
