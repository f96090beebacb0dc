// Helpers for the reference image-op tests: reproducible data, element-wise comparison against a
// double-precision expectation, and a finite-difference derivative.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/counter_random.h"

namespace dpbench::testing {

// Uniform in [lo, hi) from the counter RNG: the same values on every run and every machine.
inline std::vector<float> random_values(size_t n, uint64_t stream, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = lo + (hi - lo) * counter_uniform(2024, stream, i);
  return values;
}

// |actual - expected| <= atol + rtol * |expected| everywhere; names the first element that is not.
template <typename Expected>
void check_close(const std::vector<float>& actual, const std::vector<Expected>& expected,
                 double atol, double rtol, const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  size_t bad = actual.size();
  for (size_t i = 0; i < actual.size() && bad == actual.size(); ++i) {
    const double want = static_cast<double>(expected[i]);
    if (!(std::fabs(actual[i] - want) <= atol + rtol * std::fabs(want))) bad = i;
  }
  if (bad == actual.size()) return;
  INFO(what << ": element " << bad << " is " << actual[bad] << ", expected "
            << static_cast<double>(expected[bad]));
  CHECK(bad == actual.size());
}

// sum_i y_i * weights_i in double: a scalar loss whose gradient with respect to y is `weights`.
inline double weighted_sum(const std::vector<float>& y, const std::vector<float>& weights) {
  double sum = 0.0;
  for (size_t i = 0; i < y.size(); ++i) sum += static_cast<double>(y[i]) * weights[i];
  return sum;
}

// d loss / d parameter by central differences at steps h and 2h combined by Richardson
// extrapolation, (4 D(h) - D(2h)) / 3: the h^2 error terms cancel, leaving O(h^4). The divisor is
// the step the float parameter really took, so rounding of `original + step` costs nothing.
template <typename Loss>
double finite_difference(float& parameter, double h, Loss loss) {
  const float original = parameter;
  auto central = [&](double step) {
    parameter = static_cast<float>(original + step);
    const double up = loss();
    const double up_at = parameter;
    parameter = static_cast<float>(original - step);
    const double down = loss();
    const double down_at = parameter;
    parameter = original;
    return (up - down) / (up_at - down_at);
  };
  return (4.0 * central(h) - central(2.0 * h)) / 3.0;
}

}  // namespace dpbench::testing
