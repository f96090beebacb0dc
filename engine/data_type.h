// Storage types of activations and weight copies (--precision): fp32, or a 16-bit type that the
// GPU's tensor cores read (fp16, bf16) with fp32 arithmetic inside every op. Also the host-side
// rounding to those types, which the reference backend uses to store what the GPU would store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dpbench {

enum class DataType : uint8_t { f32, f16, bf16 };

inline size_t data_type_bytes(DataType type) { return type == DataType::f32 ? 4 : 2; }

// The address of element `index` of a buffer of `type`.
inline void* element_at(void* data, DataType type, size_t index) {
  return static_cast<char*>(data) + index * data_type_bytes(type);
}
inline const void* element_at(const void* data, DataType type, size_t index) {
  return static_cast<const char*>(data) + index * data_type_bytes(type);
}

inline const char* data_type_name(DataType type) {
  switch (type) {
    case DataType::f16: return "fp16";
    case DataType::bf16: return "bf16";
    default: return "fp32";
  }
}

// ---- host conversions, round to nearest even (as the GPU's conversions) ----------------------

inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float float_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline uint16_t float_to_bf16_bits(float value) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN stays NaN
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float bf16_bits_to_float(uint16_t bits) { return float_from_bits(static_cast<uint32_t>(bits) << 16); }

// IEEE binary16: 5 exponent bits (bias 15), 10 mantissa bits, subnormals below 2^-14, largest
// finite 65504; values that round past it become infinity.
inline uint16_t float_to_f16_bits(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 2^16: inf
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent >= -14) {
    // Normal half: keep 10 of the 23 mantissa bits, round the 13 dropped ones to nearest even.
    const uint32_t rebased = magnitude - (static_cast<uint32_t>(127 - 15) << 23);
    const uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }
  if (exponent < -25) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
  // Subnormal half: the value in units of 2^-24, rounded to nearest even.
  const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  const int shift = -exponent - 1;  // 14 .. 24: mantissa * 2^(exponent - 23) / 2^-24
  const uint32_t whole = mantissa >> shift;
  const uint32_t remainder = mantissa & ((1u << shift) - 1u);
  const uint32_t half_unit = 1u << (shift - 1);
  const uint32_t rounded = whole + ((remainder > half_unit || (remainder == half_unit && (whole & 1u))) ? 1u : 0u);
  return static_cast<uint16_t>(sign | rounded);
}

inline float f16_bits_to_float(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1fu) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return float_from_bits(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
  if (mantissa == 0) return float_from_bits(sign);
  // Subnormal: mantissa * 2^-24, exact in float.
  const float value = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign ? -value : value;
}

// The element at `index` of a buffer of `type`, as a float.
inline float load_as_float(DataType type, const void* data, size_t index) {
  switch (type) {
    case DataType::f16: return f16_bits_to_float(static_cast<const uint16_t*>(data)[index]);
    case DataType::bf16: return bf16_bits_to_float(static_cast<const uint16_t*>(data)[index]);
    default: return static_cast<const float*>(data)[index];
  }
}

// Stores `value` rounded to `type` at `index`.
inline void store_from_float(DataType type, void* data, size_t index, float value) {
  switch (type) {
    case DataType::f16: static_cast<uint16_t*>(data)[index] = float_to_f16_bits(value); break;
    case DataType::bf16: static_cast<uint16_t*>(data)[index] = float_to_bf16_bits(value); break;
    default: static_cast<float*>(data)[index] = value;
  }
}

// `value` as `type` would hold it.
inline float round_to(DataType type, float value) {
  switch (type) {
    case DataType::f16: return f16_bits_to_float(float_to_f16_bits(value));
    case DataType::bf16: return bf16_bits_to_float(float_to_bf16_bits(value));
    default: return value;
  }
}

}  // namespace dpbench
