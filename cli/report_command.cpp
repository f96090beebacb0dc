// `dpbench report` (see the header): flag parsing, path checks, and writing what reports/ renders.
#include "cli/report_command.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "cli/log.h"
#include "cli/strategies_command.h"
#include "engine/errors.h"
#include "engine/file_checks.h"
#include "reports/report_loader.h"
#include "reports/report_plots.h"
#include "reports/report_tables.h"
#include "reports/text_file.h"

namespace dpbench {
namespace {

namespace fs = std::filesystem;

const char* const kAcceptedFlags = "--output, --format, --plots, --help";

ReportFormat parse_format(const std::string& text) {
  if (text == "markdown" || text == "md") return ReportFormat::markdown;
  if (text == "csv") return ReportFormat::csv;
  if (text == "json") return ReportFormat::json;
  throw ConfigError("--format=" + text + ": unknown report format; accepted: markdown, csv, json");
}

std::string quoted_list(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "'" : ", '") + item + "'";
  return text;
}

// The checks that need the file system, so that nothing is read before the command line is sound.
void check_paths(const ReportOptions& options) {
  const std::vector<std::string> missing = find_missing_paths(options.paths);
  if (!missing.empty()) {
    throw ConfigError("report: no such file or folder: " + quoted_list(missing) +
                      " (give result files or folders that hold them)");
  }
  if (!options.output.empty()) check_output_path(options.output, "--output");
  if (!options.plots_directory.empty()) {
    const std::string& folder = options.plots_directory;
    std::error_code error;
    if (inspect_path(folder).kind == PathKind::missing) fs::create_directories(folder, error);
    const std::string why_not = error ? "cannot be created: " + error.message() : why_not_folder(folder);
    if (!why_not.empty()) throw ConfigError("--plots=" + folder + ": it " + why_not + "; give a folder to write the figures to");
    if (::access(folder.c_str(), W_OK) != 0)
      throw ConfigError("--plots=" + folder + ": the folder is not writable; give another");
  }
}

void warn(const std::string& text) { error_log().warn(text); }
void inform(const std::string& text) { error_log().info(text); }

}  // namespace

ReportOptions parse_report_flags(const std::vector<std::string>& args) {
  ReportOptions options;
  bool only_paths_follow = false;
  std::string format_text = "markdown";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (only_paths_follow || arg.rfind("-", 0) != 0 || arg == "-") {
      options.paths.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_paths_follow = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      continue;
    }
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    std::string* target = name == "--output"   ? &options.output
                          : name == "--format" ? &format_text
                          : name == "--plots"  ? &options.plots_directory
                                               : nullptr;
    if (!target) throw ConfigError(arg + ": unknown flag of report; accepted: " + kAcceptedFlags);
    if (equals != std::string::npos) {
      *target = arg.substr(equals + 1);
    } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      *target = args[++i];
    } else {
      throw ConfigError(name + ": missing a value (dpbench report --help)");
    }
    if (target->empty()) throw ConfigError(name + ": empty value (dpbench report --help)");
  }
  if (options.help) return options;
  options.format = parse_format(format_text);
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
         "straggler wait, clock loss, data wait, host gaps, other). Repeated runs: the median by speed is shown.\n\n"
         "  --output FILE      write the report to FILE (atomically) instead of stdout\n"
         "  --format FORMAT    markdown (default), csv (one row per series and GPU count), or json\n"
         "  --plots DIR        also write SVG figures to DIR: speedup against GPUs per workload, and the\n"
         "                     step times of each series' largest run with the warm-up shaded\n"
         "  --help             this text\n\n"
         "Files that are not results (or of another schema_version) and results of interrupted runs\n"
         "(summary.interrupted) are skipped with a note naming them.\n"
         "Example: dpbench report results/ --plots results/plots --output results/REPORT.md\n";
}

std::string render_report(const Report& report, ReportFormat format) {
  switch (format) {
    case ReportFormat::markdown: return render_markdown(report);
    case ReportFormat::csv: return render_csv(report);
    case ReportFormat::json: return render_json(report);
  }
  return "";
}

void run_report_command(const std::vector<std::string>& args) {
  const ReportOptions options = parse_report_flags(args);
  if (options.help) {
    std::fputs(report_help_text().c_str(), stdout);
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

  const std::string text = render_report(report, options.format);
  if (options.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } else {
    write_text_atomically(options.output, text);
    inform("report written to " + options.output);
  }

  if (options.plots_directory.empty()) return;
  std::vector<std::string> notes;
  const std::vector<PlotFile> plots = build_report_plots(report, &notes);
  for (const std::string& note : notes) warn("report: " + note);
  write_report_plots(plots, options.plots_directory);
  inform(std::to_string(plots.size()) + " figure(s) written to " + options.plots_directory);
}

}  // namespace dpbench
