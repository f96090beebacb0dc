// Grouping and matching the results of `dpbench compare` (see result_comparison.h).
#include "reports/result_comparison.h"

#include <map>
#include <utility>

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
};

using Grouped = std::map<SeriesAtGpus, GroupedRuns, SeriesAtGpusLess>;

Grouped group_runs(const LoadedResults& loaded, const StrategyCatalog& strategies) {
  Grouped grouped;
  for (const LoadedResult& run : loaded.results) {
    const SeriesKey key = series_key_of(run.result, strategies);
    GroupedRuns& group = grouped[{key, run.result.summary.num_devices}];
    group.runs.files.push_back(run.path);
    add_workload_values(run.result.config, key.scaling == Scaling::strong, {}, &group.workload);
    std::vector<StepSample> samples = measured_steps_of(run.result);
    const std::string why_not = why_too_few_samples(samples);
    if (why_not.empty()) group.samples.push_back(std::move(samples));
    else group.runs.left_out.push_back({run.path, why_not});
  }
  return grouped;
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
  comparison.base = input_of(base_path, base);
  comparison.changed = input_of(new_path, changed);

  std::map<SeriesAtGpus, ComparedSeries, SeriesAtGpusLess> merged;
  for (const auto& [at, group] : base_groups) merged[at].base_runs = group.runs;
  for (const auto& [at, group] : new_groups) merged[at].new_runs = group.runs;
  // A series on one side only still gets that side's speed (and no ratio).
  const std::vector<std::vector<StepSample>> no_runs;
  auto samples_in = [&](const Grouped& groups, const SeriesAtGpus& at) -> const std::vector<std::vector<StepSample>>& {
    const auto found = groups.find(at);
    return found == groups.end() ? no_runs : found->second.samples;
  };
  for (auto& [at, entry] : merged) {
    entry.key = at.key;
    entry.num_devices = at.num_devices;
    if (entry.matched())
      entry.workload_differences =
          workload_differences({{"BASE", base_groups.at(at).workload}, {"NEW", new_groups.at(at).workload}});
    if (entry.refused()) {
      // Each side's own speed, and no ratio: the runs did not compute the same thing.
      entry.speeds = compare_speeds(samples_in(base_groups, at), {}, settings);
      entry.speeds.new_speed = compare_speeds({}, samples_in(new_groups, at), settings).new_speed;
    } else {
      entry.speeds = compare_speeds(samples_in(base_groups, at), samples_in(new_groups, at), settings);
    }
    comparison.series.push_back(std::move(entry));
  }
  give_titles(comparison.series);
  return comparison;
}

}  // namespace dpbench
