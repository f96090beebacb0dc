// Helpers shared by the [gpu] op tests: reproducible host data, device arrays that download
// themselves, typed (fp32, fp16, bf16) tensors on either side, and the
// |gpu - ref| <= atol + rtol * |ref| comparison.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/counter_random.h"
#include "engine/backends.h"
#include "engine/cuda/cuda_controls.h"
#include "engine/data_type.h"

namespace dpbench::gpu_test {

// What the tests allocate themselves, in the device's memory ledger.
inline const MemoryTag kTestBuffer{MemoryCategory::scratch, "test"};
inline const MemoryTag kTestWorkspace{MemoryCategory::workspaces, "test"};

constexpr double kEps = 1.0 / (1 << 23);  // fp32 machine epsilon

constexpr DataType kAllTypes[] = {DataType::f32, DataType::f16, DataType::bf16};

// The spacing of `type`'s values relative to the value: at most 2^-23 (fp32, 24 significant
// bits), 2^-10 (fp16, 11) or 2^-7 (bf16, 8) of any normal value. Two values within d of each
// other, each rounded to nearest, end at most d + one such unit apart: what a 16-bit result may
// differ by when both backends round nearly the same fp32 value.
inline double unit_in_last_place(DataType type) {
  switch (type) {
    case DataType::f16: return 1.0 / (1 << 10);
    case DataType::bf16: return 1.0 / (1 << 7);
    default: return kEps;
  }
}

// 0 for fp32; one unit in the last place for a 16-bit type (see unit_in_last_place), the extra
// relative tolerance of a result stored in `type` after fp32 arithmetic.
inline double storage_rtol(DataType type) {
  return type == DataType::f32 ? 0.0 : unit_in_last_place(type);
}

// Below 2^-14 fp16 is subnormal with a fixed spacing of 2^-24, which a relative tolerance of
// tiny values does not cover; bf16 and fp32 keep their relative spacing down to ~1e-38.
inline double storage_atol(DataType type) { return type == DataType::f16 ? 0x1p-24 : 0.0; }

inline std::vector<float> rounded(DataType type, std::vector<float> values) {
  for (float& v : values) v = round_to(type, v);
  return values;
}

inline std::string type_suffix(DataType type) { return std::string(" ") + data_type_name(type); }

inline std::unique_ptr<Device> make_gpu() {
  auto gpu = create_cuda_device(0);
  gpu->make_current();
  return gpu;
}

// A GPU with TF32 off (the default, said out loud): the tests that compare it with the reference
// in exact fp32.
inline std::unique_ptr<Device> make_exact_gpu() {
  auto gpu = make_gpu();
  set_tf32(*gpu, false);
  return gpu;
}

inline std::vector<float> random_vector(size_t n, uint64_t stream, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = lo + (hi - lo) * counter_uniform(99, stream, i);
  return values;
}

template <typename T>
class GpuArray {
 public:
  GpuArray(Device& device, const std::vector<T>& host)
      : device_(device), size_(host.size()), buffer_(device.allocate(host.size() * sizeof(T), kTestBuffer)) {
    device_.copy_from_host(buffer_.data(), host.data(), size_ * sizeof(T));
  }
  GpuArray(Device& device, size_t size) : GpuArray(device, std::vector<T>(size)) {}
  T* data() { return buffer_.as<T>(); }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    device_.copy_to_host(host.data(), buffer_.data(), size_ * sizeof(T));
    return host;
  }

 private:
  Device& device_;
  size_t size_;
  Buffer buffer_;
};

// Host memory holding values of `type`, for the reference backend.
class HostTensor {
 public:
  HostTensor(DataType type, const std::vector<float>& values)
      : type_(type), count_(values.size()), bytes_(values.size() * data_type_bytes(type)) {
    for (size_t i = 0; i < count_; ++i) store_from_float(type_, bytes_.data(), i, values[i]);
  }
  HostTensor(DataType type, size_t count) : HostTensor(type, std::vector<float>(count)) {}
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  DataType type() const { return type_; }
  size_t size() const { return count_; }
  std::vector<float> values() const {
    std::vector<float> values(count_);
    for (size_t i = 0; i < count_; ++i) values[i] = load_as_float(type_, bytes_.data(), i);
    return values;
  }

 private:
  DataType type_;
  size_t count_;
  std::vector<unsigned char> bytes_;
};

// Device memory holding values of `type`, starting `offset` elements past the start of an
// allocation (which is 256-byte aligned): offset 1 leaves the data misaligned for vector loads.
class GpuTensor {
 public:
  GpuTensor(Device& device, DataType type, const std::vector<float>& values, size_t offset = 0)
      : device_(device),
        type_(type),
        count_(values.size()),
        offset_bytes_(offset * data_type_bytes(type)),
        buffer_(device.allocate(offset_bytes_ + values.size() * data_type_bytes(type) + 1, kTestBuffer)) {
    upload(values);
  }
  GpuTensor(Device& device, DataType type, size_t count, size_t offset = 0)
      : GpuTensor(device, type, std::vector<float>(count), offset) {}
  void* data() { return buffer_.as<unsigned char>() + offset_bytes_; }
  DataType type() const { return type_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * data_type_bytes(type_); }
  void upload(const std::vector<float>& values) {
    REQUIRE(values.size() == count_);
    const HostTensor host(type_, values);
    device_.copy_from_host(data(), host.data(), bytes());
  }
  std::vector<float> values() const {
    HostTensor host(type_, count_);
    device_.copy_to_host(host.data(), buffer_.as<unsigned char>() + offset_bytes_, bytes());
    return host.values();
  }

 private:
  Device& device_;
  DataType type_;
  size_t count_;
  size_t offset_bytes_;
  Buffer buffer_;
};

inline void check_close(const std::vector<float>& gpu, const std::vector<float>& ref, double atol,
                 double rtol, const std::string& what) {
  REQUIRE(gpu.size() == ref.size());
  size_t failures = 0, first_failure = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const double difference = std::fabs(static_cast<double>(gpu[i]) - ref[i]);
    if (!(difference <= atol + rtol * std::fabs(static_cast<double>(ref[i])))) {
      if (failures++ == 0) first_failure = i;
    }
  }
  std::ostringstream detail;
  detail << what << ": " << failures << " of " << gpu.size() << " outside atol " << atol
         << " rtol " << rtol;
  if (failures > 0) {
    detail << "; first at " << first_failure << ": gpu " << gpu[first_failure] << " ref "
           << ref[first_failure];
  }
  INFO(detail.str());
  CHECK(failures == 0);
}

inline void check_identical(const std::vector<float>& gpu, const std::vector<float>& ref,
                     const std::string& what) {
  REQUIRE(gpu.size() == ref.size());
  INFO(what);
  CHECK(std::memcmp(gpu.data(), ref.data(), gpu.size() * sizeof(float)) == 0);
}

// Equal values, a NaN matching any NaN (16-bit conversions need not keep a NaN's payload bits),
// +0 not matching -0.
inline void check_same_values(const std::vector<float>& gpu, const std::vector<float>& ref,
                              const std::string& what) {
  REQUIRE(gpu.size() == ref.size());
  size_t failures = 0, first_failure = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const bool same = std::isnan(gpu[i]) ? std::isnan(ref[i])
                                         : gpu[i] == ref[i] && std::signbit(gpu[i]) == std::signbit(ref[i]);
    if (!same && failures++ == 0) first_failure = i;
  }
  std::ostringstream detail;
  detail << what << ": " << failures << " of " << gpu.size() << " values differ";
  if (failures > 0) {
    detail << "; first at " << first_failure << ": gpu " << gpu[first_failure] << " ref "
           << ref[first_failure];
  }
  INFO(detail.str());
  CHECK(failures == 0);
}

}  // namespace dpbench::gpu_test
