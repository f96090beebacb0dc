// Grouping results into series for `dpbench report`: runs that differ only in their GPU count form
// one series (model, strategy and its options, precision, layout, backend, device, unit, and the
// batch: per GPU for weak scaling, total for strong scaling); each series' speedups over its
// 1-GPU run; and the comparison groups (one workload, one column per strategy).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reports/report_loader.h"
#include "reports/strategy_catalog.h"

namespace dpbench {

// Weak scaling: the batch per GPU is fixed (--batch_size). Strong scaling: the total batch is
// fixed (--total_batch_size) and split over the GPUs.
enum class Scaling { weak, strong };
const char* scaling_name(Scaling scaling);  // "weak", "strong"

using KeyFields = std::vector<std::pair<std::string, std::string>>;  // (name, value) in a fixed order

// Everything that must agree for two runs to share a table. Strategy options hold the config's
// values as text ("" where the strategy takes none, e.g. every option of independent).
struct SeriesKey {
  Scaling scaling = Scaling::weak;
  int64_t batch = 0;  // per GPU (weak) or total (strong)
  std::string model, encoder_type, direction;  // encoder_type, direction: sequence models only
  std::string precision, data_format;
  bool forward_only = false;  // inference runs (--forward_only) form series of their own
  // --activation_checkpointing's recorded value ("none" where an older result lacks it): runs that
  // recompute their blocks form series of their own.
  std::string activation_checkpointing = "none";
  std::string backend;      // "cuda" | "reference"
  std::string device_name;  // the GPUs' name ("" on the reference backend, whose devices are all alike)
  std::string unit;         // "images/s", "words/s", ...
  // The data and how it was fed, e.g. "cifar10, host feed (prefetch 2)"; "" for synthetic data kept
  // on the device (the default, and every result written before the data flags existed).
  std::string data;
  std::string variable_update;
  // "one process per GPU" where a strategy that runs either way ran so (a launcher started it, or
  // the job had more devices than each process drove), else "".
  std::string processes;
  // Every option of the catalog, in its order: the recorded value (or the option's default where an
  // older result lacks it) for an option the strategy takes, "" for the others.
  KeyFields strategy_options;
  int strategy_rank = 0;       // the strategy's column in comparison tables
  std::string strategy_words;  // strategy_label's text, from the catalog

  KeyFields workload_fields() const;  // all but the strategy: what a comparison table holds fixed
  KeyFields strategy_fields() const;  // variable_update and its options
  KeyFields fields() const;           // workload_fields, then strategy_fields
};

SeriesKey series_key_of(const Result& result, const StrategyCatalog& strategies);

// The order of series in a report: scaling mode, then the workload, then the strategy. Two keys
// neither of which is less are the same series, so this is also how results are matched to one.
struct SeriesKeyLess {
  bool operator()(const SeriesKey& a, const SeriesKey& b) const;
};

// In words: "replicated (nccl)", "parameter_server (cpu, repacking 4)", "independent".
std::string strategy_label(const SeriesKey& key);
// "resnet50, fp32, NCHW, batch 64 per GPU (weak scaling)"; "nmt (dynamic, bi), fp16, total batch
// 768 (strong scaling)"; the reference backend says so.
std::string workload_label(const SeriesKey& key);
// "resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling)"
std::string series_label(const SeriesKey& key);

// Where an N-GPU run's scaling efficiency went, in points of efficiency (the lost points, 100 -
// efficiency, split by the parts of summary.breakdown that grew against the 1-GPU run; Note
// [where the efficiency went] in report_series.cpp). Weak scaling only.
struct EfficiencyLoss {
  double exposed_comm = 0, straggler = 0, clock = 0, data = 0, host = 0, other = 0;
  bool clock_known = false;  // both runs have the GPUs' mean SM clock (telemetry)
};

// The points of `run`'s efficiency lost to a lower GPU clock than `single`'s: the compute it spent
// (forward, backward, update, from summary.breakdown) above what it would have spent at `single`'s
// mean SM clock, in % of its wall time per step. None where either run lacks the breakdown or the
// GPU telemetry's mean clock. (`report`'s "where the efficiency went" and `predict`'s
// equal-clock error both take it from here.)
std::optional<double> clock_loss_points(const Result& run, const Result& single);

struct SeriesRow {
  int64_t num_devices = 0;
  std::vector<LoadedResult> runs;  // every run at this GPU count, slowest first
  size_t chosen = 0;               // the median run by items_per_sec (the slower middle one of an even count)
  std::optional<double> speedup;   // items_per_sec / the 1-GPU row's; none without a 1-GPU row
  std::optional<double> efficiency_pct;  // 100 x speedup / num_devices
  // More than one GPU, weak scaling, and breakdowns in this run and the 1-GPU run.
  std::optional<EfficiencyLoss> efficiency_loss;
  const LoadedResult& run() const { return runs[chosen]; }
};

struct Series {
  SeriesKey key;
  std::string title;            // series_label, made unique within the report where needed
  std::vector<SeriesRow> rows;  // by GPU count
  bool baseline_missing = false;
  std::vector<std::string> notes;  // missing 1-GPU run, repeated runs, config that differs between runs
};

// One workload (model, precision, batch, ...) with its strategies side by side.
struct Comparison {
  std::string title;               // workload_label, made unique within the report where needed
  Scaling scaling = Scaling::weak;
  std::string unit;
  std::vector<size_t> series;      // indices into Report::series, one column each, in order
  std::vector<std::string> column_labels;  // strategy_label of each, made unique where two read alike
  std::vector<int64_t> gpu_counts; // every GPU count of any of them, ascending
};

struct Report {
  std::vector<Series> series;          // weak scaling first, then strong; a workload's series together
  std::vector<Comparison> comparisons; // in the order of their series
  std::vector<SkippedFile> skipped;
  size_t results = 0;
  size_t files_examined = 0;
};

Report build_report(LoadedResults loaded, const StrategyCatalog& strategies);

// The row of `series` with `num_devices` GPUs, or null.
const SeriesRow* find_row(const Series& series, int64_t num_devices);

// Two different keys can read the same in words (e.g. the same series on two GPU types): such
// titles get the key fields that tell them apart appended (`fields[i]` are titles[i]'s key's, all
// in one order), so no two tables or rows share a heading.
void make_titles_unique(std::vector<std::string>& titles, const std::vector<KeyFields>& fields);

// "%.<decimals>f"; "n/a" for a non-finite value.
std::string format_fixed(double value, int decimals);

}  // namespace dpbench
