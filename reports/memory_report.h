// `dpbench report`'s memory part: for each comparison (one workload, its strategies side by side),
// where each strategy's fullest device put its bytes at the measured steps' peak, per GPU count
// (summary.memory, README "Memory"), as a markdown table and a stacked-bar figure. Results from
// before memory was measured have no row.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/report_series.h"
#include "reports/svg_chart.h"

namespace dpbench {

struct MemoryReportRow {
  std::string strategy;  // the comparison's column label
  int64_t gpus = 0;
  double peak_bytes = 0;           // the fullest device's peak in the measured steps
  std::vector<double> categories;  // its bytes then, in memory_categories()'s order
  std::optional<double> device_reported_bytes;  // what the device said it held (GPU runs)
};

// One row per strategy and GPU count of `comparison` whose chosen run recorded memory, strategy by
// strategy in the comparison's order, GPU counts ascending.
std::vector<MemoryReportRow> memory_rows(const Report& report, const Comparison& comparison);

// "Memory per GPU ..." and its table in one unit (the largest peak's), a column per category that
// any row uses; "" where there is no row.
std::string memory_table(const std::vector<MemoryReportRow>& rows);

// A bar per row ("replicated (nccl), 2 GPUs"), stacked by category in the table's unit; no
// categories where there is no row.
StackedBarChart memory_chart(const std::string& workload, const std::vector<MemoryReportRow>& rows);

}  // namespace dpbench
