// What the data readers say about the bytes of a file: whether a "text" file looks like binary
// data, how a token, line or value from a file is quoted in a message or a table without echoing
// raw bytes to the terminal, and where the readers' warnings go (engine code has no logger of its
// own).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace dpbench {

// How much of a text file is looked at to tell text from binary data.
constexpr size_t kTextSniffBytes = size_t{1} << 20;  // 1 MiB
// Above this share of non-text bytes a "text" file is called binary data. Random bytes score
// about 50%; UTF-8 text scores 0, and Latin-1 text with accents stays far below (a few percent).
constexpr double kBinaryDataShare = 0.10;
// A token or line quoted in a message keeps at most this many bytes of the file.
constexpr size_t kQuotedExcerptBytes = 60;

// The share (0..1) of `sample`'s bytes that are not text: control bytes other than tab, line
// feed, vertical tab, form feed and carriage return, and bytes outside valid UTF-8. A UTF-8
// sequence cut off by the sample's end counts as text.
double non_text_share(std::string_view sample);

// `text` fit to quote in a message: printable ASCII and valid UTF-8 as they are, `\` and `"`
// escaped, every other byte as \xNN, at most kQuotedExcerptBytes of `text` then "...".
std::string escaped_excerpt(std::string_view text);

// A value from a file (a name, a path, a config value) fit to print, on a terminal or in a table:
// valid UTF-8 as it is; every control byte, tab and line breaks included (a value stays on its
// line), and every byte outside valid UTF-8 as \xNN; at most `max_bytes` of it, then "...".
// Printable text comes back unchanged.
std::string escaped_value(std::string_view text, size_t max_bytes = std::string_view::npos);

// A document of lines (a report's markdown or CSV) fit to print: as escaped_value, but its line
// feeds kept.
std::string escaped_lines(std::string_view text);

// Warns once per file when `sample` (its first kTextSniffBytes, or all of a smaller file) looks
// like binary data: "<path> looks like binary data (N% of its first MiB is not text); is it the
// right file?". The vocabulary and the corpus read the same training text; one warning is enough.
void warn_if_binary(const std::string& path, std::string_view sample, bool whole_file);

// Receives the data readers' warnings. The command line routes them to its log; until a handler
// is set they go to stderr as "dpbench: warning: <text>". Setting one also forgets which files
// were warned about already. Returns the previous handler (empty for the stderr default).
using DataWarningHandler = std::function<void(const std::string& warning)>;
DataWarningHandler set_data_warning_handler(DataWarningHandler handler);

}  // namespace dpbench
