// `dpbench strategies`: the strategies' descriptions (strategies/strategy_registry.h) for people
// (a list), for programs (--format=json) and for scripts/sweep.sh (--sweep_token=TOKEN: the flags
// a token stands for), and the same descriptions as the reports need them.
#pragma once

#include <string>
#include <vector>

#include "cli/flag_reader.h"
#include "reports/strategy_catalog.h"

namespace dpbench {

// `dpbench strategies`'s flags: what it reads, what --help lists, what shell completion offers.
FlagTable strategies_flag_table();

// `args` excludes "strategies". Throws ConfigError with one line for a bad flag or token.
void run_strategies_command(const std::vector<std::string>& args);

// The forms of the listing (--format): for people, or one JSON document for programs.
enum class ListingFormat { text, json };

// The listing `dpbench strategies` prints, in `format`.
std::string describe_strategies(ListingFormat format);
// One line: the token's process layout (one_process | one_process_per_gpu |
// one_process_or_per_gpu), then its flags, separated by tabs.
std::string resolve_sweep_token(const std::string& token);

// What reports know of the strategies: column order, recorded options with defaults, labels.
StrategyCatalog strategy_catalog_for_reports();

}  // namespace dpbench
