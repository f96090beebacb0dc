// `dpbench compare` (see the header): flag parsing, loading both sides, writing what reports/
// renders, and the gate's exit code.
#include "cli/compare_command.h"

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "cli/flag_parsing.h"
#include "cli/flag_reader.h"
#include "cli/log.h"
#include "cli/reference_lookup.h"
#include "cli/strategies_command.h"
#include "engine/errors.h"
#include "engine/machine/text_content.h"
#include "reports/comparison_tables.h"
#include "reports/report_loader.h"
#include "reports/result_comparison.h"
#include "reports/table_cells.h"
#include "reports/text_file.h"

namespace dpbench {
namespace {

// A percentage of speed: from 0 (any change) to below 100 (a slowdown of 100% is a stop).
double parse_percentage(const std::string& flag, const std::string& text) {
  const double pct = parse_finite_number(flag, text, "a percentage from 0 to below 100, e.g. 2");
  if (pct < 0 || pct >= 100) reject(flag, text, "out of range; accepted: a percentage from 0 to below 100, e.g. 2");
  return pct;
}

}  // namespace

FlagTable compare_flag_table() {
  const ComparisonSettings defaults;
  FlagTable table;
  table.command = "compare";
  table.takes_paths = true;
  table.flags = {
      {"output", "", "FILE", "write the comparison to FILE (atomically) instead of stdout"},
      {"format", "", "FORMAT", "markdown, csv (one row per series of either side), or json", std::string("markdown"),
       FlagKind::value, report_format_choice_names(comparison_writers())},
      {"fail_above", "", "PCT",
       "exit with code 3 when a series is slower beyond the noise and by more than PCT percent (its measured "
       "slowdown, the point estimate): a gate for CI and nightly jobs"},
      {"noise_floor", "", "PCT", "a smaller change of speed, in percent, is within noise however tight the samples",
       fmt::format("{:g}", defaults.noise_floor_pct)},
      {"reference", "", "",
       "compare each RESULT (files or folders) with the reference result of its workload instead of BASE with NEW: "
       "dpbench compare --reference RESULT... (README, \"Is my number normal?\")",
       std::nullopt, FlagKind::alone},
      {"reference_dir", "", "DIR",
       "with --reference: the folder of reference results (default: the one dpbench ships, or "
       "DPBENCH_REFERENCE_RESULTS where set)"},
  };
  return table;
}

namespace {

// Why a side gave no result at all, in one line: the one file's reason, or the first of several.
std::string why_no_results(const std::string& path, const LoadedResults& loaded) {
  if (loaded.skipped.empty()) return "no *.json files in it";
  const SkippedFile& first = loaded.skipped.front();
  const std::string first_why = (first.path == path ? "" : "'" + escaped_value(first.path) + "': ") + first.reason;
  if (loaded.skipped.size() == 1) return first_why;
  return std::to_string(loaded.files_examined) + " file(s) examined, " + std::to_string(loaded.skipped.size()) +
         " skipped (the first, " + first_why + ")";
}

LoadedResults load_side(const std::string& side, const std::vector<std::string>& paths) {
  LoadedResults loaded = load_results(paths);
  if (loaded.results.empty()) {
    const std::string path = paths.size() == 1 ? paths.front() : std::string();
    throw RuntimeError("compare: no dpbench results in " + side + " " +
                       (paths.size() == 1 ? "'" + escaped_value(path) + "'" : quoted_list(paths)) + ": " +
                       why_no_results(path, loaded));
  }
  return loaded;
}

// "resnet50, replicated (nccl), ..., 8 GPUs (-5.2%)" for each series over the gate.
std::string over_gate_list(const ResultComparison& comparison) {
  std::vector<std::string> entries;
  for (const ComparedSeries& entry : comparison.series)
    if (entry.over_fail_above(comparison.fail_above_pct))
      entries.push_back(entry.label() + " (" + format_fixed(*entry.speeds.change_pct(), 1) + "%)");
  return join(entries, "; ");
}

// "nearest: FILE, LABEL, which differs in ...", for the warning of a series without a reference.
std::string no_reference_words(const ReferenceNote& note) {
  if (note.nearest.empty()) return "the folder has no reference results";
  return "nearest: " + note.nearest + ", which differs in " + join(note.nearest_differences, ", ");
}

}  // namespace

CompareOptions parse_compare_flags(const std::vector<std::string>& args) {
  const ReadFlags flags = read_flags(compare_flag_table(), args);
  CompareOptions options;
  options.help = flags.help();
  if (options.help) return options;
  options.output = flags.text("output");
  options.format = parse_report_format(flags.text("format"), comparison_writers());
  if (flags.given("fail_above")) options.fail_above_pct = parse_percentage("fail_above", flags.text("fail_above"));
  options.settings.noise_floor_pct = parse_percentage("noise_floor", flags.text("noise_floor"));
  options.against_references = flags.given("reference");
  if (options.against_references) {
    if (flags.paths.empty())
      throw ConfigError("compare: --reference takes one or more result files or folders (got none); usage: dpbench "
                        "compare --reference [flags] RESULT... (dpbench compare --help)");
    options.new_paths = flags.paths;
    options.base_path = flags.given("reference_dir") ? flags.text("reference_dir") : default_reference_folder();
    // The default folder is checked when it is read (a missing one is no command-line error).
    std::vector<std::string> inputs = flags.paths;
    if (flags.given("reference_dir")) inputs.push_back(options.base_path);
    check_offline_paths("compare", inputs, options.output);
    return options;
  }
  if (flags.given("reference_dir"))
    throw ConfigError("compare: --reference_dir=" + quoted_argument(flags.text("reference_dir")) +
                      " names the reference results of --reference; give --reference too, or drop it");
  if (flags.paths.size() != 2) {
    throw ConfigError("compare: give two result files or folders, BASE and NEW (got " +
                      std::to_string(flags.paths.size()) + "); usage: dpbench compare [flags] BASE NEW "
                      "(dpbench compare --help)");
  }
  options.base_path = flags.paths[0];
  options.new_paths = {flags.paths[1]};
  check_offline_paths("compare", flags.paths, options.output);
  return options;
}

std::string compare_help_text() {
  const ComparisonSettings defaults;
  return "usage: dpbench compare [flags] BASE NEW\n"
         "       dpbench compare --reference [flags] RESULT...\n"
         "Compares two sets of dpbench results, BASE and NEW (each a result file or a folder searched recursively\n"
         "for *.json). Series are matched by report's series key (model, strategy and its options, precision, data\n"
         "format, data, backend, GPU type, batch) and the GPU count; series on one side only are listed. For each\n"
         "matched series: both speeds (items/s over the measured steps; the mean of a side's runs where it has\n"
         "several), the ratio NEW / BASE, its " + percent_text(100.0 * defaults.confidence) +
         " bootstrap confidence interval (" + std::to_string(defaults.resamples) + " resamples of the runs and of\n"
         "blocks of consecutive steps within them; fixed seed, so the same inputs give the same output), and a\n"
         "verdict: faster or slower when the whole interval lies above or below 1 and the speed changed by at\n"
         "least the noise floor, else within noise; too few samples where a side has no run with 2 or more\n"
         "measured steps. Interrupted runs and files that are not results are skipped with a note. A series\n"
         "whose runs differ in their workload (a model setting, the optimizer, ...) is refused, not compared, its\n"
         "differing flags named (and never fails the gate).\n"
         "With --reference, each RESULT (a file or a folder) is compared with the reference result of its workload\n"
         "instead: the runs dpbench's authors measured, shipped with it (--reference_dir for another folder), the\n"
         "one on the same GPU type first; the same speeds, interval, verdict, gate and exit codes, and the ways the\n"
         "two machines differ (GPU, power limit, clocks, execution flags, driver, libraries) listed.\n\n" +
         flag_table_help(compare_flag_table()) +
         "\nExit codes: 0 compared (and no series over --fail_above); 1 an error (e.g. a side with no usable result,\n"
         "or a series whose runs differ in what they measure: refused);\n"
         "2 a bad command line; 3 a series slower than --fail_above allows (the output is written all the same).\n"
         "Example: dpbench compare results/before results/after --fail_above=2 --output COMPARE.md\n"
         "         dpbench compare --reference results/ --fail_above=5\n";
}

int run_compare_command(const std::vector<std::string>& args) {
  const CompareOptions options = parse_compare_flags(args);
  if (options.help) {
    write_text_atomically("-", compare_help_text(), "compare's help");
    return 0;
  }
  const bool references = options.against_references;
  const std::string base_side = references ? "the reference results" : "BASE";
  if (references && !std::filesystem::exists(options.base_path))
    throw RuntimeError("compare: no dpbench results in " + base_side + " '" + escaped_value(options.base_path) +
                       "': no such folder (give --reference_dir=DIR, or set DPBENCH_REFERENCE_RESULTS)");
  LoadedResults base = load_side(base_side, {options.base_path});
  LoadedResults changed = load_side("NEW", options.new_paths);
  // Every line from here quotes files: escaped, so no control byte of theirs reaches the terminal.
  auto warn = [](const std::string& text) { error_log().warn(escaped_value("compare: " + text)); };
  for (const auto& [side, loaded] : {std::make_pair("BASE", &base), std::make_pair("NEW", &changed)})
    for (const SkippedFile& skipped : loaded->skipped)
      warn(std::string("skipped ") + side + " " + skipped.path + ": " + skipped.reason);

  const std::string new_path = join(options.new_paths, ", ");
  const ResultComparison comparison =
      references ? compare_with_references(options.base_path, std::move(base), new_path, std::move(changed),
                                           strategy_catalog_for_reports(), options.settings, options.fail_above_pct)
                 : compare_results(options.base_path, std::move(base), new_path, std::move(changed),
                                   strategy_catalog_for_reports(), options.settings, options.fail_above_pct);
  write_offline_output("compare", render_in_format(options.format, comparison, comparison_writers()), options.output);
  int refused = 0;
  for (const ComparedSeries& entry : comparison.series)
    if (entry.refused()) {
      ++refused;
      warn("refused " + entry.label() + ": the runs differ in " + join(entry.workload_differences, ", ") +
           "; compare runs of one workload");
    }
  if (references)
    for (const ComparedSeries& entry : comparison.series)
      if (!entry.matched() && entry.reference)
        warn("no reference for " + entry.label() + " (" + no_reference_words(*entry.reference) + ")");
  // A gate that compared nothing passes; a changed GPU type or flag must not pass it unnoticed.
  if (comparison.matched_count() == 0)
    warn(references ? "no result has a reference of its workload, so nothing was compared (the output names each "
                      "one's nearest reference)"
                    : "no series is in both BASE and NEW, so nothing was compared (each side's series are listed in "
                      "the output)");
  if (comparison.over_fail_above_count() > 0)
    error_log().error(escaped_value("compare: " + count_of(comparison.over_fail_above_count(), "series", "series") +
                                    " slower beyond the noise by more than --fail_above=" +
                                    percent_text(*options.fail_above_pct) + ": " + over_gate_list(comparison)));
  // A series whose two sides measured different workloads has no verdict, so the comparison
  // (and a gate built on it) did not do its job: an error, whatever the other series say.
  if (refused > 0) {
    error_log().error("compare: " + count_of(refused, "series", "series") +
                      " refused (the runs differ in what they measure, named above); compare runs of one workload");
    return 1;
  }
  return comparison.over_fail_above_count() > 0 ? kCompareSlowerExitCode : 0;
}

}  // namespace dpbench
