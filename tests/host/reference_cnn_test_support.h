// Helpers for the reference op tests: reproducible data, element-wise comparison against a
// double-precision expectation, a finite-difference derivative, and 16-bit buffers with the
// bitwise comparison the mixed-precision tests use.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/counter_random.h"
#include "engine/data_type.h"

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

// ---- 16-bit storage ---------------------------------------------------------------------------

const DataType kHalfTypes[] = {DataType::f16, DataType::bf16};
const DataType kAllTypes[] = {DataType::f32, DataType::f16, DataType::bf16};

// A host buffer of `type` elements, as a layer hands it to a typed op (void*); filled by rounding
// floats, read back as floats.
class TypedBuffer {
 public:
  TypedBuffer(DataType type, const std::vector<float>& values)
      : type_(type), count_(values.size()), words_((count_ * data_type_bytes(type) + 3) / 4) {
    for (size_t i = 0; i < count_; ++i) store_from_float(type_, words_.data(), i, values[i]);
  }
  TypedBuffer(DataType type, size_t count, float value)
      : TypedBuffer(type, std::vector<float>(count, value)) {}

  void* data() { return words_.data(); }
  const void* data() const { return words_.data(); }
  std::vector<float> values() const {
    std::vector<float> result(count_);
    for (size_t i = 0; i < count_; ++i) result[i] = load_as_float(type_, words_.data(), i);
    return result;
  }

 private:
  DataType type_;
  size_t count_;
  std::vector<uint32_t> words_;  // uint32_t: aligned for any type
};

// `values` as `type` holds them.
inline std::vector<float> rounded(DataType type, std::vector<float> values) {
  for (float& value : values) value = round_to(type, value);
  return values;
}

// How many of `values` rounding to `type` changes. A 16-bit test whose results never round
// cannot tell a rounded result from an unrounded one, so the tests require this to be large.
inline size_t changed_by_rounding(DataType type, const std::vector<float>& values) {
  size_t changed = 0;
  for (float value : values) changed += float_bits(round_to(type, value)) != float_bits(value);
  return changed;
}

// Equal bit for bit (the sign of a zero counts); names the first element that is not.
inline void check_same_bits(const std::vector<float>& actual, const std::vector<float>& expected,
                            const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  size_t bad = actual.size();
  for (size_t i = 0; i < actual.size() && bad == actual.size(); ++i) {
    if (float_bits(actual[i]) != float_bits(expected[i])) bad = i;
  }
  if (bad == actual.size()) return;
  INFO(what << ": element " << bad << " is " << actual[bad] << ", expected " << expected[bad]);
  CHECK(bad == actual.size());
}

}  // namespace dpbench::testing
