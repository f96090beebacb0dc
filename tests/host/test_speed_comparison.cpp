// The statistics of `dpbench compare` on made-up step samples: identical runs are within noise, a
// tight 5% slowdown is slower (and over a 2% gate), a noisy 3% difference is within noise, the
// noise floor, repeats whose spread widens the interval, reproducible intervals, and which steps
// count as samples.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "reports/speed_comparison.h"

using namespace dpbench;

namespace {

constexpr double kItemsPerStep = 256;

// `steps` samples at `speed` items/s, each step's time off by up to +/- `spread` (a fraction),
// uniformly. std::mt19937's numbers are fixed by the standard, so the samples are too.
std::vector<StepSample> samples_at(double speed, double spread, uint32_t seed, int steps = 100) {
  std::mt19937 random(seed);
  std::vector<StepSample> samples;
  const double step_ms = 1000.0 * kItemsPerStep / speed;
  for (int i = 0; i < steps; ++i) {
    const double uniform = 2.0 * static_cast<double>(random()) / 4294967295.0 - 1.0;  // [-1, 1]
    samples.push_back({kItemsPerStep, step_ms * (1.0 + spread * uniform)});
  }
  return samples;
}

using Runs = std::vector<std::vector<StepSample>>;

SpeedComparison compare(const Runs& base, const Runs& changed, double noise_floor_pct = 1.0) {
  ComparisonSettings settings;
  settings.noise_floor_pct = noise_floor_pct;
  return compare_speeds(base, changed, settings);
}

}  // namespace

TEST_CASE("compare: identical runs are within noise", "[compare]") {
  for (const double spread : {0.0, 0.01, 0.3}) {
    const std::vector<StepSample> run = samples_at(1000, spread, 7);
    const SpeedComparison result = compare({run}, {run});
    CHECK(result.verdict == Verdict::within_noise);
    CHECK(*result.ratio == 1.0);
    CHECK(*result.ratio_low <= 1.0);
    CHECK(*result.ratio_high >= 1.0);
    CHECK_FALSE(result.slower_by_more_than(0));
  }
}

TEST_CASE("compare: a 5% slower series with tight samples is slower and over a 2% gate", "[compare]") {
  const SpeedComparison result = compare({samples_at(1000, 0.01, 1)}, {samples_at(950, 0.01, 2)});
  CHECK(result.verdict == Verdict::slower);
  CHECK(*result.ratio == Approx(0.95).epsilon(0.002));
  CHECK(*result.ratio_high < 1.0);
  CHECK(*result.ratio_low < *result.ratio);
  CHECK(*result.ratio < *result.ratio_high);
  CHECK(*result.change_pct() == Approx(-5.0).margin(0.2));
  CHECK(result.slower_by_more_than(2));
  CHECK_FALSE(result.slower_by_more_than(6));
  // The other way round it is faster, and no gate on slowdowns trips.
  const SpeedComparison reverse = compare({samples_at(950, 0.01, 2)}, {samples_at(1000, 0.01, 1)});
  CHECK(reverse.verdict == Verdict::faster);
  CHECK(*reverse.ratio_low > 1.0);
  CHECK_FALSE(reverse.slower_by_more_than(0));
}

TEST_CASE("compare: a noisy 3% difference is within noise", "[compare]") {
  // Step times off by up to 30% (about 17% standard deviation) over 50 steps a side; the same
  // pattern of noise on both sides, so the means differ by exactly 3%.
  const SpeedComparison result = compare({samples_at(1000, 0.3, 3, 50)}, {samples_at(970, 0.3, 3, 50)});
  CHECK(*result.ratio == Approx(0.97));
  CHECK(result.verdict == Verdict::within_noise);
  CHECK(*result.ratio_low < 1.0);
  CHECK(*result.ratio_high > 1.0);
  CHECK_FALSE(result.slower_by_more_than(2));
}

TEST_CASE("compare: a certain change below the noise floor is within noise", "[compare]") {
  // 0.3% slower with no noise at all: every resample says so, yet it is no regression at 1%.
  const Runs base = {samples_at(1000, 0, 1)}, changed = {samples_at(997, 0, 1)};
  const SpeedComparison floored = compare(base, changed);
  CHECK(*floored.ratio_high < 1.0);
  CHECK(floored.verdict == Verdict::within_noise);
  CHECK(compare(base, changed, 0.0).verdict == Verdict::slower);
  CHECK(compare(base, changed, 0.25).verdict == Verdict::slower);
}

TEST_CASE("compare: repeats are combined and their spread widens the interval", "[compare]") {
  // Each run tight, but runs of one side differ by up to 10% (as cuDNN's algorithm choice can make
  // them): a 3% difference of the means is within that spread.
  const Runs base = {samples_at(900, 0.01, 1), samples_at(1000, 0.01, 2), samples_at(1100, 0.01, 3)};
  const Runs spread_new = {samples_at(873, 0.01, 4), samples_at(970, 0.01, 5), samples_at(1067, 0.01, 6)};
  const SpeedComparison spread = compare(base, spread_new);
  CHECK(*spread.base_speed == Approx(1000).epsilon(0.002));  // the mean of the runs' speeds
  CHECK(*spread.ratio == Approx(0.97).epsilon(0.002));
  CHECK(spread.verdict == Verdict::within_noise);
  // The same steps pooled as one run a side give a far narrower interval: resampling steps alone
  // cannot see that whole runs differ.
  Runs pooled_base(1), pooled_new(1);
  for (const auto& run : base) pooled_base[0].insert(pooled_base[0].end(), run.begin(), run.end());
  for (const auto& run : spread_new) pooled_new[0].insert(pooled_new[0].end(), run.begin(), run.end());
  const SpeedComparison pooled = compare(pooled_base, pooled_new);
  CHECK(*spread.ratio_high - *spread.ratio_low > 2 * (*pooled.ratio_high - *pooled.ratio_low));
  // Repeats that agree keep a real 5% slowdown slower.
  const Runs tight_base = {samples_at(1000, 0.01, 1), samples_at(1005, 0.01, 2), samples_at(995, 0.01, 3)};
  const Runs tight_new = {samples_at(950, 0.01, 4), samples_at(955, 0.01, 5), samples_at(945, 0.01, 6)};
  const SpeedComparison tight = compare(tight_base, tight_new);
  CHECK(tight.verdict == Verdict::slower);
  CHECK(*tight.ratio == Approx(0.95).epsilon(0.002));
}

TEST_CASE("compare: the interval is the same every time for the same samples", "[compare]") {
  const Runs base = {samples_at(1000, 0.2, 11)}, changed = {samples_at(990, 0.2, 12)};
  const SpeedComparison first = compare(base, changed), second = compare(base, changed);
  CHECK(*first.ratio_low == *second.ratio_low);
  CHECK(*first.ratio_high == *second.ratio_high);
}

TEST_CASE("compare: a side without a run of 2 or more samples has too few samples", "[compare]") {
  CHECK(why_too_few_samples({}) == "no measured steps recorded (2 needed)");
  CHECK(why_too_few_samples({{256, 10}}) == "1 measured step recorded (2 needed)");
  CHECK(why_too_few_samples({{256, 10}, {256, 0}}) == "a measured step took no time (its step times are not usable)");
  CHECK(why_too_few_samples({{256, 10}, {256, 11}}).empty());
  const SpeedComparison result = compare({samples_at(1000, 0.01, 1)}, {});
  CHECK(result.verdict == Verdict::too_few_samples);
  CHECK(result.base_speed.has_value());
  CHECK_FALSE(result.new_speed.has_value());
  CHECK_FALSE(result.ratio.has_value());
  CHECK_FALSE(result.change_pct().has_value());
  CHECK_FALSE(result.slower_by_more_than(0));
  CHECK(std::string(verdict_name(result.verdict)) == "too few samples");
}

TEST_CASE("compare: the samples are the measured steps with their own items where recorded", "[compare]") {
  Result result;
  result.summary.items_per_step = 64;
  result.steps = {{0, 90.0, 2.0, true}, {1, 10.0, 2.0, false}, {2, 12.0, 2.0, false}, {3, 30.0, 2.0, false}};
  result.steps[3].after_measurement = true;  // untimed, after the timed epochs
  result.steps[2].items = 48;                // a host feed counted this batch's items
  const std::vector<StepSample> samples = measured_steps_of(result);
  REQUIRE(samples.size() == 2);
  CHECK(samples[0].items == 64);
  CHECK(samples[0].time_ms == 10.0);
  CHECK(samples[1].items == 48);
  CHECK(samples[1].time_ms == 12.0);
  CHECK(speed_of(samples) == Approx(1000.0 * 112 / 22));  // a ratio of totals, as summary.items_per_sec
}
