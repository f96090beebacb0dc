// ParameterLayout lays tensors out in gradient-readiness order; ParameterSet owns a replica's
// two flat buffers (parameters and gradients) on its device.
#include "engine/training/parameter_set.h"

#include <algorithm>
#include <numeric>

#include "engine/errors.h"

namespace dpbench {

int ParameterLayout::declare(const std::string& name, std::vector<int64_t> shape) {
  if (finalized_) throw RuntimeError("ParameterLayout: cannot declare '" + name + "' after finalize()");
  TensorView view;
  view.name = name;
  view.count = static_cast<size_t>(
      std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>()));
  view.shape = std::move(shape);
  tensors_.push_back(std::move(view));
  return static_cast<int>(tensors_.size()) - 1;
}

void ParameterLayout::finalize() {
  // Backward visits layers last to first, so the last-declared tensor's gradient is ready first:
  // it goes to offset 0 and readiness order is ascending offset.
  size_t offset = 0;
  parameter_count_ = 0;
  for (auto it = tensors_.rbegin(); it != tensors_.rend(); ++it) {
    offset = (offset + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
    it->offset = offset;
    offset += it->count;
    parameter_count_ += it->count;
  }
  total_count_ = offset;
  finalized_ = true;
}

GradientRange ParameterLayout::range_of(int first_id, int last_id) const {
  // Declared consecutively and laid out in reverse, [first_id, last_id] occupy
  // [offset(last_id), the end of first_id's extent).
  const TensorView& last = tensors_.at(last_id);
  return GradientRange{last.offset, extent(first_id).end() - last.offset};
}

GradientRange ParameterLayout::extent(int id) const {
  const TensorView& view = tensors_.at(id);
  // The next tensor in the layout is the one declared before; the first declared ends the buffer.
  const size_t end = id == 0 ? total_count_ : tensors_.at(id - 1).offset;
  return GradientRange{view.offset, end - view.offset};
}

ParameterUnits with_vector_elements(ParameterUnits units, const ParameterLayout& layout) {
  for (ParameterUnit& unit : units.units) {
    unit.vector_elements = 0;
    for (const TensorView& tensor : layout.tensors())
      if (tensor.shape.size() == 1 && tensor.offset >= unit.range.offset && tensor.offset < unit.range.end())
        unit.vector_elements += tensor.count;
  }
  return units;
}

ParameterSet::ParameterSet(Device& device, const ParameterLayout& layout, DataType weight_copy_type)
    : ParameterSet(device, layout, weight_copy_type, {}) {}

ParameterSet::ParameterSet(Device& device, const ParameterLayout& layout, DataType weight_copy_type,
                           std::vector<ResidentChunk> chunks, bool keeps_weight_copy)
    : device_(&device), layout_(&layout), weight_copy_type_(weight_copy_type), chunks_(std::move(chunks)) {
  if (!layout.finalized()) throw RuntimeError("ParameterSet: layout is not finalized");
  count_ = layout.total_count();
  if (!chunks_.empty()) {
    count_ = 0;
    for (const ResidentChunk& chunk : chunks_) {
      if (chunk.count > chunk.padded_count || chunk.layout_offset + chunk.count > layout.total_count())
        throw RuntimeError("ParameterSet: a resident chunk lies outside the layout");
      count_ += chunk.padded_count;
    }
  }
  const std::string owner = chunks_.empty() ? "parameter set" : "parameter shard";
  const size_t bytes = fp32_buffer_bytes(count_);
  parameters_ = device.allocate(bytes, MemoryTag{MemoryCategory::parameters, owner});
  gradients_ = device.allocate(bytes, MemoryTag{MemoryCategory::gradients, owner});
  device.ops().fill(gradients(), count(), 0.0f);
  if (weight_copy_type != DataType::f32 && (chunks_.empty() || keeps_weight_copy))
    weight_copy_ = device.allocate(weight_copy_bytes(count_, weight_copy_type),
                                   MemoryTag{MemoryCategory::parameters, "16-bit weight copy"});
}

// An empty set still gets one element of each buffer, so that its pointers are real.
size_t ParameterSet::fp32_buffer_bytes(size_t count) { return std::max<size_t>(count, 1) * sizeof(float); }

size_t ParameterSet::weight_copy_bytes(size_t count, DataType weight_copy_type) {
  if (weight_copy_type == DataType::f32) return 0;
  return std::max<size_t>(count, 1) * data_type_bytes(weight_copy_type);
}

CategoryBytes ParameterSet::bytes_for(size_t count, DataType weight_copy_type) {
  CategoryBytes bytes{};
  bytes[static_cast<size_t>(MemoryCategory::parameters)] =
      fp32_buffer_bytes(count) + weight_copy_bytes(count, weight_copy_type);
  bytes[static_cast<size_t>(MemoryCategory::gradients)] = fp32_buffer_bytes(count);
  return bytes;
}

size_t ParameterSet::offset_in_buffers(int tensor_id) const {
  if (sharded())
    throw RuntimeError("ParameterSet: '" + layout_->tensor(tensor_id).name +
                       "' was asked for before its sharded set had a residence (a model must read its "
                       "parameters during its passes, not when it is built)");
  return layout_->tensor(tensor_id).offset;
}

const void* ParameterSet::parameter_as(int tensor_id, DataType type) const {
  if (type == DataType::f32) return parameter(tensor_id);
  if (residence_ != nullptr) return residence_->parameter_as(tensor_id, type);
  if (type != weight_copy_type_)
    throw RuntimeError(std::string("ParameterSet: a ") + data_type_name(type) + " op reads '" +
                       layout_->tensor(tensor_id).name + "' but the weight copy is " +
                       data_type_name(weight_copy_type_));
  return static_cast<const char*>(weight_copy_.data()) + offset_in_buffers(tensor_id) * data_type_bytes(type);
}

void ParameterSet::refresh_weight_copy(GradientRange range, StreamKind stream) {
  if (weight_copy_.data() == nullptr || range.count == 0) return;
  device_->ops(stream).convert(DataType::f32, parameters() + range.offset, weight_copy_type_,
                               static_cast<char*>(weight_copy_.data()) +
                                   range.offset * data_type_bytes(weight_copy_type_),
                               range.count);
}

void ParameterSet::upload(const std::vector<float>& host_values) {
  if (host_values.size() != layout_->total_count())
    throw RuntimeError("ParameterSet::upload: expected " + std::to_string(layout_->total_count()) + " values, got " +
                       std::to_string(host_values.size()));
  if (sharded()) {
    std::vector<float> shard(count(), 0.0f);
    size_t at = 0;
    for (const ResidentChunk& chunk : chunks_) {
      std::copy_n(host_values.begin() + static_cast<std::ptrdiff_t>(chunk.layout_offset), chunk.count,
                  shard.begin() + static_cast<std::ptrdiff_t>(at));
      at += chunk.padded_count;
    }
    device_->copy_from_host(parameters(), shard.data(), count() * sizeof(float));
  } else {
    device_->copy_from_host(parameters(), host_values.data(), count() * sizeof(float));
  }
  refresh_weight_copy(GradientRange{0, count()});
  device_->synchronize();
}

std::vector<float> ParameterSet::download() const {
  std::vector<float> values(count());
  device_->copy_to_host(values.data(), parameters(), count() * sizeof(float));
  return values;
}

}  // namespace dpbench
