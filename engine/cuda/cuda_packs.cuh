// 16-bit (and fp32) storage moved as packs, shared by the kernel files: a Pack is kVec consecutive
// elements of T (float, __half or __nv_bfloat16) as stored, moved by a single load or store of 2
// to 16 bytes and kept as the 32-bit words it arrived in (a lone 16-bit element in the low half),
// widened to float one element at a time where used. Keeping the words matters: an unpacked
// 16-bit value takes a whole register, and widening everything at once doubles what a thread
// holds across the packs it keeps in flight. On the host side: the dispatch on a tensor's storage
// type and the pointer alignment a pack needs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "engine/data_type.h"
#include "engine/errors.h"

namespace dpbench::cuda_kernels {

template <typename T, int kVec>
struct Pack {
  static constexpr int kBytes = static_cast<int>(sizeof(T)) * kVec;
  static_assert(kBytes == 2 || kBytes == 4 || kBytes == 8 || kBytes == 16, "2 to 16 bytes");
  unsigned w[kBytes >= 4 ? kBytes / 4 : 1];
};

// The pack starting at element p, which must be aligned to a whole pack.
template <int kVec, typename T>
__device__ __forceinline__ Pack<T, kVec> load_pack(const T* p) {
  constexpr int kBytes = Pack<T, kVec>::kBytes;
  Pack<T, kVec> pack;
  if constexpr (kBytes == 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    pack.w[0] = v.x;
    pack.w[1] = v.y;
    pack.w[2] = v.z;
    pack.w[3] = v.w;
  } else if constexpr (kBytes == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    pack.w[0] = v.x;
    pack.w[1] = v.y;
  } else if constexpr (kBytes == 4) {
    pack.w[0] = *reinterpret_cast<const unsigned*>(p);
  } else {
    pack.w[0] = *reinterpret_cast<const unsigned short*>(p);
  }
  return pack;
}

template <int kVec, typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, kVec>& pack) {
  constexpr int kBytes = Pack<T, kVec>::kBytes;
  if constexpr (kBytes == 16) {
    *reinterpret_cast<uint4*>(p) = make_uint4(pack.w[0], pack.w[1], pack.w[2], pack.w[3]);
  } else if constexpr (kBytes == 8) {
    *reinterpret_cast<uint2*>(p) = make_uint2(pack.w[0], pack.w[1]);
  } else if constexpr (kBytes == 4) {
    *reinterpret_cast<unsigned*>(p) = pack.w[0];
  } else {
    *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(pack.w[0]);
  }
}

// Element k of a pack, widened (exactly) to float.
template <typename T, int kVec>
__device__ __forceinline__ float element(const Pack<T, kVec>& p, int k) {
  if constexpr (std::is_same_v<T, float>) {
    return __uint_as_float(p.w[k]);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    // bf16 is the upper half of a float.
    const unsigned word = p.w[k / 2];
    return __uint_as_float(k % 2 == 0 ? word << 16 : word & 0xffff0000u);
  } else {
    __half2 pair;
    memcpy(&pair, &p.w[k / 2], sizeof(pair));
    return k % 2 == 0 ? __low2float(pair) : __high2float(pair);
  }
}

// Sets element k to +0, all bits clear in every type.
template <typename T, int kVec>
__device__ __forceinline__ void clear_element(Pack<T, kVec>& p, int k) {
  if constexpr (sizeof(T) == 4) {
    p.w[k] = 0u;
  } else {
    p.w[k / 2] &= k % 2 == 0 ? 0xffff0000u : 0x0000ffffu;
  }
}

// `values` rounded to T (to nearest), as a pack; 16-bit pairs take one paired conversion.
template <typename T, int kVec>
__device__ __forceinline__ Pack<T, kVec> round_pack(const float (&values)[kVec]) {
  Pack<T, kVec> p;
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) p.w[k] = __float_as_uint(values[k]);
  } else if constexpr (kVec == 1) {
    if constexpr (std::is_same_v<T, __half>) {
      p.w[0] = __half_as_ushort(__float2half_rn(values[0]));
    } else {
      p.w[0] = __bfloat16_as_ushort(__float2bfloat16_rn(values[0]));
    }
  } else {
#pragma unroll
    for (int k = 0; k < kVec; k += 2) {
      if constexpr (std::is_same_v<T, __half>) {
        const __half2 pair = __floats2half2_rn(values[k], values[k + 1]);
        memcpy(&p.w[k / 2], &pair, sizeof(pair));
      } else {
        const __nv_bfloat162 pair = __floats2bfloat162_rn(values[k], values[k + 1]);
        memcpy(&p.w[k / 2], &pair, sizeof(pair));
      }
    }
  }
  return p;
}

// Item `at` (counted in packs) of `base`.
template <int kVec, typename T>
__device__ __forceinline__ Pack<T, kVec> load_pack(const T* base, long long at) {
  return load_pack<kVec>(base + at * kVec);
}
// A 16-byte pack is stored through a uint4 index: addressed as base + at * kVec instead, the
// softmax kernels' stores came out of the compiler as four 4-byte stores.
template <int kVec, typename T>
__device__ __forceinline__ void store_pack(T* base, long long at, const Pack<T, kVec>& pack) {
  if constexpr (Pack<T, kVec>::kBytes == 16) {
    reinterpret_cast<uint4*>(base)[at] = make_uint4(pack.w[0], pack.w[1], pack.w[2], pack.w[3]);
  } else {
    store_pack<kVec>(base + at * kVec, pack);
  }
}

// One element at p, widened; one value rounded to T and stored at p (any alignment of T).
template <typename T>
__device__ __forceinline__ float load_widened(const T* p) {
  return element(load_pack<1>(p), 0);
}
template <typename T>
__device__ __forceinline__ void store_rounded(T* p, float value) {
  const float values[1] = {value};
  store_pack<1>(p, round_pack<T, 1>(values));
}

// K consecutive elements at p widened, or K values rounded to T and stored at p, moved as packs
// of up to 16 bytes (K * sizeof(T) bytes may span several): p must be aligned to one such pack.
template <int K, typename T>
__device__ __forceinline__ void load_widened(const T* p, float (&out)[K]) {
  constexpr int kVec = K * sizeof(T) <= 16 ? K : static_cast<int>(16 / sizeof(T));
  static_assert(K % kVec == 0, "whole packs");
#pragma unroll
  for (int first = 0; first < K; first += kVec) {
    const Pack<T, kVec> pack = load_pack<kVec>(p + first);
#pragma unroll
    for (int k = 0; k < kVec; ++k) out[first + k] = element(pack, k);
  }
}
template <int K, typename T>
__device__ __forceinline__ void store_rounded(T* p, const float (&in)[K]) {
  constexpr int kVec = K * sizeof(T) <= 16 ? K : static_cast<int>(16 / sizeof(T));
  static_assert(K % kVec == 0, "whole packs");
#pragma unroll
  for (int first = 0; first < K; first += kVec) {
    float values[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) values[k] = in[first + k];
    store_pack<kVec>(p + first, round_pack<T, kVec>(values));
  }
}

// Host side. Calls run(T{}) with T the storage type of `type`.
template <typename Run>
void with_storage_type(DataType type, const char* op, Run run) {
  switch (type) {
    case DataType::f32: return run(float{});
    case DataType::f16: return run(__half{});
    case DataType::bf16: return run(__nv_bfloat16{});
  }
  throw RuntimeError(std::string(op) + ": unknown data type");
}

// Whether every pointer (null ones aside) is aligned to `bytes`, as a pack of that size needs.
inline bool aligned_to(std::initializer_list<const void*> pointers, size_t bytes) {
  for (const void* p : pointers) {
    if (p != nullptr && reinterpret_cast<uintptr_t>(p) % bytes != 0) return false;
  }
  return true;
}

// Calls run(std::integral_constant<int, kVec>) with kVec the elements of a 16-byte pack of T
// where `length` (a row's elements) splits into such packs and every pointer is aligned to 16
// bytes, else 1.
template <typename T, typename Run>
void with_row_packs(int length, std::initializer_list<const void*> pointers, Run run) {
  constexpr int kWide = static_cast<int>(16 / sizeof(T));
  if (length % kWide == 0 && aligned_to(pointers, 16)) {
    run(std::integral_constant<int, kWide>{});
  } else {
    run(std::integral_constant<int, 1>{});
  }
}

}  // namespace dpbench::cuda_kernels
