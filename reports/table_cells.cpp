// Table cells shared by the report writers (see table_cells.h).
#include "reports/table_cells.h"

#include <cmath>

namespace dpbench {
namespace {

// A pipe would end a markdown cell early.
std::string markdown_cell(const std::string& text) {
  std::string escaped;
  for (char c : text) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  return escaped;
}

}  // namespace

std::string markdown_row(const std::vector<std::string>& cells) {
  std::string line = "|";
  for (const std::string& cell : cells) line += " " + markdown_cell(cell) + " |";
  return line + "\n";
}

std::string right_aligned_rule(size_t columns) {
  std::string line = "|";
  for (size_t i = 0; i < columns; ++i) line += "---:|";
  return line + "\n";
}

std::string count_of(size_t count, const std::string& noun, const std::string& plural_noun) {
  return std::to_string(count) + " " + (count == 1 ? noun : plural_noun.empty() ? noun + "s" : plural_noun);
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
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
