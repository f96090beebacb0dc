// Table cells shared by the report writers (see table_cells.h).
#include "reports/table_cells.h"

#include <cmath>
#include <cstdio>

#include "engine/machine/text_content.h"

namespace dpbench {
namespace {

// A pipe would end a markdown cell early, a line break the row; a control byte from a file
// must not reach the terminal.
std::string markdown_cell(const std::string& text) {
  std::string escaped;
  for (char c : escaped_value(text)) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  return escaped;
}

}  // namespace

std::string markdown_row(const std::vector<std::string>& cells) {
  std::string line = "|";
  for (const std::string& cell : cells) line += " " + markdown_cell(cell) + " |";
  return line + "\n";
}

std::string right_aligned_rule(size_t columns) { return alignment_rule(std::string(columns, 'r')); }

std::string alignment_rule(const std::string& alignments) {
  std::string line = "|";
  for (char alignment : alignments) line += alignment == 'l' ? "---|" : "---:|";
  return line + "\n";
}

std::string count_of(size_t count, const std::string& noun, const std::string& plural_noun) {
  return std::to_string(count) + " " + (count == 1 ? noun : plural_noun.empty() ? noun + "s" : plural_noun);
}

std::string join_parts(const std::vector<std::string>& parts, const std::string& separator) {
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) text += (i == 0 ? "" : separator) + parts[i];
  return text;
}

std::string percent_text(double pct) {
  char text[32];
  std::snprintf(text, sizeof text, "%g%%", pct);
  return text;
}

std::string csv_field(const std::string& raw) {
  const std::string text = escaped_value(raw);  // control bytes and line breaks as \xNN, then CSV's quoting
  if (text.find_first_of(",\"") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string csv_number(std::optional<double> value) {
  return value && std::isfinite(*value) ? nlohmann::json(*value).dump() : "";
}

nlohmann::json json_number(std::optional<double> value) {
  return value && std::isfinite(*value) ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace dpbench
