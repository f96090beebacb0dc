// A dependency-free SVG line chart: lines of (x, y) points, axes with ticks and labels, a title,
// a legend, an optional shaded x-range (e.g. warm-up steps); and a stacked bar chart. The figures of `dpbench report
// --plots` are built on it (reports/report_plots.*); it knows nothing about results.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dpbench {

struct ChartPoint {
  double x = 0, y = 0;
};

struct ChartLine {
  std::string label;  // its legend entry
  std::vector<ChartPoint> points;  // drawn in this order; non-finite points are left out
  bool dashed = false;   // reference lines: ideal scaling, a median
  bool markers = false;  // a dot on each point, for lines of few points
  std::string color;     // "" = the next colour of the palette
};

struct ShadedRange {
  double x_from = 0, x_to = 0;
  std::string label;  // its legend entry
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<ChartLine> lines;
  std::optional<ShadedRange> shaded;
  std::vector<double> x_ticks;   // empty: chosen from the data
  // The y axis ends at the first round tick at or above min(largest y, y_limit); points above it
  // are drawn at the top edge, and the chart says so.
  std::optional<double> y_limit;
};

// A complete SVG document (y axis from 0). One <polyline> per line, in order.
std::string render_svg(const LineChart& chart);

// Bars of stacked parts, one bar per category (e.g. a GPU count), parts bottom first.
struct StackedBarChart {
  std::string title, x_label, y_label;
  std::vector<std::string> categories;  // under each bar
  std::vector<std::string> parts;       // the legend, bottom part first
  // values[category][part]; a negative or non-finite part is drawn as 0, and the chart says so.
  std::vector<std::vector<double>> values;
};

// A complete SVG document (y axis from 0): one <rect> per drawn part, bars left to right.
std::string render_svg(const StackedBarChart& chart);

// Round tick values (1, 2 or 5 x 10^k apart, about `target` of them) from at or below `low` to at
// or above `high`.
std::vector<double> nice_ticks(double low, double high, int target);

}  // namespace dpbench
