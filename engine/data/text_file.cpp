// Line and token reading shared by the text data sets.
#include "engine/data/text_file.h"

#include <cctype>
#include <filesystem>

#include "engine/errors.h"

namespace dpbench {

TextLineReader::TextLineReader(const std::string& path, const std::string& hint)
    : path_(path), in_(path, std::ios::binary) {
  if (!in_ || !std::filesystem::is_regular_file(path)) throw ConfigError("cannot open " + path + ": " + hint);
}

bool TextLineReader::next(std::string& line) {
  if (!std::getline(in_, line)) {
    if (in_.bad()) throw RuntimeError("error while reading " + path_);
    return false;
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++lines_read_;
  return true;
}

void TextLineReader::skip_rest() {
  std::string ignored;
  while (next(ignored)) {
  }
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

}  // namespace dpbench
