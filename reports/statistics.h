// Sample statistics for the measurement protocol (DESIGN section 5): distributions of per-step
// times and rates, jitter as tf_cnn_benchmarks defines it, and the "+/-" of progress lines.
#pragma once

#include <vector>

#include "reports/result.h"

namespace dpbench {

// Mean, median, sample stddev (n - 1), min, max, p5, p95 over `samples`.
// Throws std::invalid_argument for fewer than 2 samples or a NaN sample.
DistributionStats summarize(const std::vector<double>& samples);

// 1.4826 x median absolute deviation from the median: a stddev estimate that a few outlier steps
// (a checkpoint, a GC pause) cannot inflate. Throws std::invalid_argument for fewer than 2 samples.
double jitter(const std::vector<double>& samples);

// Throws std::invalid_argument for an empty sample or a NaN sample.
double median(std::vector<double> samples);

// p in [0, 100]; linear interpolation between closest ranks (numpy's default 'linear' method).
// Throws std::invalid_argument for an empty sample, a NaN sample or p outside [0, 100].
double percentile(std::vector<double> samples, double p);

// Standard error of the mean rate (sample stddev / sqrt(n)); 0 for fewer than 2 rates.
double speed_uncertainty(const std::vector<double>& rates);

}  // namespace dpbench
