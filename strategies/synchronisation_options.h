// The synchronisation options a strategy may take (--all_reduce_spec, --bucket_cap_mb, ...), each
// described once, by one record: its field of StrategyOptions, its flag (name, value hint, help;
// its default is the field's initialiser), the values it takes (a range, or choices), the value a
// result records under its flag name, and the words a label uses for it. The command line's flag
// table, its parsing and range checks (cli/strategy_flags_validation.cpp), --help, the recorded
// config, the labels and `predict` all read these records; strategy entries (strategy_registry.h)
// name the ones they take. Adding an option: its field in StrategyOptions, its record in
// synchronisation_options.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "strategies/strategy_options.h"

namespace dpbench {

// A run's recorded options: config key -> value as text (strings as they are, numbers and
// booleans as JSON writes them).
using OptionTexts = std::map<std::string, std::string>;

// The field an option sets, by its type: a boolean, a count, a size, a number, a text (checked
// against its choices or by its own parser) or an enumeration (its choices' names in its order).
// An option of a new enumeration adds its type here.
using OptionMember = std::variant<bool StrategyOptions::*, int StrategyOptions::*, int64_t StrategyOptions::*,
                                  double StrategyOptions::*, std::string StrategyOptions::*,
                                  TransferWidth StrategyOptions::*, ReducePrecision StrategyOptions::*>;

// The values a number option takes, and the words that refuse the others: a malformed text gets
// "not an integer; accepted: <accepted>" (or "not a number"), a value under the minimum `below`,
// one over the maximum `above`.
struct OptionRange {
  double minimum = 0;
  double maximum = std::numeric_limits<double>::infinity();
  std::string accepted;
  std::string below;
  std::string above;

  std::string why_not(double value) const;  // "" inside the range (NaN is outside)
};

struct SynchronisationOption {
  std::string flag;  // the command-line name and the result's config key
  OptionMember member;
  std::string value_hint;  // --help's "N", "X", "SPEC"; a choice's and a boolean's follow from them
  std::string help;        // --help's description; the strategies that take it are added to it
  // What the strategies that take it do with it, for the message that refuses it elsewhere:
  // "only --variable_update=replicated <purpose>".
  std::string purpose;
  OptionRange range;                 // an integer's or a number's
  std::vector<std::string> choices;  // an enumeration's names (in its order), or a text's accepted values
  std::string choice_kind;           // "unknown <choice_kind>; accepted: ..." for any other text
  // A text option with a grammar of its own (the all-reduce spec): its canonical form, or a
  // ConfigError naming the flag; an empty text means the default (as tf_cnn_benchmarks' unset spec did).
  std::function<std::string(const std::string& text)> canonical;
  // Where the result records something else than the field as it is (the spec a strategy resolved).
  std::function<nlohmann::json(const StrategyOptions&)> recorded_as;
  // Words for a strategy label, given all of the run's recorded options (some read their
  // neighbours: a bucket size means nothing once the buffer is repacked). `every_option`: the
  // console's full description; otherwise only a value that differs from the default. "" says
  // nothing.
  std::function<std::string(const OptionTexts& options, bool every_option)> label;

  bool is_boolean() const { return std::holds_alternative<bool StrategyOptions::*>(member); }
  // The value the result records, from the resolved run (an enumeration by its choice's name).
  nlohmann::json recorded(const StrategyOptions& options) const;
  std::string default_text() const;  // what a run with every default records
  // The default as the command line would spell it (25, not 25.0), for the flag table and --help.
  std::string default_flag_text() const;
  // --help's value hint: "gpu|cpu" for choices, "BOOL" for a boolean, else value_hint.
  std::string hint() const;
};

// Every option, in the order labels, report keys and --help list them.
const std::vector<SynchronisationOption>& synchronisation_options();
const SynchronisationOption* find_synchronisation_option(const std::string& flag);
// The record of `flag`; throws std::logic_error where there is none (a name in code, not input).
const SynchronisationOption& synchronisation_option(const std::string& flag);

// A JSON value as OptionTexts hold it: a string as it is, anything else as JSON writes it.
std::string option_text(const nlohmann::json& value);

}  // namespace dpbench
