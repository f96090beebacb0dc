// Grouping and matching the results of `dpbench compare` (see result_comparison.h).
#include "reports/result_comparison.h"

#include <map>
#include <utility>

#include "reports/reference_results.h"
#include "reports/workload_flags.h"

namespace dpbench {
namespace {

// A series at one GPU count: what compare matches. Report's series span GPU counts, compare's do
// not: 8 GPUs of BASE are compared with 8 GPUs of NEW only.
struct SeriesAtGpus {
  SeriesKey key;
  int64_t num_devices = 0;
};

struct SeriesAtGpusLess {
  bool operator()(const SeriesAtGpus& a, const SeriesAtGpus& b) const {
    const SeriesKeyLess less;
    if (less(a.key, b.key)) return true;
    if (less(b.key, a.key)) return false;
    return a.num_devices < b.num_devices;
  }
};

// One side's runs of a series with the samples of those that can take part.
struct GroupedRuns {
  ComparedRuns runs;
  std::vector<std::vector<StepSample>> samples;  // of the runs not left out
  FlagValues workload;                           // what every run recorded of its workload
  const LoadedResult* first = nullptr;           // the first run, in path order
};

using Grouped = std::map<SeriesAtGpus, GroupedRuns, SeriesAtGpusLess>;

void add_run(const LoadedResult& run, bool strong_scaling, GroupedRuns& group) {
  if (group.first == nullptr) group.first = &run;
  group.runs.files.push_back(run.path);
  add_workload_values(run.result.config, strong_scaling, {}, &group.workload);
  std::vector<StepSample> samples = measured_steps_of(run.result);
  const std::string why_not = why_too_few_samples(samples);
  if (why_not.empty()) group.samples.push_back(std::move(samples));
  else group.runs.left_out.push_back({run.path, why_not});
}

Grouped group_runs(const LoadedResults& loaded, const StrategyCatalog& strategies) {
  Grouped grouped;
  for (const LoadedResult& run : loaded.results) {
    const SeriesKey key = series_key_of(run.result, strategies);
    add_run(run, key.scaling == Scaling::strong, grouped[{key, run.result.summary.num_devices}]);
  }
  return grouped;
}

// One series at a GPU count, from a side's runs or both: matched and compared, refused where the
// runs differ in their workload (the sides named `base_name` and NEW), or on one side only.
ComparedSeries compare_groups(const SeriesAtGpus& at, const GroupedRuns* base, const GroupedRuns* changed,
                              const ComparisonSettings& settings, const std::string& base_name) {
  ComparedSeries entry;
  entry.key = at.key;
  entry.num_devices = at.num_devices;
  if (base != nullptr) entry.base_runs = base->runs;
  if (changed != nullptr) entry.new_runs = changed->runs;
  if (entry.matched())
    entry.workload_differences = workload_differences({{base_name, base->workload}, {"NEW", changed->workload}});
  // A series on one side only still gets that side's speed (and no ratio).
  const std::vector<std::vector<StepSample>> no_runs;
  const auto& base_samples = base != nullptr ? base->samples : no_runs;
  const auto& new_samples = changed != nullptr ? changed->samples : no_runs;
  if (entry.refused()) {
    // Each side's own speed, and no ratio: the runs did not compute the same thing.
    entry.speeds = compare_speeds(base_samples, {}, settings);
    entry.speeds.new_speed = compare_speeds({}, new_samples, settings).new_speed;
  } else {
    entry.speeds = compare_speeds(base_samples, new_samples, settings);
  }
  return entry;
}

ComparedInput input_of(const std::string& path, LoadedResults& loaded) {
  return {path, loaded.results.size(), loaded.files_examined, std::move(loaded.skipped)};
}

// Titles in words, unique over every series of either side (the same series on two GPU types
// reads alike); the GPU count has a column of its own, so one key gets one title.
void give_titles(std::vector<ComparedSeries>& series) {
  std::map<SeriesKey, std::string, SeriesKeyLess> titles;
  for (const ComparedSeries& entry : series) titles.emplace(entry.key, series_label(entry.key));
  std::vector<std::string> labels;
  std::vector<KeyFields> fields;
  for (const auto& [key, label] : titles) {
    labels.push_back(label);
    fields.push_back(key.fields());
  }
  make_titles_unique(labels, fields);
  size_t i = 0;
  for (auto& [key, title] : titles) title = labels[i++];
  for (ComparedSeries& entry : series) entry.title = titles.at(entry.key);
}

}  // namespace

std::string ComparedSeries::label() const {
  return title + ", " + std::to_string(num_devices) + (num_devices == 1 ? " GPU" : " GPUs");
}

bool ComparedSeries::over_fail_above(std::optional<double> fail_above_pct) const {
  return fail_above_pct && compared() && speeds.slower_by_more_than(*fail_above_pct);
}

size_t ResultComparison::matched_count() const {
  size_t count = 0;
  for (const ComparedSeries& entry : series) count += entry.matched() ? 1 : 0;
  return count;
}

size_t ResultComparison::refused_count() const {
  size_t count = 0;
  for (const ComparedSeries& entry : series) count += entry.refused() ? 1 : 0;
  return count;
}

size_t ResultComparison::over_fail_above_count() const {
  size_t count = 0;
  for (const ComparedSeries& entry : series) count += entry.over_fail_above(fail_above_pct) ? 1 : 0;
  return count;
}

ResultComparison compare_results(const std::string& base_path, LoadedResults base, const std::string& new_path,
                                 LoadedResults changed, const StrategyCatalog& strategies,
                                 const ComparisonSettings& settings, std::optional<double> fail_above_pct) {
  ResultComparison comparison;
  comparison.settings = settings;
  comparison.fail_above_pct = fail_above_pct;
  const Grouped base_groups = group_runs(base, strategies), new_groups = group_runs(changed, strategies);

  std::map<SeriesAtGpus, std::pair<const GroupedRuns*, const GroupedRuns*>, SeriesAtGpusLess> merged;
  for (const auto& [at, group] : base_groups) merged[at].first = &group;
  for (const auto& [at, group] : new_groups) merged[at].second = &group;
  for (const auto& [at, sides] : merged)
    comparison.series.push_back(compare_groups(at, sides.first, sides.second, settings, "BASE"));
  give_titles(comparison.series);
  comparison.base = input_of(base_path, base);
  comparison.changed = input_of(new_path, changed);
  return comparison;
}

ResultComparison compare_with_references(const std::string& folder, LoadedResults references,
                                         const std::string& new_path, LoadedResults changed,
                                         const StrategyCatalog& strategies, const ComparisonSettings& settings,
                                         std::optional<double> fail_above_pct) {
  ResultComparison comparison;
  comparison.settings = settings;
  comparison.fail_above_pct = fail_above_pct;
  comparison.against_references = true;
  const Grouped new_groups = group_runs(changed, strategies);
  for (const auto& [at, group] : new_groups) {
    // The series' first run stands for it; its other runs, were their workload another, make it refused.
    const ReferenceChoice choice = choose_reference(group.first->result, references.results, strategies);
    ReferenceNote note;
    if (!choice.matched()) {
      if (choice.nearest != nullptr) {
        note.nearest = path_in_folder(choice.nearest->path, folder) + ", " + reference_label(choice.nearest->result);
        note.nearest_differences = choice.nearest_differences;
      }
      ComparedSeries entry = compare_groups(at, nullptr, &group, settings, kReferenceSide);
      entry.reference = note;
      comparison.series.push_back(std::move(entry));
      continue;
    }
    GroupedRuns reference_runs;
    for (const LoadedResult* run : choice.runs) add_run(*run, at.key.scaling == Scaling::strong, reference_runs);
    ComparedSeries entry = compare_groups(at, &reference_runs, &group, settings, kReferenceSide);
    note.label = reference_label(choice.chosen->result);
    note.machine_differences = choice.machine_differences;
    entry.reference = note;
    comparison.series.push_back(std::move(entry));
  }
  give_titles(comparison.series);
  comparison.base = input_of(folder, references);
  comparison.changed = input_of(new_path, changed);
  return comparison;
}

}  // namespace dpbench
