// `dpbench compare`'s model: two sets of results (BASE and NEW) grouped into series at a GPU count
// by report's series key (reports/report_series.h) plus the GPU count, matched key to key, each
// pair's speeds compared from their per-step samples (reports/speed_comparison.h), and the series
// found on one side only. A matched series whose runs differ in their workload (a model setting,
// the optimizer, ...: reports/workload_flags.h) is refused, the differing flags named, rather
// than compared. With --reference, BASE is the reference results instead: each NEW series against
// the reference of its workload (compare_with_references). Rendered by reports/comparison_tables.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/report_loader.h"
#include "reports/report_series.h"
#include "reports/speed_comparison.h"
#include "reports/strategy_catalog.h"

namespace dpbench {

// One side's runs of one series at one GPU count.
struct ComparedRuns {
  std::vector<std::string> files;      // every run's path, in path order
  std::vector<SkippedFile> left_out;   // runs in `files` whose samples cannot take part, and why
  size_t runs_used() const { return files.size() - left_out.size(); }
};

// `dpbench compare --reference`: what a NEW series was compared with, or why with nothing.
struct ReferenceNote {
  std::string label;  // the reference's (reference_label), "" where none matched
  std::vector<std::string> machine_differences;  // NEW's first run against the reference (reference_results.h)
  // None matched: the nearest reference's file and label, "" where the folder has none, and how its
  // workload differs ("batch_size (this run 32; reference 16)").
  std::string nearest;
  std::vector<std::string> nearest_differences;
};

// The name of the reference side in workload differences.
inline constexpr const char* kReferenceSide = "REFERENCE";

struct ComparedSeries {
  SeriesKey key;
  int64_t num_devices = 0;
  std::string title;  // series_label, made unique within the comparison
  std::optional<ComparedRuns> base_runs, new_runs;  // one absent: the series is on the other side only
  SpeedComparison speeds;  // on one side only or refused: each side's speed, no ratio
  // Matched, but its runs differ in these workload flags, "num_units (BASE 8; NEW 256)": refused.
  std::vector<std::string> workload_differences;
  std::optional<ReferenceNote> reference;  // with --reference only

  bool matched() const { return base_runs && new_runs; }
  bool refused() const { return matched() && !workload_differences.empty(); }
  bool compared() const { return matched() && workload_differences.empty(); }
  std::string label() const;  // "<title>, 8 GPUs"
  // Slower beyond the noise and by more than `fail_above_pct` (none: no gate, never).
  bool over_fail_above(std::optional<double> fail_above_pct) const;
};

// What one side was: the path given, and what its loading found.
struct ComparedInput {
  std::string path;
  size_t results = 0;
  size_t files_examined = 0;
  std::vector<SkippedFile> skipped;
};

struct ResultComparison {
  ComparedInput base, changed;  // BASE and NEW
  ComparisonSettings settings;
  std::optional<double> fail_above_pct;  // the gate, where one was asked for
  std::vector<ComparedSeries> series;    // in report order (SeriesKeyLess, then GPU count)
  // `dpbench compare --reference`: BASE is the folder of reference results, each NEW series
  // compared with the reference of its workload (every series has `reference`).
  bool against_references = false;

  size_t matched_count() const;  // in both, compared or refused
  size_t refused_count() const;
  size_t over_fail_above_count() const;
};

// Groups, matches and compares. `base_path` and `new_path` only name the sides.
ResultComparison compare_results(const std::string& base_path, LoadedResults base, const std::string& new_path,
                                 LoadedResults changed, const StrategyCatalog& strategies,
                                 const ComparisonSettings& settings, std::optional<double> fail_above_pct);

// `dpbench compare --reference`: NEW's series, grouped as compare_results groups them, each with
// the reference its first run takes from `references` (reports/reference_results.h: one workload,
// the run's GPU type first) as its BASE, the reference's repeats its runs; a series without one is
// on the NEW side only, its ReferenceNote naming the nearest reference. Compared with the same
// speeds, interval, verdict and gate as compare_results; `folder` and `new_path` name the sides.
ResultComparison compare_with_references(const std::string& folder, LoadedResults references,
                                         const std::string& new_path, LoadedResults changed,
                                         const StrategyCatalog& strategies, const ComparisonSettings& settings,
                                         std::optional<double> fail_above_pct);

}  // namespace dpbench
