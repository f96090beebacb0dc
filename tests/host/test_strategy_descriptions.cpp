// Every registered strategy's description is what the command line, the recorded config, the
// console, the reports and the sweep tokens obey, and every synchronisation option's record
// (strategies/synchronisation_options.h) what the flag table, --help, the parsing and its
// refusals, the recorded config, the labels and predict read: each test walks the whole registry
// and every record, so a new entry or option is covered without a new test.
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli/console.h"
#include "cli/flag_reader.h"
#include "cli/flags.h"
#include "cli/predict_command.h"
#include "cli/run_command.h"
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

// A value other than the default, from the record: the other boolean, another choice, a number
// above the minimum (under the default where that is the cap of the buckets, for the tail).
std::string other_value(const SynchronisationOption& option) {
  const std::string default_text = option.default_flag_text();
  if (option.is_boolean()) return default_text == "true" ? "false" : "true";
  for (const std::string& choice : option.choices)
    if (choice != default_text) return choice;
  if (option.flag == "all_reduce_spec") return "psgpu#2";
  if (option.flag == "tail_bucket_mb") return "2";
  return default_text == "5" ? "6" : "5";
}

// What the option needs beside it to mean something (a model with embeddings, the batching it is
// part of), given alike with its default and with another value.
std::vector<std::string> companions(const std::string& flag) {
  if (flag == "agg_small_grads_max_group") return {"--agg_small_grads_max_bytes=64"};
  if (flag == "sparse_embedding_grads") return {"--model=rnnlm"};
  return {};
}

std::vector<std::string> run_of(const StrategyEntry& entry, const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"--variable_update=" + entry.name};
  args.insert(args.end(), flags.begin(), flags.end());
  return args;
}

OptionTexts recorded_texts(const nlohmann::json& config, const StrategyEntry& entry) {
  OptionTexts texts;
  for (const std::string& flag : entry.options) texts[flag] = option_text(config.at(flag));
  return texts;
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
    const std::string layout = entry.processes == ProcessLayout::one_process           ? "one_process\t"
                               : entry.processes == ProcessLayout::one_process_per_gpu ? "one_process_per_gpu\t"
                                                                                       : "one_process_or_per_gpu\t";
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

TEST_CASE("each option's record is its row of run's flag table and its lines of --help",
          "[synchronisation_options]") {
  const FlagTable table = run_flag_table();
  const std::string help = run_help_text();
  for (const SynchronisationOption& option : synchronisation_options()) {
    INFO(option.flag);
    const FlagDeclaration* row = table.find(option.flag);
    REQUIRE(row != nullptr);
    CHECK(row->group == "Synchronisation");
    CHECK(row->value_hint == option.hint());
    CHECK(row->kind == (option.is_boolean() ? FlagKind::boolean : FlagKind::value));
    REQUIRE(row->default_text.has_value());
    CHECK(*row->default_text == option.default_flag_text());
    CHECK(row->help.rfind(option.help, 0) == 0);  // then the strategies that take it
    CHECK_THAT(help, Contains("--" + option.flag));
    // The first words of its help, where --help cannot have wrapped them.
    CHECK_THAT(help, Contains(option.help.substr(0, option.help.find(' ', 12))));
    // Parsing the default text, with a strategy that takes it, gives the field's initialiser back.
    for (const StrategyEntry* entry : strategies())
      if (entry->accepts(option.flag) && entry->runs_in(ProcessLayout::one_process))
        CHECK(option.recorded(parse({"--variable_update=" + entry->name})) == option.recorded(StrategyOptions()));
  }
}

TEST_CASE("each option is accepted by exactly the strategies that take it, refused by the others in one line",
          "[synchronisation_options]") {
  for (const StrategyEntry* entry : strategies()) {
    for (const SynchronisationOption& option : synchronisation_options()) {
      // The companions only where the option is taken: elsewhere they would be refused first.
      std::vector<std::string> flags = entry->accepts(option.flag) ? companions(option.flag) : std::vector<std::string>();
      const std::string given = "--" + option.flag + "=" + other_value(option);
      flags.push_back(given);
      INFO(entry->name << " " << given);
      const std::string error = error_of(run_of(*entry, flags));
      if (entry->accepts(option.flag)) {
        if (error != "(no error)") {
          // A rule between options of the strategy (e.g. a tail bucket needs buckets) may speak,
          // naming the option; never a refusal of the option itself.
          CHECK_THAT(error, !Contains("drop --" + option.flag + " or use --variable_update"));
          continue;
        }
        CHECK(error == "(no error)");
      } else {
        CHECK(error.find('\n') == std::string::npos);
        CHECK_THAT(error, Contains(given + ": "));
        CHECK_THAT(error, Contains("drop --" + option.flag));
        // Its own reason where it has one, else the option's purpose (with the strategies that take it).
        const auto because = entry->refused_because.find(option.flag);
        if (because != entry->refused_because.end()) CHECK_THAT(error, Contains(because->second));
        else if (!entry->options.empty()) CHECK_THAT(error, Contains(option.purpose));
      }
    }
  }
}

TEST_CASE("a value outside an option's range or choices is refused in the record's words",
          "[synchronisation_options]") {
  for (const SynchronisationOption& option : synchronisation_options()) {
    INFO(option.flag);
    const std::string run = "--variable_update=" + std::string(option.flag == "hierarchical_all_reduce"
                                                                   ? "distributed_all_reduce"
                                                                   : option.flag == "local_parameter_device"
                                                                         ? "parameter_server"
                                                                         : "replicated");
    if (option.is_boolean()) {
      CHECK(error_of({run, "--" + option.flag + "=maybe"}) ==
            "--" + option.flag + "=maybe: not a boolean; accepted: true, false");
    } else if (!option.choices.empty()) {
      std::string accepted;
      for (const std::string& choice : option.choices) accepted += (accepted.empty() ? "" : ", ") + choice;
      CHECK(error_of({run, "--" + option.flag + "=other"}) ==
            "--" + option.flag + "=other: unknown " + option.choice_kind + "; accepted: " + accepted);
    } else if (!option.range.accepted.empty()) {
      CHECK(error_of({run, "--" + option.flag + "=-1"}) ==
            "--" + option.flag + "=-1: " + option.range.below);
      CHECK_THAT(error_of({run, "--" + option.flag + "=x"}), Contains(option.range.accepted));
      if (!option.range.above.empty())
        CHECK(error_of({run, "--" + option.flag + "=99999999999999"}) ==
              "--" + option.flag + "=99999999999999: " + option.range.above);
    }
  }
  // The words tests and scripts know, kept.
  CHECK(error_of({"--variable_update=replicated", "--bucket_cap_mb=-1"}) ==
        "--bucket_cap_mb=-1: must be at least 0 (0: one exchange per tensor)");
  CHECK(error_of({"--variable_update=replicated", "--bucket_cap_mb=2e6"}) ==
        "--bucket_cap_mb=2e6: too large; accepted: up to 1048576 (1 TiB)");
  CHECK(error_of({"--variable_update=replicated", "--gradient_repacking=x"}) ==
        "--gradient_repacking=x: not an integer; accepted: an integer >= 0");
  CHECK(error_of({"--variable_update=replicated", "--agg_small_grads_max_bytes=2e3"}) ==
        "--agg_small_grads_max_bytes=2e3: not an integer; accepted: a number of bytes >= 0 (0: off)");
  CHECK(error_of({"--variable_update=replicated", "--agg_small_grads_max_group=70000", "--agg_small_grads_max_bytes=1"}) ==
        "--agg_small_grads_max_group=70000: too large; accepted: up to 65536");
}

TEST_CASE("predict takes --bucket_cap_mb as run does: the option's record decides",
          "[synchronisation_options]") {
  const SynchronisationOption& cap = synchronisation_option("bucket_cap_mb");
  for (const std::string text : {"-1", "2e6", "x", "inf"}) {
    INFO(text);
    std::string from_run, from_predict;
    try {
      parse({"--variable_update=replicated", "--bucket_cap_mb=" + text});
    } catch (const ConfigError& error) {
      from_run = error.what();
    }
    try {
      parse_predict_flags({"base.json", "--system=s.json", "--bucket_cap_mb=" + text});
    } catch (const ConfigError& error) {
      from_predict = error.what();
    }
    CHECK_FALSE(from_run.empty());
    CHECK(from_predict == from_run);
  }
  CHECK(cap.range.why_not(0).empty());  // 0 is one exchange per tensor, for both
  CHECK(cap.range.why_not(1048576).empty());
  CHECK_FALSE(cap.range.why_not(-0.5).empty());
}

TEST_CASE("each option's recorded value and label follow its record", "[synchronisation_options]") {
  for (const StrategyEntry* entry : strategies()) {
    for (const std::string& flag : entry->options) {
      const SynchronisationOption& option = synchronisation_option(flag);
      const std::vector<std::string> with = companions(flag);
      std::vector<std::string> changed = with;
      changed.push_back("--" + flag + "=" + other_value(option));
      INFO(entry->name << " --" << flag << "=" << other_value(option));
      if (error_of(run_of(*entry, changed)) != "(no error)") continue;  // a rule between options: see above
      const RunConfig before = parse(run_of(*entry, with)), after = parse(run_of(*entry, changed));
      const nlohmann::json recorded_before = config_to_json(before), recorded_after = config_to_json(after);
      CHECK(recorded_after.at(flag) == option.recorded(after));
      CHECK(recorded_after.at(flag) != recorded_before.at(flag));
      // The console's full description and the reports' short label both say the change.
      const OptionTexts texts_before = recorded_texts(recorded_before, *entry);
      const OptionTexts texts_after = recorded_texts(recorded_after, *entry);
      CHECK(strategy_label(entry->name, texts_after, true) != strategy_label(entry->name, texts_before, true));
      CHECK(strategy_label(entry->name, texts_after, false) != strategy_label(entry->name, texts_before, false));
    }
  }
}

TEST_CASE("a tiny run of each strategy records exactly its options, at the records' defaults",
          "[synchronisation_options]") {
  for (const StrategyEntry* entry : strategies()) {
    if (!entry->runs_in(ProcessLayout::one_process)) continue;  // one process per GPU: tests/mpi, launcher tests
    INFO(entry->name);
    DeviceInventory no_gpu;
    std::vector<std::string> args = {"--variable_update=" + entry->name, "--device=cpu", "--model=trivial",
                                     "--num_gpus=2", "--num_batches=2", "--num_warmup_batches=0",
                                     "--display_every=100", "--result_file="};
    if (entry->family == StrategyFamily::fully_sharded) {  // it shards models cut into units: a tiny gpt
      args[2] = "--model=gpt";
      for (const char* flag : {"--vocab_size=16", "--seq_len=4", "--num_layers=1", "--num_heads=2", "--hidden_size=8"})
        args.push_back(flag);
    }
    ParsedRunFlags flags = parse_run_flags(args, no_gpu);
    const Result result = run_benchmark(flags);
    for (const SynchronisationOption& option : synchronisation_options()) {
      INFO(option.flag);
      CHECK(result.config.contains(option.flag) == entry->accepts(option.flag));
      if (entry->accepts(option.flag)) CHECK(option_text(result.config.at(option.flag)) == option.default_text());
    }
    const OptionTexts texts = recorded_texts(result.config, *entry);
    const std::string label = strategy_label(entry->name, texts, true);
    CHECK(label.rfind(entry->name, 0) == 0);
    for (const std::string& flag : entry->options) {
      const std::string words = synchronisation_option(flag).label(texts, true);
      if (!words.empty()) CHECK_THAT(label, Contains(words));
    }
  }
}
