// The writers of `dpbench report`: a markdown document (a speedup table per series, a comparison
// table per workload, notes, skipped files), CSV (one row per series and GPU count, with the
// series' key fields), and JSON (an array of series objects with their rows).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "reports/report_format.h"
#include "reports/report_series.h"

namespace dpbench {

// The per-series table's header and alignment lines, e.g.
// "| GPU number | Batch size per GPU | Total batch | Total time to process 100 batches (s) |
//  Processing speed (images/s) | Speedup ratio | Efficiency % | Jitter |" (one line).
std::string series_table_header(const Series& series);

// A series' key as the JSON outputs write it: every key field by name, and fixed_batch as a number.
nlohmann::json series_key_json(const SeriesKey& key);

std::string render_markdown(const Report& report);
std::string render_csv(const Report& report);
std::string render_json(const Report& report);
// The formats `dpbench report` writes (--format), each by its writer above.
const ReportWriters<Report>& report_writers();

}  // namespace dpbench
