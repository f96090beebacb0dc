// The command line and output shared by the offline subcommands (see offline_command.h).
#include "cli/offline_command.h"

#include <algorithm>

#include "cli/log.h"
#include "engine/errors.h"
#include "engine/machine/path_identity.h"
#include "reports/report_loader.h"
#include "reports/text_file.h"

namespace dpbench {

std::string quoted_list(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "'" : ", '") + item + "'";
  return text;
}

NamedPath main_output(const std::string& command, const std::string& output) {
  if (output.empty()) return {"the " + command + " output (no --output)", "-"};
  return {"--output", output};
}

void check_offline_outputs(const std::vector<std::string>& paths, const std::vector<NamedPath>& outputs,
                           const std::vector<NamedPath>& other_inputs) {
  // Only an output that is there already can be a file the command reads: no listing otherwise.
  const bool any_existing = std::any_of(outputs.begin(), outputs.end(), [](const NamedPath& named) {
    return !named.path.empty() && identify_path(named.path).kind == PathIdentity::Kind::existing;
  });
  std::vector<NamedPath> inputs = other_inputs;
  if (any_existing) {
    std::vector<SkippedFile> unreadable;
    for (const ListedPath& listed : list_result_files(paths, &unreadable))
      if (listed.not_readable.empty()) inputs.push_back({"", listed.path});
  }
  check_outputs_apart(outputs, inputs);
}

void check_offline_paths(const std::string& command, const std::vector<std::string>& paths,
                         const std::string& output, const std::vector<NamedPath>& other_outputs,
                         const std::vector<NamedPath>& other_inputs) {
  const std::vector<std::string> missing = find_missing_paths(paths);
  if (!missing.empty()) {
    throw ConfigError(command + ": no such file or folder: " + quoted_list(missing) +
                      " (give result files or folders that hold them)");
  }
  std::vector<NamedPath> outputs = {{"--output", output}};
  outputs.insert(outputs.end(), other_outputs.begin(), other_outputs.end());
  for (const NamedPath& named : outputs)
    if (!named.path.empty()) check_output_path(named.path, named.flag);
  outputs.front() = main_output(command, output);
  check_offline_outputs(paths, outputs, other_inputs);
}

void write_offline_output(const std::string& command, const std::string& text, const std::string& output) {
  write_text_atomically(output.empty() ? "-" : output, text, command + "'s output");
  if (!output.empty()) error_log().info(command + " written to " + output);
}

}  // namespace dpbench
