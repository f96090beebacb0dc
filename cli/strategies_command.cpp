// `dpbench strategies` (see the header).
#include "cli/strategies_command.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/flag_parsing.h"
#include "cli/flag_reader.h"
#include "engine/errors.h"
#include "reports/text_file.h"
#include "strategies/strategy_registry.h"
#include "strategies/synchronisation_options.h"

namespace dpbench {
namespace {

const char* layout_name(ProcessLayout layout) {
  switch (layout) {
    case ProcessLayout::one_process: return "one_process";
    case ProcessLayout::one_process_per_gpu: return "one_process_per_gpu";
    case ProcessLayout::either: return "one_process_or_per_gpu";
  }
  return "?";
}

// For people: how the strategy's processes are started.
const char* layout_words(ProcessLayout layout) {
  switch (layout) {
    case ProcessLayout::one_process: return "one process drives every device";
    case ProcessLayout::one_process_per_gpu: return "one process per GPU (mpirun)";
    case ProcessLayout::either: return "one process drives every device, or one process per GPU (mpirun)";
  }
  return "?";
}

// --format's names, the one table it is parsed through.
const std::vector<Choice<ListingFormat>>& listing_format_choices() {
  static const std::vector<Choice<ListingFormat>> choices = {{"text", ListingFormat::text}, {"json", ListingFormat::json}};
  return choices;
}

}  // namespace

FlagTable strategies_flag_table() {
  FlagTable table;
  table.command = "strategies";
  // scripts/sweep.sh passes a token as its user wrote it: the token's parser names an empty one
  // ("strategy token ''") better than an empty value would.
  table.empty_values_refused = false;
  table.flags = {
      {"format", "", choice_names(listing_format_choices(), "|"),
       "the list for people, or the same as one JSON document, for programs",
       std::string("text")},
      {"sweep_token", "", "TOKEN",
       "instead of the list, the flags a sweep token stands for (e.g. replicated:xring), on one line after the "
       "process layout, separated by tabs"},
  };
  return table;
}

namespace {

std::string help_text() {
  return "usage: dpbench strategies [--format=" + choice_names(listing_format_choices(), "|") +
         "] [--sweep_token=TOKEN]\n"
         "Lists every --variable_update strategy: its family, how many processes it runs as, the\n"
         "synchronisation options it takes (with their defaults) and its scripts/sweep.sh token.\n\n" +
         flag_table_help(strategies_flag_table());
}

nlohmann::json entry_json(const StrategyEntry& entry) {
  nlohmann::json options = nlohmann::json::array();
  for (const std::string& flag : entry.options)
    options.push_back({{"flag", flag}, {"default", find_synchronisation_option(flag)->default_text()}});
  nlohmann::json json = {{"name", entry.name},
                         {"description", entry.description},
                         {"family", family_name(entry.family)},
                         {"processes", layout_name(entry.processes)},
                         {"sweep_token", sweep_token_form(entry)},
                         {"options", options}};
  if (entry.is_alias()) json["alias_of"] = entry.alias_of;
  return json;
}

std::string entry_text(const StrategyEntry& entry) {
  if (entry.is_alias()) return entry.name + ": " + entry.description + "\n";
  std::string text = entry.name + ": " + entry.description + "\n";
  text += "  family " + std::string(family_name(entry.family)) + "; " + layout_words(entry.processes) +
          "; sweep token " + sweep_token_form(entry) + "\n";
  std::string options;
  for (const std::string& flag : entry.options)
    options += (options.empty() ? "" : ", ") + flag + "=" + find_synchronisation_option(flag)->default_text();
  return text + "  options: " + (options.empty() ? "none" : options) + "\n";
}

}  // namespace

std::string describe_strategies(ListingFormat format) {
  if (format == ListingFormat::json) {
    nlohmann::json list = nlohmann::json::array();
    for (const StrategyEntry& entry : strategy_registry()) list.push_back(entry_json(entry));
    return list.dump(2) + "\n";
  }
  std::string text;
  for (const StrategyEntry& entry : strategy_registry()) text += entry_text(entry);
  return text;
}

std::string resolve_sweep_token(const std::string& token) {
  const std::vector<std::string> flags = flags_of_sweep_token(token);
  std::string line = layout_name(find_strategy(token.substr(0, token.find(':')))->processes);
  for (const std::string& flag : flags) line += "\t" + flag;
  return line + "\n";
}

void run_strategies_command(const std::vector<std::string>& args) {
  const ReadFlags flags = read_flags(strategies_flag_table(), args);
  // Written like any output: a closed or full standard output is an error, not a silent exit 0.
  if (flags.help()) {
    write_text_atomically("-", help_text(), "strategies' help");
  } else if (flags.given("sweep_token")) {
    write_text_atomically("-", resolve_sweep_token(flags.text("sweep_token")), "the strategy token's flags");
  } else {
    const ListingFormat format = parse_choice("format", flags.text("format"), listing_format_choices(), "format");
    write_text_atomically("-", describe_strategies(format), "the strategies' list");
  }
}

StrategyCatalog strategy_catalog_for_reports() {
  StrategyCatalog catalog;
  for (const SynchronisationOption& option : synchronisation_options()) catalog.option_keys.push_back(option.flag);
  for (const StrategyEntry& entry : strategy_registry()) {
    if (entry.is_alias()) continue;  // results record the name it stands for
    StrategyCatalog::Entry listed{entry.name, {}, entry.processes == ProcessLayout::either};
    for (const std::string& flag : entry.options)
      listed.options.push_back({flag, find_synchronisation_option(flag)->default_text()});
    catalog.strategies.push_back(std::move(listed));
  }
  catalog.label = [](const std::string& strategy, const std::map<std::string, std::string>& options) {
    return strategy_label(strategy, options, false);
  };
  return catalog;
}

}  // namespace dpbench
