// The writers of `dpbench compare`: a markdown document (one table of the series both sides have:
// speeds, ratio, its interval, verdict; then the series only one side has, runs left out and
// skipped files), CSV (one row per series of either side, with its key fields) and JSON (the same
// facts, with the method's settings).
#pragma once

#include <string>

#include "reports/report_format.h"
#include "reports/result_comparison.h"

namespace dpbench {

std::string render_comparison_markdown(const ResultComparison& comparison);
std::string render_comparison_csv(const ResultComparison& comparison);
std::string render_comparison_json(const ResultComparison& comparison);
// The formats `dpbench compare` writes (--format), each by its writer above.
const ReportWriters<ResultComparison>& comparison_writers();

}  // namespace dpbench
