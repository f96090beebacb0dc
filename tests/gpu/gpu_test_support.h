// Helpers shared by the [gpu] op tests: reproducible host data, device arrays that download
// themselves, and the |gpu - ref| <= atol + rtol * |ref| comparison.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/counter_random.h"
#include "engine/device_factory.h"

namespace dpbench::gpu_test {

constexpr double kEps = 1.0 / (1 << 23);  // fp32 machine epsilon

inline std::unique_ptr<Device> make_gpu() {
  auto gpu = create_cuda_device(0);
  gpu->make_current();
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
      : device_(device), size_(host.size()), buffer_(device.allocate(host.size() * sizeof(T))) {
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

}  // namespace dpbench::gpu_test
