// The seam between reading the command line (flags.cpp, cli/flag_reader.h) and checking it
// (flags_validation.cpp): flag texts in, a resolved RunConfig out. Internal to cli/.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/run_config.h"

namespace dpbench {

// Texts rather than typed values, so every malformed value gets our own one-line message naming
// the flag, the value and what is accepted.
struct GivenFlags {
  std::map<std::string, std::string> texts;  // as given, or the flag's default where it has one
  std::set<std::string> given;               // names that appeared on the command line

  bool was_given(const std::string& name) const { return given.count(name) > 0; }
  // Empty for a flag that was not given and has no fixed default (e.g. --batch_size).
  std::string text(const std::string& name) const {
    auto found = texts.find(name);
    return found == texts.end() ? std::string() : found->second;
  }
};

// The names of the run flags that take one of a fixed few: validation accepts exactly these, and
// the flag table lists them as the flags' choices (shell completion offers them).
inline const std::vector<std::string> kEncoderTypeNames = {"cudnn_lstm", "dynamic", "uni", "bi", "transformer"};
inline const std::vector<std::string> kLstmAlgorithmNames = {"fastest", "standard", "persist_static",
                                                             "persist_static_small_h", "own_persistent"};
inline const std::vector<std::string> kDataSetNames = {"cifar10", "ptb", "parallel_text", "tokens"};

// The reference backend's host stand-in devices are threads; more than this only slows CI down.
constexpr int kMaxReferenceDevices = 64;

// Checks every flag and fills in the defaults that depend on others (model, device count).
// Throws ConfigError with one line naming the flag, the value and what is accepted.
RunConfig resolve_run_config(const GivenFlags& flags, const DeviceInventory& inventory,
                             bool* fell_back_to_reference);

struct ModelEntry;
// Steps of resolve_run_config that live in their own files, in the order it calls them.
// strategy_flags_validation.cpp: --variable_update (after the devices and the batch are known).
void resolve_strategy(const GivenFlags& flags, RunConfig* config);
// strategy_flags_validation.cpp: --all_reduce_spec, --local_parameter_device and the exchange
// options (after resolve_strategy and the numerics).
void resolve_exchange(const GivenFlags& flags, const ModelEntry& model, RunConfig* config);
// data_flags_validation.cpp: the data set and its feeding (after the measurement flags).
void resolve_data(const GivenFlags& flags, RunConfig* config);

struct SynchronisationOption;
// strategy_flags_validation.cpp: one synchronisation option's text, parsed and checked as its
// record says (range or choices, in the record's words), set in `options`. Throws ConfigError
// "--flag=value: why". `predict` checks its --bucket_cap_mb with it too.
void parse_synchronisation_option(const SynchronisationOption& option, const std::string& text, StrategyOptions* options);
// The option's field back at StrategyOptions' initialiser.
void reset_synchronisation_option(const SynchronisationOption& option, StrategyOptions* options);

}  // namespace dpbench
