// ParameterSet: all parameters of one replica in ONE contiguous device buffer, gradients in a
// second buffer with the same layout. Tensors are views (offset, shape) laid out in the order
// backward produces their gradients, so a finished suffix of backward is one contiguous range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace dpbench {

// [offset, offset + count) in elements of the flat buffers.
struct GradientRange {
  size_t offset = 0;
  size_t count = 0;
  size_t end() const { return offset + count; }
};

struct TensorView {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;  // elements
  size_t count = 0;   // elements
};

// The layout shared by all replicas (host-only description).
class ParameterLayout {
 public:
  // Models declare tensors in forward order, layer by layer; finalize() lays them out in reverse
  // declaration order (the order backward finishes them). Returns the tensor's id.
  int declare(const std::string& name, std::vector<int64_t> shape);
  void finalize();

  bool finalized() const { return finalized_; }
  const TensorView& tensor(int id) const { return tensors_.at(id); }
  const std::vector<TensorView>& tensors() const { return tensors_; }  // indexed by id
  size_t total_count() const { return total_count_; }
  // The contiguous range covering tensors [first_id, last_id] (declared consecutively).
  GradientRange range_of(int first_id, int last_id) const;

 private:
  std::vector<TensorView> tensors_;
  size_t total_count_ = 0;
  bool finalized_ = false;
};

// One replica's parameter and gradient buffers on its device.
class ParameterSet {
 public:
  ParameterSet(Device& device, const ParameterLayout& layout);

  const ParameterLayout& layout() const { return *layout_; }
  Device& device() const { return *device_; }
  float* parameters() const { return parameters_.as<float>(); }
  float* gradients() const { return gradients_.as<float>(); }
  float* parameter(int tensor_id) const { return parameters() + layout_->tensor(tensor_id).offset; }
  float* gradient(int tensor_id) const { return gradients() + layout_->tensor(tensor_id).offset; }
  size_t count() const { return layout_->total_count(); }

  void upload(const std::vector<float>& host_values);  // blocking
  std::vector<float> download() const;                 // blocking

 private:
  Device* device_;
  const ParameterLayout* layout_;
  Buffer parameters_;
  Buffer gradients_;
};

}  // namespace dpbench
