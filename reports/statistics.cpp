// Sample statistics for the measurement protocol (DESIGN section 5).
#include "reports/statistics.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace dpbench {
namespace {

void require_at_least_two(const std::vector<double>& samples) {
  if (samples.size() < 2) {
    throw std::invalid_argument("no aggregate from fewer than 2 samples (got " +
                                std::to_string(samples.size()) + ")");
  }
}

// NaN breaks std::sort's strict weak ordering (undefined behaviour), so it is refused up front.
void require_no_nan(const std::vector<double>& samples) {
  if (std::any_of(samples.begin(), samples.end(), [](double x) { return std::isnan(x); })) {
    throw std::invalid_argument("sample contains NaN");
  }
}

double percentile_of_sorted(const std::vector<double>& sorted, double p) {
  const double rank = (static_cast<double>(sorted.size()) - 1.0) * p / 100.0;
  const size_t below = static_cast<size_t>(std::floor(rank));
  if (below + 1 >= sorted.size()) return sorted.back();
  const double fraction = rank - static_cast<double>(below);
  return sorted[below] + fraction * (sorted[below + 1] - sorted[below]);
}

double mean_of(const std::vector<double>& samples) {
  double sum = 0;
  for (double x : samples) sum += x;
  return sum / static_cast<double>(samples.size());
}

// Two-pass (mean first) rather than sum-of-squares, which loses digits for large, close values
// such as step rates of ~1e4 items/s varying by a few percent.
double sample_stddev(const std::vector<double>& samples, double mean) {
  double squared_deviations = 0;
  for (double x : samples) squared_deviations += (x - mean) * (x - mean);
  return std::sqrt(squared_deviations / static_cast<double>(samples.size() - 1));
}

}  // namespace

double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) throw std::invalid_argument("percentile of an empty sample");
  if (!(p >= 0.0 && p <= 100.0)) {
    throw std::invalid_argument("percentile " + std::to_string(p) + " is outside [0, 100]");
  }
  require_no_nan(samples);
  std::sort(samples.begin(), samples.end());
  return percentile_of_sorted(samples, p);
}

double median(std::vector<double> samples) { return percentile(std::move(samples), 50.0); }

DistributionStats summarize(const std::vector<double>& samples) {
  require_at_least_two(samples);
  require_no_nan(samples);
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());

  DistributionStats stats;
  stats.count = static_cast<int64_t>(sorted.size());
  stats.mean = mean_of(sorted);
  stats.median = percentile_of_sorted(sorted, 50.0);
  stats.stddev = sample_stddev(sorted, stats.mean);
  stats.min = sorted.front();
  stats.max = sorted.back();
  stats.p5 = percentile_of_sorted(sorted, 5.0);
  stats.p95 = percentile_of_sorted(sorted, 95.0);
  return stats;
}

double jitter(const std::vector<double>& samples) {
  require_at_least_two(samples);
  // 1.4826 makes the MAD a consistent estimator of the stddev for normally distributed data.
  constexpr double kMadToStddev = 1.4826;
  const double center = median(samples);
  std::vector<double> absolute_deviations;
  absolute_deviations.reserve(samples.size());
  for (double x : samples) absolute_deviations.push_back(std::fabs(x - center));
  return kMadToStddev * median(std::move(absolute_deviations));
}

double speed_uncertainty(const std::vector<double>& rates) {
  if (rates.size() < 2) return 0.0;
  return sample_stddev(rates, mean_of(rates)) / std::sqrt(static_cast<double>(rates.size()));
}

}  // namespace dpbench
