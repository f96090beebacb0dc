// `dpbench report`'s memory table and figure (reports/memory_report.h): from real reference-backend
// runs of two strategies, each row is the run's fullest device at the measured steps' peak, by
// category; hand-made rows show the unit, the used categories and the device's own figure.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/machine/memory_ledger.h"
#include "reports/memory_report.h"
#include "reports/report_plots.h"
#include "reports/report_tables.h"
#include "tests/host/report_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Matchers::Contains;

namespace {

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", bytes / (1024.0 * 1024.0));
  return text;
}

// trivial on 1 and 2 reference devices replicated, and on 2 as a parameter server on the host.
Report two_strategies(const TempDir& dir) {
  REQUIRE(run_reference_series(dir, {1, 2}));
  REQUIRE(run_cli({"--device=cpu", "--model=trivial", "--variable_update=parameter_server",
                   "--local_parameter_device=cpu", "--batch_size=16", "--num_gpus=2", "--num_batches=10",
                   "--num_warmup_batches=2", "--result_file=" + dir.file("ps2.json")}) == 0);
  return report_of({dir.path().string()});
}

}  // namespace

TEST_CASE("report memory rows are each run's fullest device at the measured steps' peak", "[report][memory]") {
  TempDir dir;
  const Report report = two_strategies(dir);
  REQUIRE(report.comparisons.size() == 1);
  const Comparison& comparison = report.comparisons.front();
  const std::vector<MemoryReportRow> rows = memory_rows(report, comparison);
  REQUIRE(rows.size() == 3);  // replicated on 1 and 2, the parameter server on 2
  for (const MemoryReportRow& row : rows) {
    INFO(row.strategy << ", " << row.gpus);
    // The categories add up to the peak, and every run holds parameters, gradients and data.
    double sum = 0;
    for (double bytes : row.categories) sum += bytes;
    CHECK(sum == Approx(row.peak_bytes));
    CHECK(row.categories[static_cast<size_t>(MemoryCategory::parameters)] > 0);
    CHECK(row.categories[static_cast<size_t>(MemoryCategory::gradients)] > 0);
    CHECK(row.categories[static_cast<size_t>(MemoryCategory::data)] > 0);
    CHECK_FALSE(row.device_reported_bytes.has_value());  // the reference backend's devices report nothing
  }
  // Each row is the chosen run's own record.
  for (size_t column = 0; column < comparison.series.size(); ++column) {
    const Series& series = report.series[comparison.series[column]];
    for (const SeriesRow& row : series.rows) {
      const nlohmann::json& memory = row.run().result.summary.memory;
      const nlohmann::json& device = memory["devices"][memory["fullest_device"].get<size_t>()];
      const auto found = std::find_if(rows.begin(), rows.end(), [&](const MemoryReportRow& r) {
        return r.strategy == comparison.column_labels[column] && r.gpus == row.num_devices;
      });
      REQUIRE(found != rows.end());
      CHECK(found->peak_bytes == device["step_peak_bytes"].get<double>());
    }
  }
  // Both strategies have their rows, in the comparison's column order.
  CHECK(rows.front().strategy == comparison.column_labels.front());
  CHECK(rows.back().strategy == comparison.column_labels.back());
  CHECK(comparison.column_labels.front() != comparison.column_labels.back());
}

TEST_CASE("report markdown has a memory table under each comparison whose runs measured memory",
          "[report][memory]") {
  TempDir dir;
  const Report report = two_strategies(dir);
  const std::string markdown = render_markdown(report);
  const std::vector<MemoryReportRow> rows = memory_rows(report, report.comparisons.front());
  CHECK_THAT(markdown, Contains("Memory per GPU in MiB: the fullest device at the measured steps' peak"));
  for (const MemoryReportRow& row : rows)
    CHECK_THAT(markdown, Contains("| " + row.strategy + " | " + std::to_string(row.gpus) + " | " +
                                  mib(row.peak_bytes) + " | " +
                                  mib(row.categories[static_cast<size_t>(MemoryCategory::parameters)]) + " | "));
  // The table follows its comparison.
  CHECK(markdown.find("Memory per GPU") > markdown.find("### Comparison:"));
}

TEST_CASE("report memory table: one unit, the categories in use, the device's own figure", "[report][memory]") {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  std::vector<MemoryReportRow> rows(2);
  rows[0] = {"replicated (nccl)", 1, 3.0 * gib, std::vector<double>(memory_categories().size()), 3.5 * gib};
  rows[0].categories[static_cast<size_t>(MemoryCategory::parameters)] = 1.0 * gib;
  rows[0].categories[static_cast<size_t>(MemoryCategory::activations)] = 2.0 * gib;
  rows[1] = {"replicated (nccl)", 2, 0.5 * gib, std::vector<double>(memory_categories().size()), std::nullopt};
  rows[1].categories[static_cast<size_t>(MemoryCategory::parameters)] = 0.25 * gib;
  rows[1].categories[static_cast<size_t>(MemoryCategory::communication)] = 0.25 * gib;
  const std::string table = memory_table(rows);
  CHECK_THAT(table, Contains("Memory per GPU in GiB"));
  CHECK_THAT(table, Contains("| strategy | GPU number | peak | parameters | activations | communication | device reports |"));
  CHECK_THAT(table, Contains("| replicated (nccl) | 1 | 3.00 | 1.00 | 2.00 | 0.00 | 3.50 |"));
  CHECK_THAT(table, Contains("| replicated (nccl) | 2 | 0.50 | 0.25 | 0.00 | 0.25 | - |"));
  CHECK(memory_table({}).empty());

  const StackedBarChart chart = memory_chart("resnet50, bf16", rows);
  CHECK(chart.parts == std::vector<std::string>{"parameters", "activations", "communication"});
  CHECK(chart.categories == std::vector<std::string>{"replicated (nccl), 1 GPU", "replicated (nccl), 2 GPUs"});
  REQUIRE(chart.values.size() == 2);
  CHECK(chart.values[0] == std::vector<double>{1.0, 2.0, 0.0});
  CHECK(chart.values[1] == std::vector<double>{0.25, 0.0, 0.25});
  CHECK(memory_chart("x", {}).categories.empty());
}

TEST_CASE("report plots: a memory figure per comparison whose runs measured memory", "[report][memory]") {
  TempDir dir;
  const Report report = two_strategies(dir);
  std::vector<std::string> notes;
  const std::vector<PlotFile> plots = build_report_plots(report, &notes);
  const auto memory = std::find_if(plots.begin(), plots.end(),
                                   [](const PlotFile& plot) { return plot.name.rfind("memory_", 0) == 0; });
  REQUIRE(memory != plots.end());
  CHECK_THAT(memory->svg, Contains("Memory per GPU: "));
  for (const MemoryReportRow& row : memory_rows(report, report.comparisons.front()))
    CHECK_THAT(memory->svg, Contains(">" + row.strategy + ", " + std::to_string(row.gpus)));
}
