// --trace_steps: which steps of a run --trace_file records, as the run numbers them (warm-up
// first, 0-based). Measured steps are named from 1, warm-up steps as wK (K from 1), so "w10:2"
// is the last warm-up step of ten and the first two measured ones.
#pragma once

#include <cstdint>
#include <string>

namespace dpbench {

inline constexpr int kDefaultTracedSteps = 5;   // from the middle of the measured window
inline constexpr int kMaxTracedSteps = 100;     // each keeps its stamps (and, replayed, a graph)

struct TracedStepWindow {
  int64_t first = -1, last = -1;  // run steps, inclusive
  int64_t count() const { return last - first + 1; }
};

// `text` empty: the default window. Throws ConfigError naming --trace_steps, the value and what
// is accepted for a malformed value or one outside the run's steps.
TracedStepWindow resolve_traced_steps(const std::string& text, int warmup_steps, int measured_steps);

}  // namespace dpbench
