// Speeds, their ratio's bootstrap interval and the verdict of `dpbench compare` (see
// speed_comparison.h).
#include "reports/speed_comparison.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "reports/statistics.h"

namespace dpbench {

// Note [how compare decides]
// A side's speed is the mean of its runs' speeds, each run's the items over the time of its
// measured steps: one run is one vote, however many steps it measured.
// The interval of NEW / BASE is a percentile bootstrap: each resample draws, for each side, as
// many runs as it has, with replacement (where it has repeats), and within each drawn run as many
// steps as it has, in blocks of about cbrt(n) consecutive steps (a circular block bootstrap), and
// takes the ratio of the two sides' mean speeds.
// - Why runs are resampled: runs of one command differ more than one run's steps do (cuDNN's timed
//   algorithm choice, clocks, placement), so resampling steps alone would give repeats an interval
//   far narrower than their spread. (Resampling both levels counts the step noise twice: a little
//   wide, which suits a gate that must not fail a build on noise.) With one run a side the
//   interval can only cover the noise within those two runs: repeats cover the rest.
// - Why blocks of steps: consecutive steps are correlated (clocks settle as a GPU warms, a
//   neighbour's job comes and goes); drawing steps one by one would scatter a slow stretch as if it
//   were independent noise, and the interval would be too narrow.
// The verdict is faster or slower only when the whole interval lies above or below 1 and the
// point estimate changed by at least the noise floor: long runs make tight intervals, and a 0.2%
// change, however certain, is not a regression worth a red build. A gate (--fail_above=PCT) asks
// for the verdict slower and a slowdown of the point estimate above PCT: the interval has already
// decided that the change is real, and PCT then reads as the size of the change, as measured.
namespace {

// std::mt19937_64's sequence is fixed by the C++ standard (std::uniform_int_distribution's is
// not), so the same seed draws the same resamples with any standard library. The modulo's bias,
// count / 2^64, is nothing for any count of steps or runs a result can hold.
size_t draw_index(std::mt19937_64& random, size_t count) { return static_cast<size_t>(random() % count); }

// One run's steps as prefix sums over two laps, so a block that wraps round the end is one
// subtraction.
class RunResampler {
 public:
  explicit RunResampler(const std::vector<StepSample>& samples) : steps_(samples.size()) {
    items_.push_back(0);
    time_ms_.push_back(0);
    for (int lap = 0; lap < 2; ++lap) {
      for (const StepSample& sample : samples) {
        items_.push_back(items_.back() + sample.items);
        time_ms_.push_back(time_ms_.back() + sample.time_ms);
      }
    }
    block_ = std::max<size_t>(1, static_cast<size_t>(std::lround(std::cbrt(static_cast<double>(steps_)))));
  }

  // The speed of `steps_` steps drawn as circular blocks (the last one cut short).
  double resampled_speed(std::mt19937_64& random) const {
    double items = 0, time_ms = 0;
    for (size_t taken = 0; taken < steps_; taken += block_) {
      const size_t start = draw_index(random, steps_), length = std::min(block_, steps_ - taken);
      items += items_[start + length] - items_[start];
      time_ms += time_ms_[start + length] - time_ms_[start];
    }
    return 1000.0 * items / time_ms;
  }

 private:
  size_t steps_;
  size_t block_ = 1;
  std::vector<double> items_, time_ms_;
};

double mean_speed(const std::vector<std::vector<StepSample>>& runs) {
  double sum = 0;
  for (const std::vector<StepSample>& run : runs) sum += speed_of(run);
  return sum / static_cast<double>(runs.size());
}

double resampled_mean_speed(const std::vector<RunResampler>& runs, std::mt19937_64& random) {
  double sum = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const size_t drawn = runs.size() == 1 ? 0 : draw_index(random, runs.size());
    sum += runs[drawn].resampled_speed(random);
  }
  return sum / static_cast<double>(runs.size());
}

Verdict verdict_of(double ratio, double low, double high, double noise_floor_pct) {
  const bool beyond_floor = std::fabs(100.0 * (ratio - 1.0)) >= noise_floor_pct;
  if (high < 1.0 && beyond_floor) return Verdict::slower;
  if (low > 1.0 && beyond_floor) return Verdict::faster;
  return Verdict::within_noise;
}

}  // namespace

std::vector<StepSample> measured_steps_of(const Result& result) {
  std::vector<StepSample> samples;
  for (const StepRecord& step : result.steps) {
    if (step.warmup || step.after_measurement) continue;
    const int64_t items = step.items ? *step.items : result.summary.items_per_step;
    samples.push_back({static_cast<double>(items), step.time_ms});
  }
  return samples;
}

double speed_of(const std::vector<StepSample>& samples) {
  double items = 0, time_ms = 0;
  for (const StepSample& sample : samples) {
    items += sample.items;
    time_ms += sample.time_ms;
  }
  return time_ms > 0 ? 1000.0 * items / time_ms : 0.0;
}

std::string why_too_few_samples(const std::vector<StepSample>& samples) {
  if (samples.size() < 2) {
    return samples.empty() ? "no measured steps recorded (2 needed)" : "1 measured step recorded (2 needed)";
  }
  for (const StepSample& sample : samples) {
    if (!(sample.time_ms > 0)) return "a measured step took no time (its step times are not usable)";
    if (!(sample.items > 0)) return "a measured step held no items (its step records are not usable)";
  }
  return "";
}

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::faster: return "faster";
    case Verdict::slower: return "slower";
    case Verdict::within_noise: return "within noise";
    case Verdict::too_few_samples: return "too few samples";
  }
  return "";
}

std::optional<double> SpeedComparison::change_pct() const {
  if (!ratio) return std::nullopt;
  return 100.0 * (*ratio - 1.0);
}

bool SpeedComparison::slower_by_more_than(double pct) const {
  return verdict == Verdict::slower && -*change_pct() > pct;
}

SpeedComparison compare_speeds(const std::vector<std::vector<StepSample>>& base_runs,
                               const std::vector<std::vector<StepSample>>& new_runs,
                               const ComparisonSettings& settings) {
  SpeedComparison comparison;
  if (!base_runs.empty()) comparison.base_speed = mean_speed(base_runs);
  if (!new_runs.empty()) comparison.new_speed = mean_speed(new_runs);
  if (base_runs.empty() || new_runs.empty()) return comparison;
  comparison.ratio = *comparison.new_speed / *comparison.base_speed;

  const std::vector<RunResampler> base(base_runs.begin(), base_runs.end());
  const std::vector<RunResampler> changed(new_runs.begin(), new_runs.end());
  std::mt19937_64 random(settings.seed);
  std::vector<double> ratios;
  ratios.reserve(static_cast<size_t>(settings.resamples));
  for (int i = 0; i < settings.resamples; ++i) {
    const double base_speed = resampled_mean_speed(base, random);
    ratios.push_back(resampled_mean_speed(changed, random) / base_speed);
  }
  const double tail_pct = 50.0 * (1.0 - settings.confidence);
  comparison.ratio_low = percentile(ratios, tail_pct);
  comparison.ratio_high = percentile(ratios, 100.0 - tail_pct);
  comparison.verdict = verdict_of(*comparison.ratio, *comparison.ratio_low, *comparison.ratio_high,
                                  settings.noise_floor_pct);
  return comparison;
}

}  // namespace dpbench
