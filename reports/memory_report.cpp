// The memory table and figure of `dpbench report` (memory_report.h).
#include "reports/memory_report.h"

#include <algorithm>
#include <cstdio>

#include "engine/machine/memory_ledger.h"
#include "reports/memory_summary.h"

namespace dpbench {

namespace {

using json = nlohmann::json;

const SeriesRow* row_with(const Series& series, int64_t gpus) {
  for (const SeriesRow& row : series.rows)
    if (row.num_devices == gpus) return &row;
  return nullptr;
}

// The run's fullest device in summary.memory, or nullptr where it recorded none.
const json* fullest_device(const json& memory) {
  if (!memory.is_object() || !memory.contains("devices") || !memory["devices"].is_array() ||
      memory["devices"].empty())
    return nullptr;
  const json& devices = memory["devices"];
  const size_t fullest = std::min(static_cast<size_t>(memory_number(memory, "fullest_device")), devices.size() - 1);
  return &devices[fullest];
}

MemoryUnit table_unit(const std::vector<MemoryReportRow>& rows) {
  double largest = 0;
  for (const MemoryReportRow& row : rows) largest = std::max(largest, row.peak_bytes);
  return memory_unit_for(largest);
}

std::string in_unit(double bytes, const MemoryUnit& unit) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", bytes / unit.bytes);
  return text;
}

// The categories any row holds bytes in, by index into memory_categories().
std::vector<size_t> used_categories(const std::vector<MemoryReportRow>& rows) {
  std::vector<size_t> used;
  for (size_t c = 0; c < memory_categories().size(); ++c)
    for (const MemoryReportRow& row : rows)
      if (c < row.categories.size() && row.categories[c] > 0) {
        used.push_back(c);
        break;
      }
  return used;
}

}  // namespace

std::vector<MemoryReportRow> memory_rows(const Report& report, const Comparison& comparison) {
  std::vector<MemoryReportRow> rows;
  for (size_t column = 0; column < comparison.series.size(); ++column) {
    const Series& series = report.series[comparison.series[column]];
    for (int64_t gpus : comparison.gpu_counts) {
      const SeriesRow* row = row_with(series, gpus);
      if (row == nullptr) continue;
      const json* device = fullest_device(row->run().result.summary.memory);
      if (device == nullptr) continue;
      MemoryReportRow memory;
      memory.strategy = comparison.column_labels[column];
      memory.gpus = gpus;
      memory.peak_bytes = memory_number(*device, "step_peak_bytes");
      const json& at_peak = device->contains("at_step_peak") ? (*device)["at_step_peak"] : json::object();
      for (const MemoryCategoryInfo& category : memory_categories())
        memory.categories.push_back(memory_number(at_peak, category.key));
      if (device->contains("device_reported_bytes"))
        memory.device_reported_bytes = memory_number(*device, "device_reported_bytes");
      rows.push_back(std::move(memory));
    }
  }
  return rows;
}

std::string memory_table(const std::vector<MemoryReportRow>& rows) {
  if (rows.empty()) return "";
  const MemoryUnit unit = table_unit(rows);
  const std::vector<size_t> used = used_categories(rows);
  bool reported = false;
  for (const MemoryReportRow& row : rows) reported = reported || row.device_reported_bytes.has_value();
  std::string text = std::string("Memory per GPU in ") + unit.name +
                     ": the fullest device at the measured steps' peak, by what holds it (summary.memory)" +
                     (reported ? "; the device's own figure beside it (the CUDA context and the libraries' "
                                 "own memory are the difference)" : "") +
                     ".\n\n";
  std::vector<std::string> header = {"strategy", "GPU number", "peak"};
  for (size_t c : used) header.push_back(memory_categories()[c].console_word);
  if (reported) header.push_back("device reports");
  auto line = [](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (const std::string& cell : cells) out += " " + cell + " |";
    return out + "\n";
  };
  text += line(header) + "|---|";
  for (size_t i = 1; i < header.size(); ++i) text += "--:|";
  text += "\n";
  for (const MemoryReportRow& row : rows) {
    std::vector<std::string> cells = {row.strategy, std::to_string(row.gpus), in_unit(row.peak_bytes, unit)};
    for (size_t c : used) cells.push_back(in_unit(row.categories[c], unit));
    if (reported) cells.push_back(row.device_reported_bytes ? in_unit(*row.device_reported_bytes, unit) : "-");
    text += line(cells);
  }
  return text;
}

StackedBarChart memory_chart(const std::string& workload, const std::vector<MemoryReportRow>& rows) {
  StackedBarChart chart;
  if (rows.empty()) return chart;
  const MemoryUnit unit = table_unit(rows);
  const std::vector<size_t> used = used_categories(rows);
  chart.title = "Memory per GPU: " + workload;
  chart.x_label = "strategy, GPUs";
  chart.y_label = std::string(unit.name) + " on the fullest device at the measured steps' peak";
  for (size_t c : used) chart.parts.push_back(memory_categories()[c].console_word);
  for (const MemoryReportRow& row : rows) {
    chart.categories.push_back(row.strategy + ", " + std::to_string(row.gpus) + (row.gpus == 1 ? " GPU" : " GPUs"));
    std::vector<double> values;
    for (size_t c : used) values.push_back(row.categories[c] / unit.bytes);
    chart.values.push_back(std::move(values));
  }
  return chart;
}

}  // namespace dpbench
