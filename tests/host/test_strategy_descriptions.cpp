// Every registered strategy's description is what the command line, the recorded config, the
// console, the reports and the sweep tokens obey: each test walks the whole registry, so a new
// entry is covered without a new test.
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli/console.h"
#include "cli/flags.h"
#include "cli/strategies_command.h"
#include "engine/errors.h"
#include "strategies/strategy_registry.h"
#include "strategies/synchronisation_options.h"

using namespace dpbench;
using Catch::Contains;

namespace {

RunConfig parse(std::vector<std::string> args) {
  args.push_back("--result_file=");
  DeviceInventory inventory;
  inventory.cuda_gpus = 4;
  return parse_run_flags(args, inventory).config;
}

std::string error_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "(no error)";
}

std::vector<const StrategyEntry*> strategies() {
  std::vector<const StrategyEntry*> entries;
  for (const StrategyEntry& entry : strategy_registry())
    if (!entry.is_alias()) entries.push_back(&entry);
  return entries;
}

// The option given at its default, with what it needs beside it to mean something.
std::vector<std::string> option_at_default(const StrategyEntry& entry, const SynchronisationOption& option) {
  std::vector<std::string> args = {"--variable_update=" + entry.name, "--" + option.flag + "=" + option.default_text()};
  if (option.flag == "agg_small_grads_max_group" && entry.accepts(option.flag)) args.push_back("--agg_small_grads_max_bytes=64");
  return args;
}

}  // namespace

TEST_CASE("the registry is consistent: names unique, aliases resolve, options exist, factories present",
          "[strategy_descriptions]") {
  std::map<std::string, int> seen;
  for (const StrategyEntry& entry : strategy_registry()) {
    CHECK(++seen[entry.name] == 1);
    CHECK_FALSE(entry.description.empty());
    if (entry.is_alias()) {
      const StrategyEntry* target = resolve_strategy_name(entry.name);
      REQUIRE(target != nullptr);
      CHECK_FALSE(target->is_alias());
      CHECK(target->processes == entry.processes);
      continue;
    }
    CHECK(entry.create != nullptr);
    CHECK(entry.validate != nullptr);
    for (const std::string& flag : entry.options) CHECK(find_synchronisation_option(flag) != nullptr);
    if (!entry.token_option.empty()) CHECK(entry.accepts(entry.token_option));
  }
}

TEST_CASE("every option a strategy takes is accepted with it and refused with every other", "[strategy_descriptions]") {
  for (const StrategyEntry* entry : strategies()) {
    for (const SynchronisationOption& option : synchronisation_options()) {
      const std::vector<std::string> args = option_at_default(*entry, option);
      INFO(entry->name << " --" << option.flag);
      const std::string error = error_of(args);
      if (entry->accepts(option.flag)) {
        CHECK(error == "(no error)");
      } else {
        CHECK_THAT(error, Contains("--" + option.flag + "=" + option.default_text() + ": ") &&
                              Contains("drop --" + option.flag));
      }
    }
  }
}

TEST_CASE("the recorded config holds exactly the options the strategy takes", "[strategy_descriptions]") {
  for (const StrategyEntry* entry : strategies()) {
    const nlohmann::json config = config_to_json(parse({"--variable_update=" + entry->name}));
    CHECK(config["variable_update"] == entry->name);
    for (const SynchronisationOption& option : synchronisation_options()) {
      INFO(entry->name << " records " << option.flag);
      CHECK(config.contains(option.flag) == entry->accepts(option.flag));
      if (entry->accepts(option.flag)) CHECK(option_text(config[option.flag]) == option.default_text());
    }
  }
}

TEST_CASE("the console and the reports describe each strategy with its own options", "[strategy_descriptions]") {
  const StrategyCatalog catalog = strategy_catalog_for_reports();
  size_t column = 0;
  for (const StrategyEntry* entry : strategies()) {
    INFO(entry->name);
    // The reports' columns follow the registry's order.
    CHECK(catalog.column_rank(entry->name) == static_cast<int>(column++));
    std::vector<std::string> args = {"--variable_update=" + entry->name};
    if (entry->accepts("overlap_comm")) args.push_back("--overlap_comm=false");
    const RunConfig config = parse(args);
    const std::string header = format_run_header(config, "images", 42, {DeviceDescription{0, "host", 0, ""}});
    CHECK_THAT(header, Contains("Strategy:     " + entry->name));
    if (entry->accepts("overlap_comm")) CHECK_THAT(header, Contains("after backward"));
    if (entry->accepts("all_reduce_spec")) CHECK_THAT(header, Contains("all-reduce nccl"));
    if (entry->accepts("local_parameter_device")) CHECK_THAT(header, Contains("on gpu"));

    std::map<std::string, std::string> recorded;
    const nlohmann::json json = config_to_json(config);
    for (const std::string& flag : entry->options) recorded[flag] = option_text(json[flag]);
    const std::string label = catalog.label(entry->name, recorded);
    CHECK(label.rfind(entry->name, 0) == 0);
    if (entry->accepts("overlap_comm")) CHECK_THAT(label, Contains("no overlap"));
    if (entry->options.empty()) CHECK(label == entry->name);
  }
}

TEST_CASE("every strategy has a sweep token that stands for its flags", "[strategy_descriptions]") {
  for (const StrategyEntry& entry : strategy_registry()) {
    INFO(entry.name);
    const std::string line = resolve_sweep_token(entry.name);
    const std::string layout =
        entry.processes == ProcessLayout::one_process ? "one_process\t" : "one_process_per_gpu\t";
    CHECK(line == layout + "--variable_update=" + entry.name + "\n");
    if (entry.token_option.empty()) {
      CHECK_THROWS_WITH(flags_of_sweep_token(entry.name + ":gpu"), Contains("takes no ':VALUE'"));
      continue;
    }
    const std::string value = entry.token_option == "all_reduce_spec" ? "psgpu#2" : "cpu";
    const std::vector<std::string> flags = flags_of_sweep_token(entry.name + ":" + value);
    REQUIRE(flags.size() == 2);
    CHECK(flags[1] == "--" + entry.token_option + "=" + value);
    CHECK(error_of(flags) == "(no error)");  // what a token stands for is a valid command line
    CHECK_THROWS_WITH(flags_of_sweep_token(entry.name + ":bogus"), Contains("strategy token '" + entry.name + ":bogus'"));
  }
  CHECK_THROWS_WITH(flags_of_sweep_token("mirrored"), Contains("unknown strategy 'mirrored'; accepted: independent"));
}

TEST_CASE("dpbench strategies lists every entry as text and as JSON", "[strategy_descriptions]") {
  const std::string text = describe_strategies(ListingFormat::text);
  const nlohmann::json json = nlohmann::json::parse(describe_strategies(ListingFormat::json));
  REQUIRE(json.size() == strategy_registry().size());
  for (size_t i = 0; i < json.size(); ++i) {
    const StrategyEntry& entry = strategy_registry()[i];
    CHECK_THAT(text, Contains(entry.name + ": " + entry.description));
    CHECK(json[i]["name"] == entry.name);
    CHECK(json[i]["family"] == family_name(entry.family));
    CHECK(json[i]["options"].size() == entry.options.size());
  }
  CHECK_THROWS_WITH(run_strategies_command({"--format=yaml"}), "--format=yaml: unknown format; accepted: text, json");
}

TEST_CASE("strategies reads its command line as every command does", "[strategy_descriptions][flags]") {
  CHECK_THROWS_WITH(run_strategies_command({"stray"}),
                    "unexpected argument 'stray'; flags take the form --name=value (see dpbench strategies --help)");
  CHECK_THROWS_WITH(run_strategies_command({"--fromat=json"}),
                    "--fromat=json: unknown flag; did you mean --format? dpbench strategies --help lists the accepted "
                    "flags");
  CHECK_THROWS_WITH(run_strategies_command({"--format=json", "--format", "text"}),
                    "--format is given twice, as json and as text; give it once");
  CHECK_THROWS_WITH(run_strategies_command({"--sweep_token"}), "--sweep_token: missing a value; e.g. --sweep_token=TOKEN");
  // An empty token is the token parser's to name: scripts/sweep.sh passes what its user wrote.
  CHECK_THROWS_WITH(run_strategies_command({"--sweep_token="}), Catch::StartsWith("strategy token '': unknown strategy"));
}
