// `dpbench completion` (cli/completion_command.h): the script lists every flag of every
// subcommand's flag table and the values of its enumerated flags as their registries and parse
// tables give them, the same text on every call, and the build's copy is current. How bash and
// zsh answer with it is tests/scripts/test_completion.sh's.
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli/completion_command.h"
#include "cli/flags.h"
#include "engine/precision.h"
#include "models/model_registry.h"
#include "strategies/strategy_registry.h"
#include "test_support.h"

using namespace dpbench;

namespace {

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// The arms of one of the script's functions: "    PATTERNS) printf '%s' 'WORDS' ;;", each
// pattern ("run:model", "report") mapped to its words.
std::map<std::string, std::vector<std::string>> case_arms(const std::string& script, const std::string& function) {
  const size_t start = script.find("\n" + function + "() {\n");
  REQUIRE(start != std::string::npos);
  const size_t end = script.find("\n}\n", start);
  std::istringstream lines(script.substr(start, end - start));
  std::map<std::string, std::vector<std::string>> arms;
  const std::string middle = ") printf '%s' '";
  for (std::string line; std::getline(lines, line);) {
    const size_t split = line.find(middle);
    if (line.rfind("    ", 0) != 0 || split == std::string::npos) continue;
    const std::string words = line.substr(split + middle.size(), line.rfind("' ;;") - split - middle.size());
    for (const std::string& pattern : words_of(line.substr(4, split - 4)))
      if (pattern != "|") arms[pattern] = words_of(words);
  }
  return arms;
}

std::set<std::string> as_set(const std::vector<std::string>& words) { return {words.begin(), words.end()}; }

}  // namespace

TEST_CASE("the completion offers every flag of every subcommand's flag table", "[completion]") {
  const std::string script = completion_script(CompletionShell::bash);
  const auto flags = case_arms(script, "_dpbench_flags");
  std::vector<std::string> names;
  for (const SubcommandCompletion& command : completed_subcommands()) {
    names.push_back(command.name);
    INFO("dpbench " + command.name);
    REQUIRE(flags.count(command.name) == 1);
    std::set<std::string> expected = {"--help"};
    for (const FlagDeclaration& flag : command.table.flags)
      expected.insert("--" + flag.name + (flag.kind == FlagKind::value ? "=" : ""));
    CHECK(as_set(flags.at(command.name)) == expected);
  }
  CHECK(flags.size() == names.size());
  CHECK(names == std::vector<std::string>{"run", "report", "compare", "predict", "comm_bench", "strategies", "completion"});
  CHECK(flags.at("run").size() == run_flag_table().flags.size() + 1);
}

TEST_CASE("the completion offers enumerated values as the registries and parse tables name them", "[completion]") {
  const auto values = case_arms(completion_script(CompletionShell::bash), "_dpbench_values");
  std::set<std::string> models, strategies, precisions;
  for (const ModelEntry& model : model_registry())
    if (model.implemented) models.insert(model.name);
  for (const StrategyEntry& strategy : strategy_registry()) strategies.insert(strategy.name);
  for (Precision precision : every_precision()) precisions.insert(precision_name(precision));
  CHECK(as_set(values.at("run:model")) == models);
  CHECK(as_set(values.at("run:variable_update")) == strategies);
  CHECK(as_set(values.at("run:precision")) == precisions);
  CHECK(values.at("run:data_format") == std::vector<std::string>{"NCHW", "NHWC"});
  CHECK(values.at("run:use_fp16") == std::vector<std::string>{"true", "false"});
  CHECK(values.at("run:result_file") == std::vector<std::string>{"@file"});
  CHECK(values.at("run:data_dir") == std::vector<std::string>{"@dir"});
  CHECK(values.at("report:format") == std::vector<std::string>{"markdown", "csv", "json"});
  CHECK(values.at("comm_bench:op") ==
        std::vector<std::string>{"all_reduce", "reduce_scatter", "all_gather", "reduce", "broadcast"});
  CHECK(values.at("predict:curves") == std::vector<std::string>{"@file"});
  CHECK(values.count("run:num_gpus") == 0);  // a number: nothing to offer
  // An offered model is one the run accepts.
  for (const std::string& model : models)
    CHECK_NOTHROW(parse_run_flags({"--model=" + model, "--device=cpu", "--result_file="}, DeviceInventory()));
}

TEST_CASE("the completion script is the same on every call, and the build's copy is current", "[completion]") {
  const std::string bash = completion_script(CompletionShell::bash);
  CHECK(completion_script(CompletionShell::bash) == bash);
  const std::string zsh = completion_script(CompletionShell::zsh);
  CHECK(completion_script(CompletionShell::zsh) == zsh);
  // zsh's is bash's functions behind its emulation.
  CHECK(zsh.find("autoload -U +X bashcompinit && bashcompinit\n") != std::string::npos);
  CHECK(zsh.substr(zsh.find("# The subcommands")) == bash.substr(bash.find("# The subcommands")));
  std::ifstream built(DPBENCH_BINARY_DIR "/completions/dpbench");
  REQUIRE(built);
  std::stringstream text;
  text << built.rdbuf();
  CHECK(text.str() == bash);
}

TEST_CASE("every subcommand the completion names is one dpbench runs", "[completion]") {
  for (const SubcommandCompletion& command : completed_subcommands()) {
    INFO("dpbench " + command.name + " --help");
    CHECK(testing::run_cli({command.name, "--help"}) == 0);
  }
  CHECK(testing::run_cli({"completion"}) == 2);
  CHECK(testing::run_cli({"completion", "fish"}) == 2);
}
