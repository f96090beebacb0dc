// Speedup, step-time, memory and efficiency figures of `dpbench report --plots` (see report_plots.h).
#include "reports/report_plots.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "reports/memory_report.h"
#include "reports/svg_chart.h"
#include "reports/text_file.h"

namespace dpbench {
namespace {

constexpr size_t kMaxStemLength = 150;

// "GPU"/"GPUs", or "device"/"devices" for the reference backend's host stand-ins.
std::string devices_word(const SeriesKey& key, int64_t count) {
  const std::string word = key.backend == "reference" ? "device" : "GPU";
  return count == 1 ? word : word + "s";
}

LineChart speedup_chart(const Report& report, const Comparison& comparison) {
  LineChart chart;
  chart.title = "Speedup: " + comparison.title;
  const SeriesKey& key = report.series[comparison.series.front()].key;
  chart.x_label = devices_word(key, 2);
  chart.y_label = "Speedup over 1 " + devices_word(key, 1) + " (same strategy)";
  chart.x_ticks.assign(comparison.gpu_counts.begin(), comparison.gpu_counts.end());
  if (std::find(chart.x_ticks.begin(), chart.x_ticks.end(), 1.0) == chart.x_ticks.end())
    chart.x_ticks.insert(chart.x_ticks.begin(), 1.0);
  for (size_t column = 0; column < comparison.series.size(); ++column) {
    const Series& series = report.series[comparison.series[column]];
    ChartLine line;
    line.label = comparison.column_labels[column];
    line.markers = true;
    if (series.baseline_missing) {
      line.label += " (no 1-" + devices_word(key, 1) + " run: not drawn)";  // a speedup needs its baseline
    } else {
      for (const SeriesRow& row : series.rows)
        line.points.push_back({static_cast<double>(row.num_devices), *row.speedup});
    }
    chart.lines.push_back(std::move(line));
  }
  ChartLine ideal;
  ideal.label = "ideal (y = x)";
  ideal.dashed = true;
  ideal.color = "#444";
  ideal.points = {{1, 1}, {chart.x_ticks.back(), chart.x_ticks.back()}};
  chart.lines.push_back(std::move(ideal));
  return chart;
}

LineChart step_time_chart(const Series& series, const SeriesRow& row) {
  const Result& result = row.run().result;
  LineChart chart;
  chart.title = "Step times: " + series.title + ", " + std::to_string(row.num_devices) + " " +
                devices_word(series.key, row.num_devices);
  chart.x_label = "Step";
  chart.y_label = "Step time (ms)";
  ChartLine times;
  times.label = "step time (slowest device)";
  double measured_max = 0, first_measured = -1;
  int64_t first_warmup = -1, last_warmup = -1;
  for (const StepRecord& step : result.steps) {
    times.points.push_back({static_cast<double>(step.step), step.time_ms});
    if (step.warmup) {
      if (first_warmup < 0) first_warmup = step.step;
      last_warmup = std::max(last_warmup, step.step);
    } else {
      measured_max = std::max(measured_max, step.time_ms);
      if (first_measured < 0) first_measured = static_cast<double>(step.step);
    }
  }
  chart.lines.push_back(std::move(times));
  if (result.summary.step_time_ms && first_measured >= 0) {
    const double median = result.summary.step_time_ms->median;
    ChartLine median_line;
    median_line.label = "median of the measured steps (" + format_fixed(median, 2) + " ms)";
    median_line.dashed = true;
    median_line.color = "#444";
    median_line.points = {{first_measured, median}, {static_cast<double>(result.steps.back().step), median}};
    chart.lines.push_back(std::move(median_line));
  }
  if (first_warmup >= 0) {
    // Up to halfway to the next step, so the last warm-up point lies inside the band.
    chart.shaded = ShadedRange{static_cast<double>(first_warmup), static_cast<double>(last_warmup) + 0.5,
                               "warm-up steps (" + std::to_string(last_warmup - first_warmup + 1) +
                                   ", not measured)"};
  }
  // A first step that builds graphs or picks algorithms can take 100x longer; drawing it to scale
  // would flatten the measured steps into a line at the bottom.
  if (measured_max > 0) chart.y_limit = 1.5 * measured_max;
  // The axis ends at the last step: round ticks inside the steps' range, then the last step itself
  // (in place of a round tick closer to it than half a tick apart).
  if (!result.steps.empty()) {
    const double first = static_cast<double>(result.steps.front().step);
    const double last = static_cast<double>(result.steps.back().step);
    const std::vector<double> round = nice_ticks(first, last, 8);
    const double spacing = round.size() > 1 ? round[1] - round[0] : 1.0;
    for (double tick : round)
      if (tick >= first && tick <= last - spacing / 2) chart.x_ticks.push_back(tick);
    chart.x_ticks.push_back(last);
  }
  return chart;
}

// Appends "_2", "_3", ... where two figures would get the same name.
std::string unique_name(const std::string& stem, std::set<std::string>* used) {
  std::string name = stem + ".svg";
  for (int suffix = 2; used->count(name) > 0; ++suffix) name = stem + "_" + std::to_string(suffix) + ".svg";
  used->insert(name);
  return name;
}

}  // namespace

std::string safe_file_stem(const std::string& text) {
  std::string stem;
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u) && u < 128) {
      stem += static_cast<char>(std::tolower(u));
    } else if (c == '-') {
      stem += c;
    } else if (!stem.empty() && stem.back() != '_') {
      stem += '_';
    }
  }
  while (!stem.empty() && stem.back() == '_') stem.pop_back();
  if (stem.size() > kMaxStemLength) stem.resize(kMaxStemLength);
  return stem.empty() ? "figure" : stem;
}

// Where each multi-GPU run's efficiency went (Note [where the efficiency went] in
// report_series.cpp): one stacked bar per GPU count.
static StackedBarChart efficiency_loss_chart(const Series& series) {
  StackedBarChart chart;
  chart.title = "Where the efficiency went: " + series.title;
  chart.x_label = series.key.backend == "reference" ? "devices" : "GPUs";
  chart.y_label = "points of efficiency lost against 1 " + std::string(series.key.backend == "reference" ? "device" : "GPU");
  chart.parts = {"exposed communication", "straggler wait", "clock loss", "data wait", "host gaps", "other"};
  for (const SeriesRow& row : series.rows) {
    if (!row.efficiency_loss) continue;
    const EfficiencyLoss& loss = *row.efficiency_loss;
    chart.categories.push_back(std::to_string(row.num_devices) + " " + devices_word(series.key, row.num_devices) + " (" +
                               format_fixed(*row.efficiency_pct, 1) + "%)");
    chart.values.push_back({loss.exposed_comm, loss.straggler, loss.clock, loss.data, loss.host, loss.other});
  }
  return chart;
}

std::vector<PlotFile> build_report_plots(const Report& report, std::vector<std::string>* notes) {
  std::vector<PlotFile> plots;
  std::set<std::string> used;
  for (const Comparison& comparison : report.comparisons) {
    plots.push_back({unique_name("speedup_" + safe_file_stem(comparison.title), &used),
                     render_svg(speedup_chart(report, comparison))});
  }
  for (const Series& series : report.series) {
    const SeriesRow& largest = series.rows.back();
    if (largest.run().result.steps.empty()) {
      notes->push_back("no step-time figure for " + series.title + ": " + largest.run().path +
                       " records no steps");
      continue;
    }
    const std::string stem =
        "steps_" + safe_file_stem(series.title) + "_" + std::to_string(largest.num_devices) + "gpu";
    plots.push_back({unique_name(stem, &used), render_svg(step_time_chart(series, largest))});
  }
  for (const Comparison& comparison : report.comparisons) {
    const StackedBarChart chart = memory_chart(comparison.title, memory_rows(report, comparison));
    if (!chart.categories.empty())
      plots.push_back({unique_name("memory_" + safe_file_stem(comparison.title), &used), render_svg(chart)});
  }
  for (const Series& series : report.series) {
    const StackedBarChart chart = efficiency_loss_chart(series);
    if (!chart.categories.empty())
      plots.push_back({unique_name("efficiency_" + safe_file_stem(series.title), &used), render_svg(chart)});
  }
  return plots;
}

void write_report_plots(const std::vector<PlotFile>& plots, const std::string& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) throw std::runtime_error("cannot create the plot folder '" + directory + "': " + error.message());
  for (const PlotFile& plot : plots) write_text_atomically((std::filesystem::path(directory) / plot.name).string(), plot.svg);
}

}  // namespace dpbench
