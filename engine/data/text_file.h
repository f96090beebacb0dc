// Reading the text files of the real data sets (PTB, parallel NMT text, vocabulary files): whole
// lines and whitespace tokens, with one ConfigError wording for a file that cannot be opened.
#pragma once

#include <string>
#include <vector>

namespace dpbench {

// Every line of `path`, without its line terminator ("\n" or "\r\n"). A final line without a
// terminator counts; the empty string after a final "\n" does not. `hint` completes the error
// for a file that cannot be opened, e.g. "give the PTB folder with --data_dir".
std::vector<std::string> read_text_lines(const std::string& path, const std::string& hint);

// The tokens of a line split at spaces, tabs and other whitespace, as TF's string_split does;
// leading, trailing and repeated whitespace make no empty tokens.
std::vector<std::string> split_whitespace(const std::string& line);

// True when the line holds nothing but whitespace.
bool is_blank(const std::string& line);

}  // namespace dpbench
