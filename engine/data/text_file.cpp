// Line and token reading shared by the text data sets.
#include "engine/data/text_file.h"

#include <cctype>
#include <fstream>

#include "engine/errors.h"

namespace dpbench {

std::vector<std::string> read_text_lines(const std::string& path, const std::string& hint) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot open " + path + ": " + hint);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  if (in.bad()) throw RuntimeError("error while reading " + path);
  return lines;
}

static bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::vector<std::string> split_whitespace(const std::string& line) {
  std::vector<std::string> tokens;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    if (i > start) tokens.push_back(line.substr(start, i - start));
  }
  return tokens;
}

bool is_blank(const std::string& line) {
  for (char c : line)
    if (!is_space(c)) return false;
  return true;
}

}  // namespace dpbench
