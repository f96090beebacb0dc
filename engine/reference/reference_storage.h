// Typed access for the reference ops: hands a loop its buffers' DataType as a compile-time
// constant, so load_as_float / store_from_float fold to plain accesses inside it and the fp32 path
// keeps the tight (vectorisable) loops it had before mixed precision.
#pragma once

#include <type_traits>

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

}  // namespace dpbench::reference_detail
