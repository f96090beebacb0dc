// `dpbench report PATH...`: result files and folders (searched recursively for *.json) turned into
// speedup tables (markdown, CSV or JSON) on stdout or in a file, and optionally SVG figures. The
// work is done by reports/report_*; this file is flags, checks and output.
#pragma once

#include <string>
#include <vector>

#include "cli/flag_reader.h"
#include "cli/offline_command.h"
#include "reports/report_series.h"

namespace dpbench {

struct ReportOptions {
  std::vector<std::string> paths;  // result files and folders, any mix
  std::string output;              // empty: stdout
  ReportFormat format = ReportFormat::markdown;
  std::string plots_directory;     // empty: no figures
  bool help = false;
};

// `dpbench report`'s flags: what it reads, what --help lists, what shell completion offers.
FlagTable report_flag_table();

// `args` excludes "report". Throws ConfigError with one line: an unknown flag or format, a flag
// without its value, no paths, a path that does not exist, an --output in a missing folder.
ReportOptions parse_report_flags(const std::vector<std::string>& args);
std::string report_help_text();

std::string render_report(const Report& report, ReportFormat format);

// The subcommand: parse, load, write the report and the figures. Skipped files are warned about
// on stderr (and listed in the markdown); no usable result at all is a RuntimeError.
void run_report_command(const std::vector<std::string>& args);

}  // namespace dpbench
