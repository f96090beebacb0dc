// SVG line chart writer (see svg_chart.h). Layout: title on top, plot area with grid, axes and
// tick labels, axis labels below and left, legend to the right, sized for its longest entry.
#include "reports/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/machine/text_content.h"

namespace dpbench {
namespace {

// tab10: distinct on screen and in print.
const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

constexpr double kWidthWithoutLegend = 640, kPlotHeight = 336;
constexpr double kMarginLeft = 72, kMarginTop = 48, kMarginBottom = 56, kLegendGap = 16;
constexpr double kCharWidth = 7;        // of 12px sans-serif, near enough to size the legend
constexpr double kTitleCharWidth = 9;   // of the 15px bold title
constexpr double kTitleLineHeight = 19;

// XML has no place for control bytes (and a value from a file may hold them): escaped_value's
// \xNN first, then XML's own escapes.
std::string escape_xml(const std::string& text) {
  std::string escaped;
  for (char c : escaped_value(text)) {
    switch (c) {
      case '&': escaped += "&amp;"; break;
      case '<': escaped += "&lt;"; break;
      case '>': escaped += "&gt;"; break;
      case '"': escaped += "&quot;"; break;
      case '\'': escaped += "&apos;"; break;
      default: escaped += c;
    }
  }
  return escaped;
}

std::string coordinate(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

std::string tick_label(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", std::fabs(value) < 1e-12 ? 0.0 : value);
  return text;
}

// The end of the piece of `text` from `start` up to and including the next ", " outside brackets,
// so a strategy's "(nccl, repacking 4)" stays on one line.
size_t end_of_piece(const std::string& text, size_t start) {
  int depth = 0;
  for (size_t i = start; i < text.size(); ++i) {
    if (text[i] == '(' || text[i] == '[') ++depth;
    if (text[i] == ')' || text[i] == ']') --depth;
    if (depth <= 0 && text.compare(i, 2, ", ") == 0) return i + 2;
  }
  return text.size();
}

// Long titles (a series named in full) break after a ", " into lines that fit `width`.
std::vector<std::string> title_lines(const std::string& title, double width) {
  const size_t fits = static_cast<size_t>(std::max(20.0, (width - 24) / kTitleCharWidth));
  std::vector<std::string> lines(1);
  size_t start = 0;
  while (start < title.size()) {
    const size_t end = end_of_piece(title, start);
    const std::string piece = title.substr(start, end - start);
    if (!lines.back().empty() && lines.back().size() + piece.size() > fits) lines.emplace_back();
    lines.back() += piece;
    start = end;
  }
  for (std::string& line : lines)
    while (!line.empty() && line.back() == ' ') line.pop_back();
  return lines;
}

bool is_finite(const ChartPoint& point) { return std::isfinite(point.x) && std::isfinite(point.y); }

// Maps data coordinates to the plot area (SVG y grows downwards).
struct PlotArea {
  double left, top, width, height;
  double x_min, x_max, y_max;
  double x(double value) const { return left + (value - x_min) / (x_max - x_min) * width; }
  double y(double value) const { return top + height - std::min(value, y_max) / y_max * height; }
};

std::string text_element(double x, double y, const std::string& anchor, const std::string& text,
                         const std::string& extra = "") {
  return "<text x=\"" + coordinate(x) + "\" y=\"" + coordinate(y) + "\" text-anchor=\"" + anchor + "\"" + extra +
         ">" + escape_xml(text) + "</text>\n";
}

std::string line_element(double x1, double y1, double x2, double y2, const std::string& stroke,
                         const std::string& extra = "") {
  return "<line x1=\"" + coordinate(x1) + "\" y1=\"" + coordinate(y1) + "\" x2=\"" + coordinate(x2) + "\" y2=\"" +
         coordinate(y2) + "\" stroke=\"" + stroke + "\"" + extra + "/>\n";
}

// The y axis' ticks and labels, then both axis labels: the end of every chart's axes.
std::string y_ticks_and_axis_labels(const PlotArea& area, const std::vector<double>& y_ticks, const std::string& x_label,
                                    const std::string& y_label) {
  std::string svg;
  for (double tick : y_ticks) {
    svg += line_element(area.left - 5, area.y(tick), area.left, area.y(tick), "#000");
    svg += text_element(area.left - 8, area.y(tick) + 4, "end", tick_label(tick));
  }
  svg += text_element(area.left + area.width / 2, area.top + area.height + 42, "middle", x_label, " class=\"axis-label\"");
  const double y_label_x = 18, y_label_y = area.top + area.height / 2;
  svg += text_element(y_label_x, y_label_y, "middle", y_label,
                      " class=\"axis-label\" transform=\"rotate(-90 " + coordinate(y_label_x) + " " +
                          coordinate(y_label_y) + ")\"");
  return svg;
}

// The document's start: its size, title (as a tooltip and drawn in `lines`) and white background.
std::string document_start(double width, double height, const std::string& title, const std::vector<std::string>& lines) {
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + coordinate(width) + "\" height=\"" +
                    coordinate(height) + "\" viewBox=\"0 0 " + coordinate(width) + " " + coordinate(height) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<title>" + escape_xml(title) + "</title>\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  for (size_t i = 0; i < lines.size(); ++i) {
    svg += text_element(width / 2, 26 + kTitleLineHeight * static_cast<double>(i), "middle", lines[i],
                        " class=\"title\" font-size=\"15\" font-weight=\"bold\"");
  }
  return svg;
}

std::string axes_and_grid(const PlotArea& area, const std::vector<double>& x_ticks, const std::vector<double>& y_ticks,
                          const LineChart& chart) {
  std::string svg = "<g class=\"grid\">\n";
  for (double tick : y_ticks) svg += line_element(area.left, area.y(tick), area.left + area.width, area.y(tick), "#e4e4e4");
  for (double tick : x_ticks) svg += line_element(area.x(tick), area.top, area.x(tick), area.top + area.height, "#e4e4e4");
  svg += "</g>\n<g class=\"axes\">\n";
  const double bottom = area.top + area.height;
  svg += line_element(area.left, bottom, area.left + area.width, bottom, "#000");
  svg += line_element(area.left, area.top, area.left, bottom, "#000");
  for (double tick : x_ticks) {
    svg += line_element(area.x(tick), bottom, area.x(tick), bottom + 5, "#000");
    svg += text_element(area.x(tick), bottom + 18, "middle", tick_label(tick));
  }
  return svg + y_ticks_and_axis_labels(area, y_ticks, chart.x_label, chart.y_label) + "</g>\n";
}

std::string polyline(const PlotArea& area, const ChartLine& line, const std::string& color) {
  std::string points;
  for (const ChartPoint& point : line.points) {
    if (!is_finite(point)) continue;
    points += (points.empty() ? "" : " ") + coordinate(area.x(point.x)) + "," + coordinate(area.y(point.y));
  }
  std::string svg = "<polyline class=\"line\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"2\"" +
                    std::string(line.dashed ? " stroke-dasharray=\"6 4\"" : "") + " points=\"" + points + "\">" +
                    "<title>" + escape_xml(line.label) + "</title></polyline>\n";
  if (line.markers) {
    for (const ChartPoint& point : line.points) {
      if (!is_finite(point)) continue;
      svg += "<circle cx=\"" + coordinate(area.x(point.x)) + "\" cy=\"" + coordinate(area.y(point.y)) +
             "\" r=\"3.5\" fill=\"" + color + "\"/>\n";
    }
  }
  return svg;
}

}  // namespace

std::vector<double> nice_ticks(double low, double high, int target) {
  if (!std::isfinite(low) || !std::isfinite(high)) return {0, 1};
  if (!(high > low)) high = low + 1;
  const double raw_step = (high - low) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  const double residual = raw_step / magnitude;
  const double step = magnitude * (residual <= 1 ? 1 : residual <= 2 ? 2 : residual <= 5 ? 5 : 10);
  // A hair of tolerance, so 1.0000000001 does not add a whole tick above 1.
  const double first = std::floor(low / step + 1e-9) * step;
  const double last = std::ceil(high / step - 1e-9) * step;
  const long count = std::lround((last - first) / step);
  std::vector<double> ticks;
  for (long i = 0; i <= count; ++i) ticks.push_back(first + static_cast<double>(i) * step);
  return ticks;
}

std::string render_svg(const LineChart& chart) {
  std::vector<std::string> colors;
  size_t next_color = 0;
  for (const ChartLine& line : chart.lines)
    colors.push_back(line.color.empty() ? kPalette[next_color++ % std::size(kPalette)] : line.color);

  // Data ranges; y always from 0 (speeds, speedups and times are positive).
  double x_min = INFINITY, x_max = -INFINITY, y_max = 0, y_data_max = 0;
  for (const ChartLine& line : chart.lines) {
    for (const ChartPoint& point : line.points) {
      if (!is_finite(point)) continue;
      x_min = std::min(x_min, point.x);
      x_max = std::max(x_max, point.x);
      y_data_max = std::max(y_data_max, point.y);
      y_max = std::max(y_max, chart.y_limit ? std::min(point.y, *chart.y_limit) : point.y);
    }
  }
  if (chart.shaded) {
    x_min = std::min(x_min, chart.shaded->x_from);
    x_max = std::max(x_max, chart.shaded->x_to);
  }
  for (double tick : chart.x_ticks) {
    x_min = std::min(x_min, tick);
    x_max = std::max(x_max, tick);
  }
  if (!std::isfinite(x_min)) x_min = 0, x_max = 1;
  if (!(x_max > x_min)) x_max = x_min + 1;
  const std::vector<double> y_ticks = nice_ticks(0, y_max > 0 ? y_max : 1, 6);
  std::vector<double> x_ticks = chart.x_ticks;
  if (x_ticks.empty()) {
    x_ticks = nice_ticks(x_min, x_max, 8);
    x_min = x_ticks.front();
    x_max = x_ticks.back();
  }

  size_t longest_label = chart.shaded ? chart.shaded->label.size() : 0;
  for (const ChartLine& line : chart.lines) longest_label = std::max(longest_label, line.label.size());
  const double legend_width = std::clamp(40 + kCharWidth * static_cast<double>(longest_label), 120.0, 420.0);
  const double width = kWidthWithoutLegend + legend_width;
  const std::vector<std::string> title = title_lines(chart.title, width);
  const double top = kMarginTop + kTitleLineHeight * static_cast<double>(title.size() - 1);
  const double height = top + kPlotHeight + kMarginBottom;
  const PlotArea area{kMarginLeft, top, kWidthWithoutLegend - kMarginLeft - kLegendGap, kPlotHeight,
                      x_min, x_max, y_ticks.back()};

  std::string svg = document_start(width, height, chart.title, title);
  if (chart.shaded) {
    const double from = area.x(chart.shaded->x_from), to = area.x(chart.shaded->x_to);
    svg += "<rect class=\"shaded\" x=\"" + coordinate(from) + "\" y=\"" + coordinate(area.top) + "\" width=\"" +
           coordinate(std::max(0.0, to - from)) + "\" height=\"" + coordinate(area.height) +
           "\" fill=\"#999\" fill-opacity=\"0.25\"/>\n";
  }
  svg += axes_and_grid(area, x_ticks, y_ticks, chart);
  for (size_t i = 0; i < chart.lines.size(); ++i) svg += polyline(area, chart.lines[i], colors[i]);
  if (y_data_max > area.y_max) {
    svg += text_element(area.left + area.width, area.top - 6, "end",
                        "values above " + tick_label(area.y_max) + " are drawn at the top edge",
                        " class=\"note\" font-size=\"11\" fill=\"#555\"");
  }

  svg += "<g class=\"legend\">\n";
  double legend_y = area.top + 8;
  const double legend_x = kWidthWithoutLegend + 4;
  for (size_t i = 0; i < chart.lines.size(); ++i, legend_y += 20) {
    svg += line_element(legend_x, legend_y, legend_x + 24, legend_y, colors[i],
                        " stroke-width=\"2\"" + std::string(chart.lines[i].dashed ? " stroke-dasharray=\"6 4\"" : ""));
    svg += text_element(legend_x + 30, legend_y + 4, "start", chart.lines[i].label);
  }
  if (chart.shaded) {
    svg += "<rect x=\"" + coordinate(legend_x) + "\" y=\"" + coordinate(legend_y - 7) +
           "\" width=\"24\" height=\"14\" fill=\"#999\" fill-opacity=\"0.25\"/>\n";
    svg += text_element(legend_x + 30, legend_y + 4, "start", chart.shaded->label);
  }
  return svg + "</g>\n</svg>\n";
}

std::string render_svg(const StackedBarChart& chart) {
  double y_max = 0;
  bool clipped = false;
  for (const std::vector<double>& bar : chart.values) {
    double total = 0;
    for (double value : bar) {
      if (std::isfinite(value) && value > 0) total += value;
      else if (value != 0) clipped = true;
    }
    y_max = std::max(y_max, total);
  }
  const std::vector<double> y_ticks = nice_ticks(0, y_max > 0 ? y_max : 1, 6);
  size_t longest_label = 0;
  for (const std::string& part : chart.parts) longest_label = std::max(longest_label, part.size());
  const double legend_width = std::clamp(40 + kCharWidth * static_cast<double>(longest_label), 120.0, 420.0);
  const double width = kWidthWithoutLegend + legend_width;
  const std::vector<std::string> title = title_lines(chart.title, width);
  const double top = kMarginTop + kTitleLineHeight * static_cast<double>(title.size() - 1);
  const double height = top + kPlotHeight + kMarginBottom;
  const size_t bars = std::max<size_t>(1, chart.categories.size());
  const PlotArea area{kMarginLeft, top, kWidthWithoutLegend - kMarginLeft - kLegendGap, kPlotHeight,
                      0, static_cast<double>(bars), y_ticks.back()};

  std::string svg = document_start(width, height, chart.title, title);
  const double bottom = area.top + area.height;
  svg += "<g class=\"grid\">\n";
  for (double tick : y_ticks) svg += line_element(area.left, area.y(tick), area.left + area.width, area.y(tick), "#e4e4e4");
  svg += "</g>\n<g class=\"bars\">\n";
  const double slot = area.width / static_cast<double>(bars), bar_width = slot * 0.5;
  for (size_t b = 0; b < chart.categories.size(); ++b) {
    const double x = area.left + slot * (static_cast<double>(b) + 0.25);
    double stacked = 0;
    for (size_t p = 0; p < chart.parts.size() && b < chart.values.size() && p < chart.values[b].size(); ++p) {
      const double value = chart.values[b][p];
      if (!(std::isfinite(value) && value > 0)) continue;
      const double y_top = area.y(stacked + value), y_bottom = area.y(stacked);
      svg += "<rect x=\"" + coordinate(x) + "\" y=\"" + coordinate(y_top) + "\" width=\"" + coordinate(bar_width) +
             "\" height=\"" + coordinate(std::max(0.0, y_bottom - y_top)) + "\" fill=\"" +
             kPalette[p % std::size(kPalette)] + "\"><title>" + escape_xml(chart.categories[b] + ": " + chart.parts[p] +
                                                                      " " + tick_label(value)) +
             "</title></rect>\n";
      stacked += value;
    }
    svg += text_element(x + bar_width / 2, bottom + 18, "middle", chart.categories[b]);
  }
  svg += "</g>\n<g class=\"axes\">\n";
  svg += line_element(area.left, bottom, area.left + area.width, bottom, "#000");
  svg += line_element(area.left, area.top, area.left, bottom, "#000");
  svg += y_ticks_and_axis_labels(area, y_ticks, chart.x_label, chart.y_label) + "</g>\n";
  if (clipped) {
    svg += text_element(area.left + area.width, area.top - 6, "end", "negative parts are drawn as 0",
                        " class=\"note\" font-size=\"11\" fill=\"#555\"");
  }
  svg += "<g class=\"legend\">\n";
  double legend_y = area.top + 8;
  const double legend_x = kWidthWithoutLegend + 4;
  // Top part first, as the bars stack.
  for (size_t p = chart.parts.size(); p-- > 0; legend_y += 20) {
    svg += "<rect x=\"" + coordinate(legend_x) + "\" y=\"" + coordinate(legend_y - 7) + "\" width=\"24\" height=\"14\" fill=\"" +
           kPalette[p % std::size(kPalette)] + "\"/>\n";
    svg += text_element(legend_x + 30, legend_y + 4, "start", chart.parts[p]);
  }
  return svg + "</g>\n</svg>\n";
}

}  // namespace dpbench
