// Telling text from binary data, quoting file content safely, and routing data warnings (see
// text_content.h).
#include "engine/machine/text_content.h"

#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>

namespace dpbench {
namespace {

// Length of the valid UTF-8 sequence at data[i] (1 for ASCII), or 0 where the bytes there are
// none; `*cut` says they could be one but the data ends first. Overlong forms, surrogates and
// code points above U+10FFFF are invalid (Unicode's table of well-formed byte sequences).
size_t utf8_sequence_length(std::string_view data, size_t i, bool* cut) {
  *cut = false;
  const auto lead = static_cast<unsigned char>(data[i]);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  for (size_t k = 1; k < length; ++k) {
    if (i + k >= data.size()) {
      *cut = true;
      return 0;
    }
    const auto next = static_cast<unsigned char>(data[i + k]);
    if (next < (k == 1 ? low : 0x80) || next > (k == 1 ? high : 0xBF)) return 0;
  }
  return length;
}

// A control character that text does not hold: C0 except the whitespace ones, DEL, and the C1
// controls U+0080..U+009F (0xC2 0x80..0x9F), which some terminals act on.
bool is_control(std::string_view data, size_t i, size_t length) {
  const auto c = static_cast<unsigned char>(data[i]);
  if (length == 1) return (c < 0x20 && !(c >= '\t' && c <= '\r')) || c == 0x7F;
  return length == 2 && c == 0xC2 && static_cast<unsigned char>(data[i + 1]) < 0xA0;
}

struct WarningState {
  std::mutex mutex;
  DataWarningHandler handler;
  std::set<std::string> warned_paths;
};

WarningState& warning_state() {
  static WarningState state;
  return state;
}

// How escape() treats what it keeps as it is: at most `max_bytes` of the text (then "..."),
// and which whitespace controls pass raw.
struct Escaping {
  size_t max_bytes = std::string_view::npos;
  bool quotes = false;             // `\` and `"` escaped, for text shown between double quotes
  bool whitespace_raw = false;     // tab, line feed, vertical tab, form feed, carriage return kept
  bool line_feeds_raw = false;     // line feeds kept (the lines of a document)
};

std::string escape(std::string_view text, const Escaping& how) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    bool cut = false;
    const size_t length = utf8_sequence_length(text, i, &cut);
    const size_t taken = length == 0 ? 1 : length;
    if (how.max_bytes != std::string_view::npos && i + taken > how.max_bytes) break;
    const auto c = static_cast<unsigned char>(text[i]);
    const bool whitespace = length == 1 && c >= '\t' && c <= '\r';
    const bool kept_whitespace = whitespace && (how.whitespace_raw || (how.line_feeds_raw && c == '\n'));
    if (length == 0 || (whitespace && !kept_whitespace) || is_control(text, i, length)) {
      for (size_t k = 0; k < taken; ++k) {
        char hex[5];
        std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(text[i + k]));
        out += hex;
      }
    } else if (how.quotes && (text[i] == '\\' || text[i] == '"')) {
      out += '\\';
      out += text[i];
    } else {
      out.append(text.substr(i, length));
    }
    i += taken;
  }
  if (i < text.size()) out += "...";
  return out;
}

}  // namespace

double non_text_share(std::string_view sample) {
  if (sample.empty()) return 0;
  size_t not_text = 0;
  for (size_t i = 0; i < sample.size();) {
    bool cut = false;
    const size_t length = utf8_sequence_length(sample, i, &cut);
    if (cut) break;  // the sample ends inside a character
    if (length == 0) {
      ++not_text;
      ++i;
      continue;
    }
    if (is_control(sample, i, length)) not_text += length;
    i += length;
  }
  return static_cast<double>(not_text) / static_cast<double>(sample.size());
}

std::string escaped_excerpt(std::string_view text) {
  Escaping how;
  how.max_bytes = kQuotedExcerptBytes;
  how.quotes = true;
  how.whitespace_raw = true;
  return escape(text, how);
}

std::string escaped_value(std::string_view text, size_t max_bytes) {
  Escaping how;
  how.max_bytes = max_bytes;
  return escape(text, how);
}

std::string escaped_lines(std::string_view text) {
  Escaping how;
  how.line_feeds_raw = true;
  return escape(text, how);
}

void warn_if_binary(const std::string& path, std::string_view sample, bool whole_file) {
  const double share = non_text_share(sample);
  if (share <= kBinaryDataShare) return;
  const long percent = std::lround(100 * share);
  const std::string warning = path + " looks like binary data (" + std::to_string(percent) + "% of " +
                              (whole_file ? "it" : "its first MiB") + " is not text); is it the right file?";
  WarningState& state = warning_state();
  DataWarningHandler handler;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    if (!state.warned_paths.insert(path).second) return;
    handler = state.handler;
  }
  if (handler) {
    handler(warning);
  } else {
    std::fprintf(stderr, "dpbench: warning: %s\n", warning.c_str());
    std::fflush(stderr);
  }
}

DataWarningHandler set_data_warning_handler(DataWarningHandler handler) {
  WarningState& state = warning_state();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.warned_paths.clear();
  std::swap(state.handler, handler);
  return handler;
}

}  // namespace dpbench
