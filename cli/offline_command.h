// What the offline subcommands (`dpbench report`, `compare`, `predict`) share beyond their
// command line (read by cli/flag_reader.h, as every command's): the output format flag and its
// writers, the checks
// of input paths and --output made before anything is read, and writing the output to stdout or
// atomically to a file. Each command keeps only its own flags and what it renders.
#pragma once

#include <string>
#include <vector>

#include "cli/flag_parsing.h"
#include "engine/machine/text_content.h"
#include "reports/report_format.h"
#include "reports/text_file.h"

namespace dpbench {

// --format's names (reports/report_format.h) that the command's subject has a writer for
// (`writers`: report_writers(), ...).
template <typename Subject>
std::vector<Choice<ReportFormat>> report_format_choices(const ReportWriters<Subject>& writers) {
  std::vector<Choice<ReportFormat>> choices;
  for (const ReportFormatName& name : report_format_names())
    for (const ReportWriter<Subject>& writer : writers)
      if (writer.format == name.value) choices.push_back({name.name, name.value, name.listed});
  return choices;
}

// The listed ones as names: the --format row's choices in the command's flag table.
template <typename Subject>
std::vector<std::string> report_format_choice_names(const ReportWriters<Subject>& writers) {
  std::vector<std::string> names;
  for (const Choice<ReportFormat>& choice : report_format_choices(writers))
    if (choice.listed) names.push_back(choice.name);
  return names;
}

// --format, parsed once through report_format_choices. Else a ConfigError "--format=X: unknown
// report format; accepted: markdown, csv, json" (the names it has writers for).
template <typename Subject>
ReportFormat parse_report_format(const std::string& text, const ReportWriters<Subject>& writers) {
  return parse_choice("format", text, report_format_choices(writers), "report format");
}

// `subject` written by its writer of `format` (one parse_report_format accepted), its lines
// escaped (escaped_lines) unless the writer escapes what it quotes itself.
template <typename Subject>
std::string render_in_format(ReportFormat format, const Subject& subject, const ReportWriters<Subject>& writers) {
  for (const ReportWriter<Subject>& writer : writers)
    if (writer.format == format) return writer.escapes_itself ? writer.write(subject) : escaped_lines(writer.write(subject));
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
