// The results `dpbench predict` reads, checked and matched (see predict_inputs.h).
#include "cli/predict_inputs.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "cli/flag_limits.h"
#include "cli/strategies_command.h"
#include "engine/errors.h"
#include "engine/machine/text_content.h"
#include "engine/training/parameter_set.h"
#include "reports/report_series.h"
#include "reports/table_cells.h"
#include "reports/workload_flags.h"
#include "strategies/strategy_options.h"
#include "strategies/strategy_registry.h"
#include "strategies/synchronisation_options.h"

namespace dpbench {
namespace {

// The number a result's config records for `key`, where it records one; a RuntimeError naming
// the field for anything else.
std::optional<double> config_number(const nlohmann::json& config, const char* key, const std::string& where) {
  if (!config.contains(key)) return std::nullopt;
  const nlohmann::json& value = config.at(key);
  if (!value.is_number())
    throw RuntimeError(where + ": config." + key + " is " + escaped_value(value.dump(), kQuotedExcerptBytes) +
                       ", not a number");
  return value.get<double>();
}

// The bucket cap and tail bucket predicted: the flag's, else BASE's as `run` would have accepted it.
void choose_buckets(const std::string& bucket_cap_flag, const std::string& where, PredictBase* base) {
  const nlohmann::json& config = base->loaded.result.config;
  const std::optional<double> recorded_cap = config_number(config, "bucket_cap_mb", where);
  if (recorded_cap) {
    const std::string why_not = synchronisation_option("bucket_cap_mb").range.why_not(*recorded_cap);
    if (!why_not.empty())
      throw RuntimeError(where + ": config.bucket_cap_mb is " + config.at("bucket_cap_mb").dump() +
                         ", impossible for a run (--bucket_cap_mb " + why_not + ")");
  }
  const std::optional<double> tail = config_number(config, "tail_bucket_mb", where);
  const double own_cap = recorded_cap ? *recorded_cap : StrategyOptions().bucket_cap_mb;
  if (tail && !(*tail >= 0 && *tail <= own_cap))
    throw RuntimeError(where + ": config.tail_bucket_mb is " + config.at("tail_bucket_mb").dump() +
                       ", impossible for a run (expected 0 to its --bucket_cap_mb, " + fmt::format("{:g}", own_cap) +
                       ")");
  base->bucket_cap_mb = !bucket_cap_flag.empty() ? std::stod(bucket_cap_flag) : own_cap;
  base->cap_text = !bucket_cap_flag.empty() ? bucket_cap_flag : fmt::format("{:g}", own_cap);
  // The tail bucket (Note [tail bucket]) as the base run had it, where it fits the cap predicted.
  base->tail_bucket_mb = tail && *tail <= base->bucket_cap_mb ? *tail : 0.0;
}

// The timeline against the rest of its result: no more steps traced than measured, the tensors
// of the model the run counted, and every announced range inside their gradient buffer.
void check_timeline_against_result(const BackwardTimeline& timeline, const Summary& summary, const std::string& where) {
  if (timeline.traced_steps > summary.measured_steps)
    throw RuntimeError(where + ": summary.timeline.traced_steps " + std::to_string(timeline.traced_steps) +
                       " is more than summary.measured_steps " + std::to_string(summary.measured_steps) +
                       ", impossible for a run");
  if (timeline.total_elements() != summary.num_parameters)
    throw RuntimeError(where + ": summary.timeline.tensor_elements add up to " +
                       std::to_string(timeline.total_elements()) + " elements, but summary.num_parameters is " +
                       std::to_string(summary.num_parameters) + ": not the tensors of the run's model");
  const int64_t buffer = static_cast<int64_t>(gradient_layout_of(timeline).total_count());
  for (size_t i = 0; i < timeline.produced.size(); ++i) {
    const ProducedRange& range = timeline.produced[i];
    if (range.offset + range.count > buffer)
      throw RuntimeError(where + ": summary.timeline.produced[" + std::to_string(i) + "] (offset " +
                         std::to_string(range.offset) + ", count " + std::to_string(range.count) +
                         ") ends past the gradient buffer of its tensors (" + std::to_string(buffer) +
                         " elements), impossible for a run");
  }
  for (size_t i = 0; i < timeline.units.units.size(); ++i) {
    const GradientRange& range = timeline.units.units[i].range;
    if (static_cast<int64_t>(range.offset + range.count) > buffer)
      throw RuntimeError(where + ": summary.timeline.units[" + std::to_string(i) + "] (offset " +
                         std::to_string(range.offset) + ", count " + std::to_string(range.count) +
                         ") ends past the gradient buffer of its tensors (" + std::to_string(buffer) +
                         " elements), impossible for a run");
  }
}

}  // namespace

ParameterLayout gradient_layout_of(const BackwardTimeline& timeline) {
  ParameterLayout layout;
  // finalize() lays tensors out in reverse declaration order: declare the last one first.
  for (auto size = timeline.tensor_elements.rbegin(); size != timeline.tensor_elements.rend(); ++size)
    layout.declare("tensor", {*size});
  layout.finalize();
  return layout;
}

std::vector<std::string> predicted_labels_of(const nlohmann::json& config) {
  const StrategyEntry* entry = resolve_strategy_name(config_text(config, "variable_update"));
  if (entry == nullptr) return {};
  auto label_as = [&](const std::string& name) {
    OptionTexts options = recorded_options(name, StrategyOptions());
    for (auto& [key, text] : options)
      if (config.contains(key)) text = option_text(config.at(key));
    options.erase("bucket_cap_mb");
    options.erase("tail_bucket_mb");
    return strategy_label(name, options, false);
  };
  std::vector<std::string> labels = {label_as(entry->name)};
  if (!entry->predicted_as.empty()) labels.push_back(label_as(entry->predicted_as));
  return labels;
}

PredictBase load_predict_base(const std::string& path, const std::string& bucket_cap_flag, int num_layers) {
  const std::string where = "predict: BASE '" + escaped_value(path) + "'";
  LoadedResults loaded = load_results({path});
  if (loaded.results.size() != 1) {
    const std::string why = loaded.results.empty()
                                ? (loaded.skipped.empty() ? "no result in it" : loaded.skipped.front().reason)
                                : std::to_string(loaded.results.size()) + " results in it; give one 1-GPU result file";
    throw RuntimeError(where + ": " + why);
  }
  PredictBase base;
  base.loaded = std::move(loaded.results.front());
  const Result& result = base.loaded.result;
  if (result.summary.num_devices != 1)
    throw RuntimeError(where + " is a " + std::to_string(result.summary.num_devices) +
                       "-GPU result; give a 1-GPU run (--num_gpus=1) with " + kPredictTimelineFlags);
  if (config_text(result.config, "forward_only") == "true")
    throw RuntimeError(where + " is a forward-only run (--forward_only): it has no backward, whose gradients the "
                       "prediction exchanges; rerun it without --forward_only, with " +
                       std::string(kPredictTimelineFlags));
  if (result.summary.timeline.empty())
    throw RuntimeError(where + " has no summary.timeline (when backward produced each gradient); rerun it with " +
                       std::string(kPredictTimelineFlags));
  try {
    base.timeline = backward_timeline_from_json(result.summary.timeline);
  } catch (const RuntimeError& error) {
    throw RuntimeError(where + ": " + escaped_value(error.what()));
  }
  check_timeline_against_result(base.timeline, result.summary, where);
  if (num_layers > 0) base.depth = scale_base_to_layers(num_layers, where, &base.loaded.result, &base.timeline);
  choose_buckets(bucket_cap_flag, where, &base);
  return base;
}

void attach_measurements(const std::vector<std::string>& paths, const PredictBase& base, PredictionReport& report) {
  if (paths.empty()) return;
  report.measurements_given = true;
  const LoadedResults loaded = load_results(paths);
  for (const SkippedFile& skipped : loaded.skipped)
    report.notes.push_back("skipped `" + skipped.path + "`: " + skipped.reason);
  // BASE's workload, but for what a prediction varies: the strategy and its options (a run's
  // strategy picks its row; its buckets are checked against those predicted below).
  std::set<std::string> strategy_flags = {"variable_update"};
  for (const std::string& key : strategy_catalog_for_reports().option_keys) strategy_flags.insert(key);
  FlagValues base_workload;
  add_workload_values(base.loaded.result.config, false, strategy_flags, &base_workload);

  std::map<size_t, std::vector<const LoadedResult*>> runs_by_row;  // by index into report.rows
  for (const LoadedResult& measured : loaded.results) {
    const Result& result = measured.result;
    FlagValues workload;
    add_workload_values(result.config, false, strategy_flags, &workload);
    const std::vector<std::string> differences = workload_differences({{"BASE", base_workload}, {"MEASURED", workload}});
    // Its own rows first, else those of the one-process strategy that issues the same schedule.
    std::string label;
    for (const std::string& candidate : predicted_labels_of(result.config)) {
      const bool has_rows = std::any_of(report.rows.begin(), report.rows.end(),
                                        [&](const PredictionRow& row) { return row.strategy == candidate; });
      if (has_rows && label.empty()) label = candidate;
    }
    const bool predicted = !label.empty();
    const nlohmann::json cap = result.config.value("bucket_cap_mb", nlohmann::json());
    std::string why;
    if (!differences.empty())
      why = "another workload than BASE: it differs in " + join_parts(differences, ", ");
    else if (!predicted)
      why = "its strategy (" + escaped_value(config_text(result.config, "variable_update")) + ") is not predicted";
    else if (!cap.is_null() &&
             (!cap.is_number() || !synchronisation_option("bucket_cap_mb").range.why_not(cap.get<double>()).empty()))
      why = "config.bucket_cap_mb is " + escaped_value(cap.dump(), kQuotedExcerptBytes) + ", impossible for a run";
    else if (!cap.is_null() && cap.get<double>() != base.bucket_cap_mb)
      why = "its buckets (--bucket_cap_mb=" + fmt::format("{:g}", cap.get<double>()) + ") are not those predicted (" +
            base.cap_text + "); give --bucket_cap_mb=" + fmt::format("{:g}", cap.get<double>()) + " to compare with it";
    size_t match = report.rows.size();
    for (size_t i = 0; i < report.rows.size() && why.empty(); ++i)
      if (report.rows[i].strategy == label && report.rows[i].step.gpus == result.summary.num_devices)
        match = i;
    if (why.empty() && match == report.rows.size())
      why = std::to_string(result.summary.num_devices) + " GPUs is not a predicted count";
    if (!why.empty()) {
      report.notes.push_back("not compared: `" + measured.path + "`: " + why);
      continue;
    }
    runs_by_row[match].push_back(&measured);
  }
  // Repeats of one row: the median by speed, as `report` picks it (by speed, then path, so the
  // order the files were given in changes nothing), with every run's speed for the spread.
  for (auto& [index, runs] : runs_by_row) {
    PredictionRow* row = &report.rows[index];
    std::sort(runs.begin(), runs.end(), [](const LoadedResult* a, const LoadedResult* b) {
      return std::make_pair(a->result.summary.items_per_sec, a->path) <
             std::make_pair(b->result.summary.items_per_sec, b->path);
    });
    const LoadedResult& median = *runs[(runs.size() - 1) / 2];
    row->measured_items_per_sec = median.result.summary.items_per_sec;
    row->measured_path = median.path;
    row->measured_clock_loss_pct = clock_loss_points(median.result, base.loaded.result);
    // Its memory where the table predicts BASE's batch (a measured run ran BASE's workload).
    const nlohmann::json& memory = median.result.summary.memory;
    if (row->memory && report.memory_batch_size == report.base_batch_size && memory.is_object() &&
        memory.contains("peak_bytes") && memory["peak_bytes"].is_number())
      row->measured_memory_peak_bytes = memory["peak_bytes"].get<double>();
    for (const LoadedResult* run : runs) {
      row->measured_speeds.push_back(run->result.summary.items_per_sec);
      row->measured_paths.push_back(run->path);
    }
    if (runs.size() > 1)
      report.notes.push_back(row->strategy + ", " + std::to_string(row->step.gpus) + " GPUs: " +
                             std::to_string(runs.size()) + " measured runs; the error is the median run's (`" +
                             median.path + "`)");
  }
}

}  // namespace dpbench
