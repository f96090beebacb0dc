// ParameterSet: all parameters of one replica in ONE contiguous device buffer, gradients in a
// second buffer with the same layout. Tensors are views (offset, shape) laid out in the order
// backward produces their gradients, so a finished suffix of backward is one contiguous range;
// each starts aligned (ParameterLayout::kTensorAlignment), with zeros in the gaps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/training/parameter_units.h"

namespace dpbench {

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
  // Elements of the flat buffers: the tensors and the gaps that align them (zeros throughout:
  // gradients are 0 there, so every optimizer leaves the parameters at 0).
  size_t total_count() const { return total_count_; }
  // The model's parameters: the sum of the tensors' counts (what a result reports).
  size_t parameter_count() const { return parameter_count_; }
  // Every tensor starts at a multiple of this many elements: 256 bytes of the fp32 buffers, 128
  // of a 16-bit weight copy. Packed at 16 bytes (behind the 1,000-element classifier bias),
  // VGG-16's sm_90 backward-data kernels ran at half speed in bf16 on the copy's weights: the
  // tensor pipe 52% busy, against 92% for the same kernel on PyTorch's separately allocated ones.
  static constexpr size_t kTensorAlignment = 64;
  // A tensor's extent: from its offset to the next tensor's (the buffer's end for the last), the
  // gap that aligns the next one included. Extents tile [0, total_count()) exactly, so ranges
  // made of them (a layer's, an exchange's) tile it too.
  GradientRange extent(int id) const;
  // The contiguous range covering the extents of tensors [first_id, last_id] (declared
  // consecutively).
  GradientRange range_of(int first_id, int last_id) const;

 private:
  std::vector<TensorView> tensors_;
  size_t total_count_ = 0;
  size_t parameter_count_ = 0;
  bool finalized_ = false;
};

// `units` with each unit's vector_elements counted from `layout` (its tensors of rank 1).
ParameterUnits with_vector_elements(ParameterUnits units, const ParameterLayout& layout);

// A part of the layout a replica keeps when its parameters are sharded (fully_sharded): `count`
// elements of the layout from `layout_offset` (possibly none), then zeros up to `padded_count`.
struct ResidentChunk {
  size_t layout_offset = 0;
  size_t count = 0;
  size_t padded_count = 0;
};

// Where a sharded replica's tensors are while the model uses them (Note [parameter units] in
// engine/training/model.h): the strategy's gathered copies and gradient buffers. Read only from
// the thread that drives the replica.
class TensorResidence {
 public:
  virtual ~TensorResidence() = default;
  virtual float* parameter(int tensor_id) const = 0;
  virtual const void* parameter_as(int tensor_id, DataType type) const = 0;  // a 16-bit type
  virtual float* gradient(int tensor_id) const = 0;
};

// One replica's parameter and gradient buffers on its device. Under mixed precision it also
// holds a 16-bit copy of the parameters (same offsets), the weights 16-bit convolutions read;
// the master values, gradients and optimizer state stay fp32. The optimizer refreshes the copy
// in its update pass; whoever else writes parameters calls refresh_weight_copy. A sharded set
// keeps a copy of its shard (which its strategy gathers) unless told not to; then its strategy
// rounds each chunk as it gathers it (Note [what travels] in strategies/fully_sharded.h), and
// weight_copy_type still says the type the units travel in.
class ParameterSet {
 public:
  // weight_copy_type: f32 = no copy (fp32 and tf32 runs), else f16 or bf16.
  ParameterSet(Device& device, const ParameterLayout& layout,
               DataType weight_copy_type = DataType::f32);
  // Sharded: the buffers hold only `chunks`, one after the other (the replica's shard); the
  // tensors are where set_residence says; `keeps_weight_copy` false: no 16-bit copy of them. No
  // chunks: the whole layout, as above.
  ParameterSet(Device& device, const ParameterLayout& layout, DataType weight_copy_type,
               std::vector<ResidentChunk> chunks, bool keeps_weight_copy = true);

  // The device bytes a set of `count` elements allocates, by category: the fp32 values and, with
  // a 16-bit weight copy, that copy (parameters), and the fp32 gradients. The constructors
  // allocate by these sizes; the too-little-memory line counts a replica that no device can hold
  // with them (Note [too little memory] in engine/training/runner.h), so the two cannot disagree.
  static CategoryBytes bytes_for(size_t count, DataType weight_copy_type);

  const ParameterLayout& layout() const { return *layout_; }
  Device& device() const { return *device_; }
  float* parameters() const { return parameters_.as<float>(); }
  float* gradients() const { return gradients_.as<float>(); }
  float* parameter(int tensor_id) const {
    if (residence_ != nullptr) return residence_->parameter(tensor_id);
    return parameters() + offset_in_buffers(tensor_id);
  }
  float* gradient(int tensor_id) const {
    if (residence_ != nullptr) return residence_->gradient(tensor_id);
    return gradients() + offset_in_buffers(tensor_id);
  }
  // Elements of the flat buffers: the layout's, or the shard's.
  size_t count() const { return count_; }
  bool sharded() const { return !chunks_.empty(); }
  const std::vector<ResidentChunk>& chunks() const { return chunks_; }
  // Where the tensors of a sharded set are (the strategy's, set once before any step).
  void set_residence(const TensorResidence* residence) { residence_ = residence; }

  DataType weight_copy_type() const { return weight_copy_type_; }
  void* weight_copy() const { return weight_copy_.data(); }  // nullptr without a copy
  // Tensor `tensor_id` as an op of element type `type` reads it: the fp32 master for f32, else
  // the 16-bit copy (which must be of that type).
  const void* parameter_as(int tensor_id, DataType type) const;
  // weight_copy[range] = parameters[range] rounded, enqueued on `stream`; no-op without a copy.
  void refresh_weight_copy(GradientRange range, StreamKind stream = StreamKind::compute);

  // The whole layout's values (a sharded set keeps its chunks of them); blocking; refreshes the copy.
  void upload(const std::vector<float>& host_values);
  std::vector<float> download() const;  // the buffer (a sharded set's shard); blocking

 private:
  Device* device_;
  const ParameterLayout* layout_;
  Buffer parameters_;
  Buffer gradients_;
  DataType weight_copy_type_ = DataType::f32;
  Buffer weight_copy_;
  std::vector<ResidentChunk> chunks_;
  size_t count_ = 0;
  const TensorResidence* residence_ = nullptr;
  // The tensor's offset in the buffers, which hold the whole layout; a sharded set throws here
  // (its tensors are only where its residence says, once set).
  size_t offset_in_buffers(int tensor_id) const;
  // Bytes of one fp32 buffer (values or gradients), and of the 16-bit copy (0 without one), for
  // `count` elements: bytes_for's parts, and what the constructors allocate.
  static size_t fp32_buffer_bytes(size_t count);
  static size_t weight_copy_bytes(size_t count, DataType weight_copy_type);
};

}  // namespace dpbench
