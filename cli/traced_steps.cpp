// --trace_steps (see the header).
#include "cli/traced_steps.h"

#include <algorithm>
#include <limits>

#include "cli/flag_parsing.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

[[noreturn]] void reject(const std::string& text, const std::string& why) {
  throw ConfigError("--trace_steps=" + quoted_argument(text) + ": " + why);
}

// One end of the window: "K" (measured step K) or "wK" (warm-up step K), as a run step.
int64_t parse_end(const std::string& whole, const std::string& end, int warmup_steps, int measured_steps) {
  const bool warmup = !end.empty() && (end[0] == 'w' || end[0] == 'W');
  const std::string digits = warmup ? end.substr(1) : end;
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    reject(whole, "not A:B; e.g. 10:14 (measured steps 10 to 14), w1:w3 (warm-up steps 1 to 3) or 7 (one step)");
  // More digits than a step count can have is out of range like any number past the last step.
  const size_t significant = digits.find_first_not_of('0');
  const int64_t number = significant == std::string::npos ? 0
                         : digits.size() - significant > 9 ? std::numeric_limits<int64_t>::max()
                                                           : std::stoll(digits);
  if (warmup) {
    if (warmup_steps == 0) reject(whole, "names a warm-up step, and this run has none (--num_warmup_batches=0)");
    if (number < 1 || number > warmup_steps)
      reject(whole, "warm-up steps are w1..w" + std::to_string(warmup_steps));
    return number - 1;
  }
  if (number < 1 || number > measured_steps)
    reject(whole, "measured steps are 1.." + std::to_string(measured_steps) + " (warm-up steps: w1..)");
  return warmup_steps + number - 1;
}

}  // namespace

TracedStepWindow resolve_traced_steps(const std::string& text, int warmup_steps, int measured_steps) {
  TracedStepWindow window;
  if (text.empty()) {
    const int count = std::min(kDefaultTracedSteps, measured_steps);
    window.first = warmup_steps + (measured_steps - count) / 2;
    window.last = window.first + count - 1;
    return window;
  }
  const size_t colon = text.find(':');
  const std::string first = text.substr(0, colon);
  const std::string last = colon == std::string::npos ? first : text.substr(colon + 1);
  window.first = parse_end(text, first, warmup_steps, measured_steps);
  window.last = parse_end(text, last, warmup_steps, measured_steps);
  if (window.last < window.first) reject(text, "the window ends before it begins; give A:B with A first");
  if (window.count() > kMaxTracedSteps)
    reject(text, "covers " + std::to_string(window.count()) + " steps; at most " + std::to_string(kMaxTracedSteps) +
                     " are traced at once");
  return window;
}

}  // namespace dpbench
