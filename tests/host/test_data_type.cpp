// The host conversions to fp16 and bf16 (engine/data_type.h): the reference backend rounds every
// 16-bit result with them, so a wrong rounding here would make the oracle wrong, not just a test.
// They are checked against every 16-bit pattern, every halfway point, and an independent rounding
// by scaling in double (std::nearbyint rounds ties to even).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/data_type.h"
#include "engine/precision.h"

using namespace dpbench;

namespace {

bool is_f16_nan(uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u && (bits & 0x03ffu) != 0; }
bool is_bf16_nan(uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u && (bits & 0x007fu) != 0; }

// The value of a binary16 pattern from its definition, without bit tricks.
double f16_value(uint16_t bits) {
  const int sign = bits >> 15;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  const double magnitude = exponent == 0x1f ? std::numeric_limits<double>::infinity()
                           : exponent == 0  ? std::ldexp(mantissa, -24)
                                            : std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -magnitude : magnitude;
}

// `value` rounded to nearest even with `precision` significant bits, no exponent below
// `min_exponent` (subnormals share its spacing) and `max_finite` the largest finite magnitude:
// computed in double by scaling the spacing of the value's binade to 1.
double round_independently(float value, int precision, int min_exponent, double max_finite) {
  if (value == 0.0f || !std::isfinite(value)) return value;
  const int exponent = std::max(std::ilogb(value), min_exponent);
  const double spacing = std::ldexp(1.0, exponent - (precision - 1));
  const double rounded = std::nearbyint(static_cast<double>(value) / spacing) * spacing;
  if (std::fabs(rounded) > max_finite) return std::copysign(HUGE_VAL, value);
  return rounded == 0.0 ? std::copysign(0.0, value) : rounded;
}

double round_f16_independently(float value) {
  return round_independently(value, 11, -14, 65504.0);
}
double round_bf16_independently(float value) {
  return round_independently(value, 8, -126, std::ldexp(255.0, 120));  // 0x7f7f: 255 * 2^120
}

// Floats spread over the whole bit space (both signs, every binade, subnormals included).
std::vector<float> spread_floats() {
  std::vector<float> values;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) {
    const float value = float_from_bits(static_cast<uint32_t>(bits));
    if (!std::isnan(value)) values.push_back(value);
  }
  return values;
}

}  // namespace

TEST_CASE("data types: sizes and names", "[data_type]") {
  CHECK(data_type_bytes(DataType::f32) == 4);
  CHECK(data_type_bytes(DataType::f16) == 2);
  CHECK(data_type_bytes(DataType::bf16) == 2);
  CHECK(std::string(data_type_name(DataType::f32)) == "fp32");
  CHECK(std::string(data_type_name(DataType::f16)) == "fp16");
  CHECK(std::string(data_type_name(DataType::bf16)) == "bf16");
}

TEST_CASE("fp16: every bit pattern decodes to its value and converts back to itself",
          "[data_type]") {
  size_t wrong_value = 0, not_round_trip = 0, nan_lost = 0;
  for (uint32_t pattern = 0; pattern <= 0xffffu; ++pattern) {
    const uint16_t bits = static_cast<uint16_t>(pattern);
    const float value = f16_bits_to_float(bits);
    if (is_f16_nan(bits)) {
      nan_lost += !(std::isnan(value) && is_f16_nan(float_to_f16_bits(value)));
      continue;
    }
    const double want = f16_value(bits);
    wrong_value += !(value == want && std::signbit(value) == std::signbit(want));
    not_round_trip += float_to_f16_bits(value) != bits;
  }
  CHECK(wrong_value == 0);
  CHECK(not_round_trip == 0);
  CHECK(nan_lost == 0);
}

TEST_CASE("bf16: every bit pattern converts back to itself, NaN stays NaN", "[data_type]") {
  size_t wrong_value = 0, not_round_trip = 0, nan_lost = 0;
  for (uint32_t pattern = 0; pattern <= 0xffffu; ++pattern) {
    const uint16_t bits = static_cast<uint16_t>(pattern);
    const float value = bf16_bits_to_float(bits);
    wrong_value += float_bits(value) != pattern << 16;  // bf16 is the top half of a float
    if (is_bf16_nan(bits)) {
      nan_lost += !(std::isnan(value) && is_bf16_nan(float_to_bf16_bits(value)));
      continue;
    }
    not_round_trip += float_to_bf16_bits(value) != bits;
  }
  CHECK(wrong_value == 0);
  CHECK(not_round_trip == 0);
  CHECK(nan_lost == 0);
}

TEST_CASE("bf16: a NaN whose payload sits below the kept bits stays NaN", "[data_type]") {
  // Plain truncation (or rounding) of these would leave an all-zero mantissa: infinity.
  for (uint32_t bits : {0x7f800001u, 0xff800001u, 0x7f80ffffu, 0x7fc00000u, 0xffffffffu}) {
    INFO("float bits " << bits);
    const uint16_t converted = float_to_bf16_bits(float_from_bits(bits));
    CHECK(is_bf16_nan(converted));
    CHECK((converted >> 15) == (bits >> 31));  // the sign survives
    CHECK(std::isnan(round_to(DataType::bf16, float_from_bits(bits))));
  }
  CHECK(is_f16_nan(float_to_f16_bits(float_from_bits(0x7f800001u))));
  CHECK(std::isnan(round_to(DataType::f16, std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("fp16 and bf16 round halfway points to the even neighbour", "[data_type]") {
  // Between every pair of adjacent finite positive 16-bit values a < b: the midpoint goes to the
  // one with an even mantissa, the floats just beside it to the nearer neighbour. The midpoints
  // need at most 12 significant bits, so they are exact floats. Negative values by symmetry.
  struct Type {
    const char* name;
    uint16_t (*to_bits)(float);
    float (*from_bits)(uint16_t);
    uint16_t largest_finite;
  };
  const Type types[] = {{"fp16", float_to_f16_bits, f16_bits_to_float, 0x7bff},
                        {"bf16", float_to_bf16_bits, bf16_bits_to_float, 0x7f7f}};
  for (const Type& type : types) {
    INFO(type.name);
    size_t checked = 0, wrong = 0;
    for (uint16_t low = 0; low < type.largest_finite; ++low) {
      const uint16_t high = low + 1;
      const float a = type.from_bits(low), b = type.from_bits(high);
      const float mid = static_cast<float>((static_cast<double>(a) + b) / 2.0);
      REQUIRE(static_cast<double>(mid) == (static_cast<double>(a) + b) / 2.0);
      const uint16_t even = (low & 1u) == 0 ? low : high;
      for (float sign : {1.0f, -1.0f}) {
        const uint16_t sign_bit = sign < 0 ? 0x8000 : 0;
        wrong += type.to_bits(sign * mid) != (even | sign_bit);
        wrong += type.to_bits(sign * std::nextafter(mid, 0.0f)) != (low | sign_bit);
        wrong += type.to_bits(sign * std::nextafter(mid, HUGE_VALF)) != (high | sign_bit);
      }
      ++checked;
    }
    CHECK(checked > 30000);
    CHECK(wrong == 0);
  }
  // The classic cases by hand: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 (odd): down to 1;
  // 1 + 3 * 2^-11 between 1 + 2^-10 (odd) and 1 + 2^-9 (even): up.
  CHECK(float_to_f16_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(float_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  CHECK(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
}

TEST_CASE("fp16: overflow to infinity from 65520 on", "[data_type]") {
  CHECK(float_to_f16_bits(65504.0f) == 0x7bff);  // the largest finite half
  // 65520 is halfway between 65504 (odd mantissa) and 65536 (beyond the range): ties to even
  // round it up, to infinity; anything below it rounds down.
  CHECK(float_to_f16_bits(std::nextafter(65520.0f, 0.0f)) == 0x7bff);
  CHECK(float_to_f16_bits(65520.0f) == 0x7c00);
  CHECK(float_to_f16_bits(-65520.0f) == 0xfc00);
  CHECK(float_to_f16_bits(1.0e6f) == 0x7c00);
  CHECK(float_to_f16_bits(std::numeric_limits<float>::max()) == 0x7c00);
  CHECK(float_to_f16_bits(HUGE_VALF) == 0x7c00);
  CHECK(float_to_f16_bits(-HUGE_VALF) == 0xfc00);
  CHECK(std::isinf(round_to(DataType::f16, 70000.0f)));
  // bf16 has float's range: only values past its largest finite one overflow.
  CHECK(float_to_bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(float_to_bf16_bits(float_from_bits(0x7f7f0000u)) == 0x7f7f);
  CHECK(bf16_bits_to_float(float_to_bf16_bits(1.0e6f)) == Approx(1.0e6).epsilon(1.0 / 256));
}

TEST_CASE("fp16: subnormals and underflow", "[data_type]") {
  const float unit = std::ldexp(1.0f, -24);  // the smallest subnormal half
  CHECK(float_to_f16_bits(unit) == 0x0001);
  CHECK(float_to_f16_bits(-unit) == 0x8001);
  CHECK(float_to_f16_bits(1023 * unit) == 0x03ff);        // the largest subnormal
  CHECK(float_to_f16_bits(std::ldexp(1.0f, -14)) == 0x0400);  // the smallest normal
  CHECK(float_to_f16_bits(1023.5f * unit) == 0x0400);     // halfway, up to the even normal
  CHECK(float_to_f16_bits(0.5f * unit) == 0x0000);        // halfway between 0 and 1 unit: to 0
  CHECK(float_to_f16_bits(std::nextafter(0.5f * unit, 1.0f)) == 0x0001);
  CHECK(float_to_f16_bits(1.5f * unit) == 0x0002);        // halfway between 1 and 2: to 2
  CHECK(float_to_f16_bits(2.5f * unit) == 0x0002);        // halfway between 2 and 3: to 2
  CHECK(float_to_f16_bits(1.0e-10f) == 0x0000);
  CHECK(float_to_f16_bits(-1.0e-10f) == 0x8000);  // the sign of an underflow survives
  CHECK(float_to_f16_bits(std::numeric_limits<float>::denorm_min()) == 0x0000);
  for (int m = 1; m < 1024; ++m) {
    INFO("subnormal " << m);
    CHECK(f16_bits_to_float(static_cast<uint16_t>(m)) == m * unit);
  }
}

TEST_CASE("fp16 and bf16 agree with an independent rounding over the whole float range",
          "[data_type]") {
  REQUIRE(std::fegetround() == FE_TONEAREST);
  const std::vector<float> values = spread_floats();
  REQUIRE(values.size() > 1000000);
  size_t f16_wrong = 0, bf16_wrong = 0, f16_first = 0, bf16_first = 0;
  for (float value : values) {
    const double f16_want = round_f16_independently(value);
    const float f16_got = f16_bits_to_float(float_to_f16_bits(value));
    if (!(f16_got == f16_want && std::signbit(f16_got) == std::signbit(f16_want))) {
      if (f16_wrong++ == 0) f16_first = float_bits(value);
    }
    const double bf16_want = round_bf16_independently(value);
    const float bf16_got = bf16_bits_to_float(float_to_bf16_bits(value));
    if (!(bf16_got == bf16_want && std::signbit(bf16_got) == std::signbit(bf16_want))) {
      if (bf16_wrong++ == 0) bf16_first = float_bits(value);
    }
  }
  INFO("first fp16 mismatch at float bits " << f16_first << ", bf16 at " << bf16_first);
  CHECK(f16_wrong == 0);
  CHECK(bf16_wrong == 0);
#ifdef __FLT16_MAX__
  // Where the compiler has a native half type, its conversion is a third opinion.
  size_t native_wrong = 0;
  for (float value : values) {
    const float native = static_cast<float>(static_cast<_Float16>(value));
    const float ours = round_to(DataType::f16, value);
    native_wrong += !(native == ours && std::signbit(native) == std::signbit(ours));
  }
  CHECK(native_wrong == 0);
#endif
}

TEST_CASE("load_as_float, store_from_float and round_to agree for every type", "[data_type]") {
  const std::vector<float> values = {0.0f, -0.0f, 1.0f, -2.5f, 0.1f, 3.14159265f, 65519.0f,
                                     1.0e-6f, -7.0e-8f, 1.0e20f};
  for (DataType type : {DataType::f32, DataType::f16, DataType::bf16}) {
    INFO(data_type_name(type));
    std::vector<uint32_t> storage(values.size());  // room for any type, aligned for float
    for (size_t i = 0; i < values.size(); ++i) store_from_float(type, storage.data(), i, values[i]);
    for (size_t i = 0; i < values.size(); ++i) {
      const float loaded = load_as_float(type, storage.data(), i);
      CHECK(float_bits(loaded) == float_bits(round_to(type, values[i])));
      if (type == DataType::f32) CHECK(float_bits(loaded) == float_bits(values[i]));
    }
  }
  // 16-bit stores are 2 bytes wide: neighbours stay untouched.
  std::vector<uint16_t> halves = {0x1111, 0x2222, 0x3333};
  store_from_float(DataType::f16, halves.data(), 1, 1.0f);
  CHECK(halves == std::vector<uint16_t>{0x1111, 0x3c00, 0x3333});
  store_from_float(DataType::bf16, halves.data(), 1, 1.0f);
  CHECK(halves == std::vector<uint16_t>{0x1111, 0x3f80, 0x3333});
  CHECK(round_to(DataType::f16, 0.1f) == 0.0999755859375f);
  CHECK(round_to(DataType::bf16, 0.1f) == 0.10009765625f);
}

TEST_CASE("precisions are named, found by name and store activations in their type", "[data_type]") {
  for (dpbench::Precision precision : dpbench::every_precision())
    CHECK(dpbench::find_precision(dpbench::precision_name(precision)) == precision);
  CHECK_FALSE(dpbench::find_precision("fp8").has_value());
  CHECK_FALSE(dpbench::find_precision("FP32").has_value());
  CHECK(dpbench::activation_type(dpbench::Precision::tf32) == dpbench::DataType::f32);
  CHECK(dpbench::activation_type(dpbench::Precision::bf16) == dpbench::DataType::bf16);
  CHECK(dpbench::activation_type(dpbench::Precision::fp16) == dpbench::DataType::f16);
  CHECK_FALSE(dpbench::allows_tf32(dpbench::Precision::fp32));
  CHECK(dpbench::allows_tf32(dpbench::Precision::bf16));
}
