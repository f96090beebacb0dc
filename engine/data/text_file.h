// Opening and reading the files of the real data sets (CIFAR-10 records, PTB, parallel NMT text,
// vocabulary files): one ConfigError wording for a file that cannot be read, naming the real cause
// (a FIFO, a folder, a link loop) without ever blocking in open(); text lines streamed one at a
// time (a WMT corpus need not sit in memory as text); whitespace tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dpbench {

// Opens `path` for reading without blocking (engine/machine/file_checks.h) and returns the descriptor.
// ConfigError "<prefix><path> <why not>; <hint>" when it is not a readable regular file, e.g.
// "ptb.train.txt is a FIFO (named pipe), not a regular file; expects ...": the hint says what was
// expected there.
int open_data_file(const std::string& path, const std::string& hint, const std::string& prefix = "");

class TextLineReader {
 public:
  // ConfigError as open_data_file() words it, or "<path> is empty; <hint>" for a file of no
  // bytes. Warns (text_content.h) when the file looks like binary data.
  TextLineReader(const std::string& path, const std::string& hint);
  ~TextLineReader();
  TextLineReader(const TextLineReader&) = delete;
  TextLineReader& operator=(const TextLineReader&) = delete;

  // The next line without its terminator ("\n" or "\r\n"); false at the end. A final line
  // without a terminator counts; the empty string after a final "\n" does not.
  bool next(std::string& line);
  // Reads to the end, counting the lines (for a message that names the file's length).
  void skip_rest();
  int64_t lines_read() const { return lines_read_; }  // so far: the 1-based number of the last line
  const std::string& path() const { return path_; }

 private:
  size_t fill(size_t from);  // reads into buffer_[from, capacity); 0 at the end of the file

  std::string path_;
  int fd_ = -1;
  std::vector<char> buffer_;  // holds bytes [begin_, end_) not yet returned
  size_t begin_ = 0, end_ = 0;
  int64_t lines_read_ = 0;
};

// The tokens of a line split at spaces, tabs and other whitespace, as TF's string_split does;
// leading, trailing and repeated whitespace make no empty tokens.
std::vector<std::string> split_whitespace(const std::string& line);

}  // namespace dpbench
