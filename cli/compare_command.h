// `dpbench compare BASE NEW`: two result files or folders (a build before and after a change, two
// drivers, two nights), their series matched by key and GPU count, each pair's speeds compared
// from the per-step samples with a bootstrap interval and a verdict (faster, slower, within
// noise); markdown, CSV or JSON on stdout or in a file. With --fail_above=PCT it is a gate: exit
// code 3 when a series is slower beyond the noise and by more than PCT. The work is done by
// reports/result_comparison.h and reports/comparison_tables.h; this file is flags, checks, output
// and the exit code. `dpbench compare --reference RESULT...` is the same with the reference
// results (reports/reference_results.h) as BASE, each series against the reference of its workload.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/flag_reader.h"
#include "cli/offline_command.h"
#include "reports/speed_comparison.h"

namespace dpbench {

// A series slower than --fail_above allows (0: none; 1: an error; 2: a bad command line).
constexpr int kCompareSlowerExitCode = 3;

struct CompareOptions {
  // BASE, or with --reference the folder of reference results; NEW's paths (one without --reference).
  std::string base_path;
  std::vector<std::string> new_paths;
  bool against_references = false;  // --reference
  std::string output;  // empty: stdout
  ReportFormat format = ReportFormat::markdown;
  std::optional<double> fail_above_pct;
  ComparisonSettings settings;  // --noise_floor; the rest fixed (reports/speed_comparison.h)
  bool help = false;
};

// `dpbench compare`'s flags: what it reads, what --help lists, what shell completion offers.
FlagTable compare_flag_table();

// `args` excludes "compare". Throws ConfigError with one line: an unknown flag or format, a flag
// without its value or with one out of range, not exactly two paths, a path that does not exist,
// an --output that cannot be written; --reference without a path, --reference_dir without
// --reference.
CompareOptions parse_compare_flags(const std::vector<std::string>& args);
std::string compare_help_text();

// The subcommand: parse, load both sides, compare, write. Returns 0, or kCompareSlowerExitCode
// when the gate failed (the output is written either way). A side without any usable result is a
// RuntimeError naming it and why.
int run_compare_command(const std::vector<std::string>& args);

}  // namespace dpbench
