// `dpbench report` (see the header): flag parsing, path checks, and writing what reports/ renders.
#include "cli/report_command.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "cli/flag_reader.h"
#include "cli/log.h"
#include "cli/strategies_command.h"
#include "engine/errors.h"
#include "engine/machine/file_checks.h"
#include "engine/machine/text_content.h"
#include "reports/report_loader.h"
#include "reports/report_plots.h"
#include "reports/report_tables.h"
#include "reports/text_file.h"

namespace dpbench {
namespace {

namespace fs = std::filesystem;

// The checks that need the file system, so that nothing is read before the command line is sound.
void check_paths(const ReportOptions& options) {
  check_offline_paths("report", options.paths, options.output);
  if (!options.plots_directory.empty()) {
    const std::string& folder = options.plots_directory;
    check_outputs_apart({{"--output", options.output}, {"--plots", folder}});  // before the folder is made
    std::error_code error;
    if (inspect_path(folder).kind == PathKind::missing) fs::create_directories(folder, error);
    const std::string why_not = error ? "cannot be created: " + error.message() : why_not_folder(folder);
    if (!why_not.empty()) throw ConfigError("--plots=" + folder + ": it " + why_not + "; give a folder to write the figures to");
    if (::access(folder.c_str(), W_OK) != 0)
      throw ConfigError("--plots=" + folder + ": the folder is not writable; give another");
  }
}

}  // namespace

FlagTable report_flag_table() {
  FlagTable table;
  table.command = "report";
  table.takes_paths = true;
  table.flags = {
      {"output", "", "FILE", "write the report to FILE (atomically) instead of stdout"},
      {"format", "", "FORMAT", "markdown, csv (one row per series and GPU count), or json", std::string("markdown"),
       FlagKind::value, report_format_choice_names(report_writers())},
      {"plots", "", "DIR",
       "also write SVG figures to DIR: speedup against GPUs per workload, and the step times of each series' "
       "largest run with the warm-up shaded"},
  };
  return table;
}

namespace {

// Notes quote files (paths, names, values): escaped, so no control byte of theirs reaches the terminal.
void warn(const std::string& text) { error_log().warn(escaped_value(text)); }
void inform(const std::string& text) { error_log().info(escaped_value(text)); }

}  // namespace

ReportOptions parse_report_flags(const std::vector<std::string>& args) {
  const ReadFlags flags = read_flags(report_flag_table(), args);
  ReportOptions options;
  options.paths = flags.paths;
  options.help = flags.help();
  if (options.help) return options;
  options.output = flags.text("output");
  options.plots_directory = flags.text("plots");
  options.format = parse_report_format(flags.text("format"), report_writers());
  if (options.paths.empty()) {
    throw ConfigError("report: no result files or folders given; usage: dpbench report [flags] PATH... "
                      "(dpbench report --help)");
  }
  check_paths(options);
  return options;
}

std::string report_help_text() {
  return "usage: dpbench report [flags] PATH...\n"
         "Reads dpbench result files and folders (searched recursively for *.json, any mix), groups the runs\n"
         "into series (model, strategy and its options, precision, data format, backend, device, and the batch:\n"
         "per GPU for weak scaling, total for strong scaling) and writes per series a table of GPU count,\n"
         "batches, total time, processing speed, speedup over the series' 1-GPU run, efficiency and jitter,\n"
         "then per workload a table comparing the strategies. Under a weak-scaling series, where its runs carry\n"
         "summary.breakdown, where each multi-GPU run's efficiency went (points lost to exposed communication,\n"
         "straggler wait, clock loss, data wait, host gaps, other). Repeated runs: the median by speed is shown.\n\n" +
         flag_table_help(report_flag_table()) +
         "\nFiles that are not results (or of another schema_version) and results of interrupted runs\n"
         "(summary.interrupted) are skipped with a note naming them.\n"
         "Example: dpbench report results/ --plots results/plots --output results/REPORT.md\n";
}

std::string render_report(const Report& report, ReportFormat format) {
  return render_in_format(format, report, report_writers());
}

void run_report_command(const std::vector<std::string>& args) {
  const ReportOptions options = parse_report_flags(args);
  if (options.help) {
    write_text_atomically("-", report_help_text(), "report's help");
    return;
  }
  LoadedResults loaded = load_results(options.paths);
  for (const SkippedFile& skipped : loaded.skipped) warn("report: skipped " + skipped.path + ": " + skipped.reason);
  const size_t examined = loaded.files_examined, skipped = loaded.skipped.size();
  const Report report = build_report(std::move(loaded), strategy_catalog_for_reports());
  if (report.results == 0) {
    throw RuntimeError("report: no dpbench results to report in " + quoted_list(options.paths) + " (" +
                       std::to_string(examined) + " file(s) examined, " + std::to_string(skipped) + " skipped)");
  }

  // The figures' names are known only now: checked against the other outputs and the inputs
  // before anything is written.
  std::vector<PlotFile> plots;
  if (!options.plots_directory.empty()) {
    std::vector<std::string> notes;
    plots = build_report_plots(report, &notes);
    for (const std::string& note : notes) warn("report: " + note);
    std::vector<NamedPath> outputs = {main_output("report", options.output)};
    for (const PlotFile& plot : plots)
      outputs.push_back({"--plots", (fs::path(options.plots_directory) / plot.name).string()});
    check_offline_outputs(options.paths, outputs);
  }
  write_offline_output("report", render_report(report, options.format), options.output);

  if (options.plots_directory.empty()) return;
  write_report_plots(plots, options.plots_directory);
  inform(std::to_string(plots.size()) + " figure(s) written to " + options.plots_directory);
}

}  // namespace dpbench
