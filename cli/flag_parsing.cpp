// Flag-text parsing shared by the validation files (see flag_parsing.h).
#include "cli/flag_parsing.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "engine/errors.h"
#include "engine/machine/text_content.h"

namespace dpbench {

std::string printable_text(const std::string& text, size_t max_bytes) {
  std::string out = escaped_value(text, max_bytes);
  if (text.size() > max_bytes) out += " (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string quoted_argument(const std::string& text) { return printable_text(text, kShownArgumentBytes); }

[[noreturn]] void reject(const std::string& flag, const std::string& value, const std::string& why) {
  throw ConfigError("--" + flag + "=" + quoted_argument(value) + ": " + why);
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string joined;
  for (const auto& item : items) {
    if (!joined.empty()) joined += separator;
    joined += item;
  }
  return joined;
}

int parse_int_at_least(const std::string& flag, const std::string& text, int minimum,
                       const std::string& requirement, int maximum) {
  long long value = 0;
  if (!parse_integer_text(text, &value)) {
    reject(flag, text, "not an integer; accepted: an integer >= " + std::to_string(minimum));
  }
  if (value < minimum) reject(flag, text, requirement);
  if (value > maximum) reject(flag, text, "too large; accepted: up to " + std::to_string(maximum));
  return static_cast<int>(value);
}

int parse_positive_int(const std::string& flag, const std::string& text) {
  return parse_int_at_least(flag, text, 1, "must be a positive integer");
}

double parse_finite_number(const std::string& flag, const std::string& text, const std::string& accepted) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) {
    reject(flag, text, "not a number; accepted: " + accepted);
  }
  errno = 0;
  char* stop = nullptr;
  double value = std::strtod(text.c_str(), &stop);
  if (stop != text.c_str() + text.size() || std::isnan(value)) reject(flag, text, "not a number; accepted: " + accepted);
  // strtod's ERANGE also marks an underflow (1e-320), which is a number: the caller's range check
  // judges it. An overflow and inf are numbers no flag can take.
  if (!std::isfinite(value)) reject(flag, text, "not a finite number; accepted: " + accepted);
  return value;
}

uint64_t parse_memory_size(const std::string& flag, const std::string& text) {
  const std::string accepted = "accepted: a size such as 141GiB, 1.5GiB, 512MiB or a number of bytes, 1KiB to 1PiB";
  size_t number_end = 0;
  while (number_end < text.size() && (std::isdigit(static_cast<unsigned char>(text[number_end])) || text[number_end] == '.'))
    ++number_end;
  if (number_end == 0) reject(flag, text, accepted);
  std::string unit = text.substr(number_end);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") scale = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib") scale = 1024.0 * 1024.0;
  else if (unit == "g" || unit == "gb" || unit == "gib") scale = 1024.0 * 1024.0 * 1024.0;
  else if (unit == "t" || unit == "tb" || unit == "tib") scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  else reject(flag, text, accepted);
  char* stop = nullptr;
  const std::string number = text.substr(0, number_end);
  const double value = std::strtod(number.c_str(), &stop);
  if (stop != number.c_str() + number.size() || !std::isfinite(value)) reject(flag, text, accepted);
  const double bytes = std::floor(value * scale);
  if (!(bytes >= 1024.0) || bytes > 1125899906842624.0) reject(flag, text, accepted);
  return static_cast<uint64_t>(bytes);
}

// absl/gflags, which tf_cnn_benchmarks used, accept these spellings too.
bool parse_bool(const std::string& flag, const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "true" || lower == "1" || lower == "yes" || lower == "t" || lower == "y") return true;
  if (lower == "false" || lower == "0" || lower == "no" || lower == "f" || lower == "n") return false;
  reject(flag, text, "not a boolean; accepted: true, false");
}

void require_one_of(const std::string& flag, const std::string& value,
                    const std::vector<std::string>& accepted, const std::string& what) {
  if (std::find(accepted.begin(), accepted.end(), value) == accepted.end()) {
    reject(flag, value, "unknown " + what + "; accepted: " + join(accepted));
  }
}

}  // namespace dpbench
