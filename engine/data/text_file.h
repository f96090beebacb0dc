// Reading the text files of the real data sets (PTB, parallel NMT text, vocabulary files): lines
// streamed one at a time (a WMT corpus need not sit in memory as text), whitespace tokens, and
// one ConfigError wording for a file that cannot be opened.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace dpbench {

class TextLineReader {
 public:
  // ConfigError "cannot open <path>: <hint>" when the file cannot be read; the hint says what
  // was expected, e.g. "expects ... in the folder given by --data_dir".
  TextLineReader(const std::string& path, const std::string& hint);

  // The next line without its terminator ("\n" or "\r\n"); false at the end. A final line
  // without a terminator counts; the empty string after a final "\n" does not.
  bool next(std::string& line);
  // Reads to the end, counting the lines (for a message that names the file's length).
  void skip_rest();
  int64_t lines_read() const { return lines_read_; }  // so far: the 1-based number of the last line
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
  int64_t lines_read_ = 0;
};

// The tokens of a line split at spaces, tabs and other whitespace, as TF's string_split does;
// leading, trailing and repeated whitespace make no empty tokens.
std::vector<std::string> split_whitespace(const std::string& line);

}  // namespace dpbench
