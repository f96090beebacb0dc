// Opening data files, and line and token reading shared by the text data sets.
#include "engine/data/text_file.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "engine/errors.h"
#include "engine/machine/file_checks.h"
#include "engine/machine/text_content.h"

namespace dpbench {

int open_data_file(const std::string& path, const std::string& hint, const std::string& prefix) {
  std::string why;
  const int fd = open_regular_file_for_reading(path, &why);
  if (fd < 0) throw ConfigError(prefix + path + " " + why + "; " + hint);
  return fd;
}

TextLineReader::TextLineReader(const std::string& path, const std::string& hint)
    : path_(path), fd_(open_data_file(path, hint)), buffer_(kTextSniffBytes) {
  try {
    // The first MiB, read whole: it tells an empty file and binary data apart from text.
    for (size_t got = fill(end_); got > 0 && end_ < buffer_.size(); got = fill(end_)) {
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
  if (end_ == 0) {
    ::close(fd_);
    throw ConfigError(path + " is empty; " + hint);
  }
  warn_if_binary(path, std::string_view(buffer_.data(), end_), end_ < buffer_.size());
}

TextLineReader::~TextLineReader() { ::close(fd_); }

size_t TextLineReader::fill(size_t from) {
  for (;;) {
    const ssize_t got = ::read(fd_, buffer_.data() + from, buffer_.size() - from);
    if (got >= 0) {
      end_ = from + static_cast<size_t>(got);
      return static_cast<size_t>(got);
    }
    if (errno != EINTR) throw RuntimeError("error while reading " + path_ + ": " + std::strerror(errno));
  }
}

bool TextLineReader::next(std::string& line) {
  line.clear();
  bool any_bytes = false;
  for (;;) {
    if (begin_ == end_) {
      begin_ = 0;
      if (fill(0) == 0) break;
    }
    any_bytes = true;
    const char* start = buffer_.data() + begin_;
    const auto* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - begin_));
    if (newline != nullptr) {
      line.append(start, static_cast<size_t>(newline - start));
      begin_ += static_cast<size_t>(newline - start) + 1;
      break;
    }
    line.append(start, end_ - begin_);
    begin_ = end_;
  }
  if (!any_bytes) return false;
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
