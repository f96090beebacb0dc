// Typed access for the reference ops: hands a loop its buffers' DataType as a compile-time
// constant, so load_as_float / store_from_float fold to plain accesses inside it and the fp32 path
// keeps the tight (vectorisable) loops it had before mixed precision.
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

#include "engine/data_type.h"

namespace dpbench::reference_detail {

template <DataType T>
using TypeTag = std::integral_constant<DataType, T>;

// Calls fn(TypeTag<type>{}); inside a generic lambda `decltype(tag)::value` is a constant.
template <typename Fn>
void with_type(DataType type, Fn&& fn) {
  switch (type) {
    case DataType::f16: fn(TypeTag<DataType::f16>{}); break;
    case DataType::bf16: fn(TypeTag<DataType::bf16>{}); break;
    default: fn(TypeTag<DataType::f32>{});
  }
}

// A buffer of `type` read as floats: fp32 buffers as they are, 16-bit ones widened (exactly) into a
// copy. nullptr stays nullptr.
class WidenedInput {
 public:
  WidenedInput(DataType type, const void* data, size_t n) {
    if (type == DataType::f32 || data == nullptr) {
      pointer_ = static_cast<const float*>(data);
      return;
    }
    copy_.resize(n);
    for (size_t i = 0; i < n; ++i) copy_[i] = load_as_float(type, data, i);
    pointer_ = copy_.data();
  }
  const float* get() const { return pointer_; }

 private:
  std::vector<float> copy_;
  const float* pointer_ = nullptr;
};

// An output of `type` written as floats: fp32 buffers directly, 16-bit ones into a float copy
// (holding the buffer's current values, so that elements the op leaves alone, and ops that add
// to their output, keep them) that store() rounds back, once. nullptr stays nullptr.
class WidenedOutput {
 public:
  WidenedOutput(DataType type, void* data, size_t n) : type_(type), data_(data) {
    if (type == DataType::f32 || data == nullptr) {
      pointer_ = static_cast<float*>(data);
      return;
    }
    copy_.resize(n);
    for (size_t i = 0; i < n; ++i) copy_[i] = load_as_float(type, data, i);
    pointer_ = copy_.data();
  }
  float* get() const { return pointer_; }
  void store() const {
    if (type_ == DataType::f32 || data_ == nullptr) return;
    for (size_t i = 0; i < copy_.size(); ++i) store_from_float(type_, data_, i, copy_[i]);
  }

 private:
  DataType type_;
  void* data_;
  std::vector<float> copy_;
  float* pointer_ = nullptr;
};

}  // namespace dpbench::reference_detail
