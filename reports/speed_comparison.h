// Whether one set of runs is faster or slower than another, from their per-step samples: each
// side's speed, the ratio NEW / BASE, a bootstrap confidence interval of that ratio, and a verdict
// (faster, slower, within noise). Note [how compare decides] in speed_comparison.cpp says how and
// why. `dpbench compare` applies it to every series the two sides share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/result.h"

namespace dpbench {

// One measured step: the items (images, words) its global batch held and the time it took.
struct StepSample {
  double items = 0;
  double time_ms = 0;
};

// The measured steps of `result` in step order: neither warm-up nor after the measurement
// (--timed_epochs' untimed steps). Each counts its own items where a host feed recorded them,
// else summary.items_per_step.
std::vector<StepSample> measured_steps_of(const Result& result);

// Items per second over `samples`: their items over their time (a ratio of totals, as
// summary.items_per_sec), i.e. items per step / mean step time. 0 for no samples.
double speed_of(const std::vector<StepSample>& samples);

// "" where `samples` can stand in a comparison; else why not, e.g. "1 measured step (2 needed)".
std::string why_too_few_samples(const std::vector<StepSample>& samples);

enum class Verdict { faster, slower, within_noise, too_few_samples };
const char* verdict_name(Verdict verdict);  // "faster", "slower", "within noise", "too few samples"

struct ComparisonSettings {
  double confidence = 0.95;      // of the ratio's interval
  int resamples = 10000;         // bootstrap resamples of both sides
  double noise_floor_pct = 1.0;  // a smaller change of speed is within noise however tight the samples
  uint64_t seed = 20250101;      // fixed: the same inputs give the same interval, run after run
};

struct SpeedComparison {
  // Each side's speed: the mean of its runs' speeds (items/s); none where no run has 2 or more
  // samples. The ratio and its interval exist where both speeds do.
  std::optional<double> base_speed, new_speed;
  std::optional<double> ratio, ratio_low, ratio_high;  // NEW / BASE
  Verdict verdict = Verdict::too_few_samples;

  // 100 x (ratio - 1): +3 is 3% faster, -5 is 5% slower; none without a ratio.
  std::optional<double> change_pct() const;
  // Slower beyond the noise (the verdict) and by more than `pct` percent (the point estimate).
  bool slower_by_more_than(double pct) const;
};

// Each side is one or more runs (repeats) of one series, each its measured steps, every run with
// at least 2 samples (why_too_few_samples says which cannot take part). An empty side gives
// too_few_samples.
SpeedComparison compare_speeds(const std::vector<std::vector<StepSample>>& base_runs,
                               const std::vector<std::vector<StepSample>>& new_runs,
                               const ComparisonSettings& settings);

}  // namespace dpbench
