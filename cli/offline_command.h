// What the offline subcommands (`dpbench report`, `dpbench compare`) share: their command line
// (paths, "--name=value" or "--name value" flags, "--" before paths that look like flags,
// --help), the output format flag, the checks of input paths and --output made before anything
// is read, and writing the output to stdout or atomically to a file. Each command keeps only its
// own flags and what it renders.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "reports/text_file.h"

namespace dpbench {

enum class ReportFormat { markdown, csv, json };

struct OfflineCommandLine {
  std::vector<std::string> paths;             // in the order given
  std::map<std::string, std::string> values;  // by flag name ("--output"); the last one given counts
  std::map<std::string, std::vector<std::string>> lists;  // list flags by name: every value given
  bool help = false;

  // The flag's value, or `absent` where it was not given.
  std::string value(const std::string& flag, const std::string& absent = "") const {
    const auto found = values.find(flag);
    return found == values.end() ? absent : found->second;
  }
};

// `args` excludes the subcommand's name. `flags` are the value flags it accepts ("--output", ...);
// `list_flags` those that take several values ("--curves A B", "--curves=A B"): every argument
// after one up to the next flag (or "--") is its value, and it may be given again.
// Throws ConfigError with one line: an unknown flag (naming what `command` accepts), a flag
// without its value, an empty value.
OfflineCommandLine parse_offline_command_line(const std::string& command, const std::vector<std::string>& args,
                                              const std::vector<std::string>& flags,
                                              const std::vector<std::string>& list_flags = {});

// "markdown" (or "md"), "csv", "json"; else a ConfigError naming --format and what is accepted.
ReportFormat parse_report_format(const std::string& text);

// `subject` written by the writer of `format`.
template <typename Subject>
std::string render_in_format(ReportFormat format, const Subject& subject, std::string (*markdown)(const Subject&),
                             std::string (*csv)(const Subject&), std::string (*json)(const Subject&)) {
  switch (format) {
    case ReportFormat::markdown: return markdown(subject);
    case ReportFormat::csv: return csv(subject);
    case ReportFormat::json: return json(subject);
  }
  return "";
}

// "'a', 'b'": paths as error lines name them.
std::string quoted_list(const std::vector<std::string>& items);

// Throws ConfigError "<command>: no such file or folder: ..." for paths where nothing is, what
// check_output_path says of an --output (`output`, when not empty) or of `other_outputs` that
// cannot be written, and what check_outputs_apart says where an output would replace another or
// an input: a file of `paths` (those found in its folders too) or of `other_inputs`.
void check_offline_paths(const std::string& command, const std::vector<std::string>& paths,
                         const std::string& output, const std::vector<NamedPath>& other_outputs = {},
                         const std::vector<NamedPath>& other_inputs = {});

// The command's text as an output: --output, or standard output where none was given (which no
// other output may share).
NamedPath main_output(const std::string& command, const std::string& output);

// check_outputs_apart over `outputs`, with the files the command reads as inputs: `other_inputs`
// and the result files of `paths` (those found in its folders too: list_result_files).
void check_offline_outputs(const std::vector<std::string>& paths, const std::vector<NamedPath>& outputs,
                           const std::vector<NamedPath>& other_inputs = {});

// `text` to stdout (empty `output`), or to `output` atomically with a line on stderr saying so.
// Throws RuntimeError where it cannot be written (a closed pipe, a full device): the output is the
// command's product.
void write_offline_output(const std::string& command, const std::string& text, const std::string& output);

}  // namespace dpbench
