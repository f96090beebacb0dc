// `dpbench completion bash|zsh`: the shell completion script of every subcommand, its flags and the
// values of its enumerated flags, generated from the commands' flag tables (cli/flag_reader.h), so
// that what the shell offers is what dpbench accepts. The build writes the bash script into the
// build folder and `cmake --install` (and the Debian package) puts it where bash-completion looks:
// share/bash-completion/completions/dpbench.
#pragma once

#include <string>
#include <vector>

#include "cli/flag_reader.h"

namespace dpbench {

enum class CompletionShell { bash, zsh };

// A subcommand as completion sees it: its word, its flags, and what its other arguments are.
struct SubcommandCompletion {
  std::string name;  // "report"; "run" for the default command
  FlagTable table;
  // The words its positional arguments take; empty: paths where the table takes paths, else none.
  std::vector<std::string> argument_words;
};

// Every subcommand, in the order `dpbench --help` names them, run (the default) first.
std::vector<SubcommandCompletion> completed_subcommands();

// The script for `shell`: the same text for the same dpbench (no date, no path, no environment).
std::string completion_script(CompletionShell shell);

// `dpbench completion`'s flags (--help only; the shell is its one argument).
FlagTable completion_flag_table();

// `args` excludes "completion". Prints the script on stdout. Throws ConfigError with one line for
// a missing or unknown shell.
void run_completion_command(const std::vector<std::string>& args);

}  // namespace dpbench
