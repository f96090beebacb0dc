// The formats the offline commands write (--format of report, compare and predict): each format's
// names, the one table the command line parses --format through (once, into ReportFormat), and
// each subject's writers, one per format it is written in. Adding a format: its value and names
// here, its writer in the writers' table of the subject's tables file (report_tables.cpp, ...);
// a command whose subject has no writer for it refuses it.
#pragma once

#include <string>
#include <vector>

namespace dpbench {

enum class ReportFormat { markdown, csv, json };

// One name --format takes. An unlisted row is another spelling, accepted but left out of lists.
struct ReportFormatName {
  const char* name;
  ReportFormat value;
  bool listed = true;
};

inline const std::vector<ReportFormatName>& report_format_names() {
  static const std::vector<ReportFormatName> names = {{"markdown", ReportFormat::markdown},
                                                      {"md", ReportFormat::markdown, false},
                                                      {"csv", ReportFormat::csv},
                                                      {"json", ReportFormat::json}};
  return names;
}

// A subject (a Report, a ResultComparison, a PredictionReport) written in one format.
template <typename Subject>
struct ReportWriter {
  ReportFormat format;
  std::string (*write)(const Subject&);
  // Whether the text escapes the control bytes of values read from files itself (JSON does);
  // the others' lines are escaped when written out.
  bool escapes_itself = false;
};

template <typename Subject>
using ReportWriters = std::vector<ReportWriter<Subject>>;

}  // namespace dpbench
