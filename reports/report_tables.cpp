// Markdown, CSV and JSON writers of `dpbench report` (see report_tables.h).
#include "reports/report_tables.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "reports/memory_report.h"
#include "reports/table_cells.h"

namespace dpbench {
namespace {

using nlohmann::json;

int64_t batch_per_gpu(const Result& result) {
  const auto found = result.config.find("batch_size");
  if (found != result.config.end() && found->is_number_integer()) return found->get<int64_t>();
  return result.summary.global_batch_size / result.summary.num_devices;
}

// The batches behind "Total time to process N batches": one N when every row measured the same.
std::optional<int64_t> common_measured_steps(const Series& series) {
  std::optional<int64_t> steps;
  for (const SeriesRow& row : series.rows) {
    const int64_t n = row.run().result.summary.measured_steps;
    if (steps && *steps != n) return std::nullopt;
    steps = n;
  }
  return steps;
}

// summary.flops' number `name`, where the result states it.
std::optional<double> flops_number(const Summary& summary, const char* name) {
  const auto found = summary.flops.find(name);
  if (found == summary.flops.end() || !found->is_number()) return std::nullopt;
  return found->get<double>();
}

std::optional<double> tflops_per_gpu(const Summary& summary) {
  return flops_number(summary, "tflops_per_sec_per_device");
}

// MFU in percent: only where the result knew the device's peak (a GPU of the peak table).
std::optional<double> mfu_pct(const Summary& summary) {
  const std::optional<double> mfu = flops_number(summary, "mfu");
  if (!mfu) return std::nullopt;
  return 100.0 * *mfu;
}

// The series tables show TFLOP/s and MFU where a run of the series has an MFU (GPU runs); the
// reference backend's runs count FLOPs too, but a CPU's peak means nothing here.
bool series_has_mfu(const Series& series) {
  for (const SeriesRow& row : series.rows)
    if (mfu_pct(row.run().result.summary)) return true;
  return false;
}

bool report_has_mfu(const Report& report) {
  for (const Series& series : report.series)
    if (series_has_mfu(series)) return true;
  return false;
}

// The Winograd and FFT algorithms among a run's classic-API convolutions
// (summary.math_paths.convolutions.classic_algorithms): "forward winograd_nonfused on 6 shapes,
// backward data fft_tiling on 1 shape"; "" where it ran none or the result does not say.
std::string fewer_multiplication_algorithms(const Summary& summary) {
  const nlohmann::json& paths = summary.math_paths;
  if (!paths.contains("convolutions") || !paths["convolutions"].contains("classic_algorithms")) return "";
  std::string found;
  for (const auto& [pass, algorithms] : paths["convolutions"]["classic_algorithms"].items()) {
    for (const auto& [name, count] : algorithms.items()) {
      if (name.find("winograd") == std::string::npos && name.find("fft") == std::string::npos) continue;
      std::string label = pass;
      std::replace(label.begin(), label.end(), '_', ' ');
      const int shapes = count.get<int>();
      found += (found.empty() ? "" : ", ") + label + " " + name + " on " + std::to_string(shapes) +
               (shapes == 1 ? " shape" : " shapes");
    }
  }
  return found;
}

// Why an MFU can pass 100%: the FLOP count is the direct method's, and the fast convolution
// algorithms (Winograd, FFT) do fewer multiplications than it, so a row above 100% is speed against
// the direct method, not a utilisation. The note names the rows and, where the results record
// them, the algorithms; none when every row is at most 100%.
std::optional<std::string> mfu_above_peak_note(const Series& series) {
  std::string rows, algorithms;
  for (const SeriesRow& row : series.rows) {
    const std::optional<double> mfu = mfu_pct(row.run().result.summary);
    if (!mfu || *mfu <= 100.0) continue;
    const std::string gpus = std::to_string(row.num_devices) + " GPU" + (row.num_devices == 1 ? "" : "s");
    rows += (rows.empty() ? "" : ", ") + gpus + ": " + format_fixed(*mfu, 1) + "%";
    const std::string used = fewer_multiplication_algorithms(row.run().result.summary);
    if (algorithms.empty() && !used.empty()) algorithms = "the " + gpus + " run's " + used;
  }
  if (rows.empty()) return std::nullopt;
  const std::string why =
      algorithms.empty() ? "convolution algorithms that do fewer multiplications (Winograd, FFT) can run above it"
                         : "the runs' convolutions include algorithms that do fewer multiplications (" + algorithms +
                               ")";
  return "MFU above 100% (" + rows +
         "): more model FLOPs per second than the dense peak of the math the run recorded. The FLOP count is "
         "that of direct convolutions and matrix products, and " + why +
         ", so such a figure measures speed against the direct method, not utilisation.";
}

std::string optional_fixed(const std::optional<double>& value, int decimals) {
  return value ? format_fixed(*value, decimals) : "n/a";
}

std::string speedup_text(const std::optional<double>& speedup) {
  return speedup ? format_fixed(*speedup, 2) : "n/a";
}

std::string series_table(const Series& series) {
  const bool same_steps = common_measured_steps(series).has_value();
  const bool with_mfu = series_has_mfu(series);
  std::string text = series_table_header(series);
  for (const SeriesRow& row : series.rows) {
    const Summary& summary = row.run().result.summary;
    std::string time = format_fixed(summary.total_time_s, 3);
    if (!same_steps) time += " (" + count_of(static_cast<size_t>(summary.measured_steps), "batch", "batches") + ")";
    std::vector<std::string> cells = {std::to_string(row.num_devices), std::to_string(batch_per_gpu(row.run().result)),
                                      std::to_string(summary.global_batch_size), time,
                                      format_fixed(summary.items_per_sec, 1), speedup_text(row.speedup),
                                      optional_fixed(row.efficiency_pct, 1), optional_fixed(summary.jitter, 1)};
    if (with_mfu) {
      cells.push_back(optional_fixed(tflops_per_gpu(summary), 1));
      cells.push_back(optional_fixed(mfu_pct(summary), 1));
    }
    text += markdown_row(cells);
  }
  return text;
}

// The efficiency decomposition of a series' multi-GPU rows (Note [where the efficiency went] in
// report_series.cpp); "" when no row has one.
std::string efficiency_loss_table(const Series& series) {
  std::string rows;
  for (const SeriesRow& row : series.rows) {
    if (!row.efficiency_loss) continue;
    const EfficiencyLoss& loss = *row.efficiency_loss;
    auto points = [](double value) { return format_fixed(std::fabs(value) < 0.05 ? 0.0 : value, 1); };  // no "-0.0"
    rows += markdown_row({std::to_string(row.num_devices), format_fixed(*row.efficiency_pct, 1),
                          points(loss.exposed_comm), points(loss.straggler),
                          loss.clock_known ? points(loss.clock) : "n/a", points(loss.data), points(loss.host),
                          points(loss.other)});
  }
  if (rows.empty()) return "";
  const std::vector<std::string> header = {"GPU number", "Efficiency %", "Exposed communication", "Straggler wait",
                                           "Clock loss", "Data wait", "Host gaps", "Other"};
  return "\nWhere the efficiency went (points lost against 1 GPU, by the parts of the step that grew):\n\n" +
         markdown_row(header) + right_aligned_rule(header.size()) + rows;
}

std::string notes_list(const std::vector<std::string>& notes) {
  if (notes.empty()) return "";
  std::string text = "\n";
  for (const std::string& note : notes) text += "- " + note + "\n";
  return text;
}

std::string comparison_table(const Report& report, const Comparison& comparison) {
  std::vector<std::string> header = {"GPU number"};
  for (const std::string& label : comparison.column_labels) header.push_back(label);
  std::string text = "Processing speed in " + comparison.unit +
                     " (speedup over the same strategy's 1-GPU run); - where a strategy has no run.\n\n";
  text += markdown_row(header) + right_aligned_rule(header.size());
  for (int64_t gpus : comparison.gpu_counts) {
    std::vector<std::string> cells = {std::to_string(gpus)};
    for (size_t index : comparison.series) {
      const SeriesRow* row = find_row(report.series[index], gpus);
      if (!row) {
        cells.push_back("-");
        continue;
      }
      const std::string speedup = row->speedup ? format_fixed(*row->speedup, 2) + "x" : "n/a";
      cells.push_back(format_fixed(row->run().result.summary.items_per_sec, 1) + " (" + speedup + ")");
    }
    text += markdown_row(cells);
  }
  return text;
}

// The decomposition's columns, in order (CSV) and by name (JSON).
const char* const kLossColumns[] = {"loss_exposed_comm_pts", "loss_straggler_pts", "loss_clock_pts",
                                    "loss_data_pts",         "loss_host_pts",      "loss_other_pts"};
std::vector<std::optional<double>> loss_values(const SeriesRow& row) {
  if (!row.efficiency_loss) return std::vector<std::optional<double>>(6);
  const EfficiencyLoss& loss = *row.efficiency_loss;
  return {loss.exposed_comm, loss.straggler, loss.clock_known ? std::optional<double>(loss.clock) : std::nullopt,
          loss.data,         loss.host,      loss.other};
}

json efficiency_loss_json(const SeriesRow& row) {
  if (!row.efficiency_loss) return nullptr;
  const std::vector<std::optional<double>> values = loss_values(row);
  json loss = json::object();
  for (size_t i = 0; i < values.size(); ++i) {
    std::string name = kLossColumns[i];
    loss[name.substr(5, name.size() - 9)] = json_number(values[i]);  // "loss_X_pts" -> "X"
  }
  return loss;
}

json row_to_json(const SeriesRow& row) {
  const Summary& summary = row.run().result.summary;
  return {{"gpu_number", row.num_devices},
          {"batch_size_per_gpu", batch_per_gpu(row.run().result)},
          {"total_batch", summary.global_batch_size},
          {"measured_batches", summary.measured_steps},
          {"total_time_s", json_number(summary.total_time_s)},
          {"items_per_sec", json_number(summary.items_per_sec)},
          {"speedup", json_number(row.speedup)},
          {"efficiency_pct", json_number(row.efficiency_pct)},
          {"jitter", json_number(summary.jitter)},
          {"tflops_per_gpu", json_number(tflops_per_gpu(summary))},
          {"mfu_pct", json_number(mfu_pct(summary))},
          {"efficiency_loss_points", efficiency_loss_json(row)},
          {"runs", row.runs.size()},
          {"file", row.run().path}};
}

}  // namespace

std::string series_table_header(const Series& series) {
  const std::optional<int64_t> steps = common_measured_steps(series);
  const std::string time_header = steps ? "Total time to process " + std::to_string(*steps) + " batches (s)"
                                        : "Total time to process the measured batches (s)";
  std::vector<std::string> header = {"GPU number",
                                     "Batch size per GPU",
                                     "Total batch",
                                     time_header,
                                     "Processing speed (" + series.key.unit + ")",
                                     "Speedup ratio",
                                     "Efficiency %",
                                     "Jitter"};
  if (series_has_mfu(series)) {
    header.push_back("TFLOP/s per GPU");
    header.push_back("MFU %");
  }
  return markdown_row(header) + right_aligned_rule(header.size());
}

json series_key_json(const SeriesKey& key) {
  json fields = json::object();
  for (const auto& [name, value] : key.fields()) fields[name] = value;
  fields["fixed_batch"] = key.batch;
  return fields;
}

std::string render_markdown(const Report& report) {
  std::string text = "# dpbench report\n\n";
  text += count_of(report.results, "result") + " from " + count_of(report.files_examined, "file") + " in " +
          count_of(report.series.size(), "series", "series");
  if (!report.skipped.empty()) text += "; " + count_of(report.skipped.size(), "file") + " skipped (listed at the end)";
  text += ".\nSpeedup ratio = processing speed on N GPUs / processing speed on 1 GPU of the same series; "
          "efficiency % = 100 x speedup / N; jitter = 1.4826 x median absolute deviation of the per-step "
          "processing speeds (same unit as the speed).\n";
  if (report_has_mfu(report))
    text += "TFLOP/s per GPU = the model's FLOPs per step (summary.flops: 2 per multiply-add of its convolutions and "
            "matrix products, backward as it runs) / step time; MFU % = 100 x that / the GPU's dense peak for the "
            "math that ran.\n";

  std::optional<Scaling> section;
  for (const Comparison& comparison : report.comparisons) {
    if (section != comparison.scaling) {
      section = comparison.scaling;
      text += comparison.scaling == Scaling::weak ? "\n## Weak scaling (fixed batch per GPU)\n"
                                                  : "\n## Strong scaling (fixed total batch)\n";
    }
    for (size_t index : comparison.series) {
      const Series& series = report.series[index];
      std::vector<std::string> notes = series.notes;
      if (std::optional<std::string> note = mfu_above_peak_note(series)) notes.push_back(std::move(*note));
      text += "\n### " + series.title + "\n\n" + series_table(series) + efficiency_loss_table(series) +
              notes_list(notes);
    }
    text += "\n### Comparison: " + comparison.title + "\n\n" + comparison_table(report, comparison);
    const std::string memory = memory_table(memory_rows(report, comparison));
    if (!memory.empty()) text += "\n" + memory;
  }
  if (!report.skipped.empty()) {
    text += "\n## Skipped files\n\n";
    for (const SkippedFile& skipped : report.skipped) text += "- `" + skipped.path + "`: " + skipped.reason + "\n";
  }
  return text;
}

std::string render_csv(const Report& report) {
  std::vector<std::string> header = {"series"};
  if (!report.series.empty())
    for (const auto& field : report.series.front().key.fields()) header.push_back(field.first);
  for (const char* column : {"gpu_number", "batch_size_per_gpu", "total_batch", "measured_batches", "total_time_s",
                             "items_per_sec", "speedup", "efficiency_pct", "jitter", "tflops_per_gpu", "mfu_pct"})
    header.push_back(column);
  for (const char* column : kLossColumns) header.push_back(column);
  for (const char* column : {"runs", "file"}) header.push_back(column);
  std::string text;
  for (size_t i = 0; i < header.size(); ++i) text += (i ? "," : "") + header[i];
  text += "\n";
  for (const Series& series : report.series) {
    std::string key = csv_field(series.title);
    for (const auto& field : series.key.fields()) key += "," + csv_field(field.second);
    for (const SeriesRow& row : series.rows) {
      const Summary& summary = row.run().result.summary;
      text += key + "," + std::to_string(row.num_devices) + "," + std::to_string(batch_per_gpu(row.run().result)) +
              "," + std::to_string(summary.global_batch_size) + "," + std::to_string(summary.measured_steps) + "," +
              csv_number(summary.total_time_s) + "," + csv_number(summary.items_per_sec) + "," +
              csv_number(row.speedup) + "," + csv_number(row.efficiency_pct) + "," + csv_number(summary.jitter) +
              "," + csv_number(tflops_per_gpu(summary)) + "," + csv_number(mfu_pct(summary));
      for (const std::optional<double>& value : loss_values(row)) text += "," + csv_number(value);
      text += "," + std::to_string(row.runs.size()) + "," + csv_field(row.run().path) + "\n";
    }
  }
  return text;
}

std::string render_json(const Report& report) {
  json document = json::array();
  for (const Series& series : report.series) {
    json rows = json::array();
    for (const SeriesRow& row : series.rows) rows.push_back(row_to_json(row));
    document.push_back({{"title", series.title},
                        {"key", series_key_json(series.key)},
                        {"unit", series.key.unit},
                        {"scaling", scaling_name(series.key.scaling)},
                        {"baseline_missing", series.baseline_missing},
                        {"notes", series.notes},
                        {"rows", std::move(rows)}});
  }
  // ASCII only: a control byte of a value (U+009B too) reaches no terminal.
  return document.dump(2, ' ', true, json::error_handler_t::replace) + "\n";
}

const ReportWriters<Report>& report_writers() {
  static const ReportWriters<Report> writers = {{ReportFormat::markdown, render_markdown},
                                                {ReportFormat::csv, render_csv},
                                                {ReportFormat::json, render_json, true}};
  return writers;
}

}  // namespace dpbench
