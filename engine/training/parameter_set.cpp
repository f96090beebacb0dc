// ParameterLayout lays tensors out in gradient-readiness order; ParameterSet owns a replica's
// two flat buffers (parameters and gradients) on its device.
#include "engine/training/parameter_set.h"

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

ParameterSet::ParameterSet(Device& device, const ParameterLayout& layout, DataType weight_copy_type)
    : device_(&device), layout_(&layout), weight_copy_type_(weight_copy_type) {
  if (!layout.finalized()) throw RuntimeError("ParameterSet: layout is not finalized");
  const size_t bytes = layout.total_count() * sizeof(float);
  parameters_ = device.allocate(bytes, MemoryTag{MemoryCategory::parameters, "parameter set"});
  gradients_ = device.allocate(bytes, MemoryTag{MemoryCategory::gradients, "parameter set"});
  device.ops().fill(gradients(), count(), 0.0f);
  if (weight_copy_type != DataType::f32)
    weight_copy_ = device.allocate(layout.total_count() * data_type_bytes(weight_copy_type),
                                   MemoryTag{MemoryCategory::parameters, "16-bit weight copy"});
}

const void* ParameterSet::parameter_as(int tensor_id, DataType type) const {
  if (type == DataType::f32) return parameter(tensor_id);
  if (type != weight_copy_type_)
    throw RuntimeError(std::string("ParameterSet: a ") + data_type_name(type) + " op reads '" +
                       layout_->tensor(tensor_id).name + "' but the weight copy is " +
                       data_type_name(weight_copy_type_));
  return static_cast<const char*>(weight_copy_.data()) +
         layout_->tensor(tensor_id).offset * data_type_bytes(type);
}

void ParameterSet::refresh_weight_copy(GradientRange range, StreamKind stream) {
  if (weight_copy_type_ == DataType::f32 || range.count == 0) return;
  device_->ops(stream).convert(DataType::f32, parameters() + range.offset, weight_copy_type_,
                               static_cast<char*>(weight_copy_.data()) +
                                   range.offset * data_type_bytes(weight_copy_type_),
                               range.count);
}

void ParameterSet::upload(const std::vector<float>& host_values) {
  if (host_values.size() != count())
    throw RuntimeError("ParameterSet::upload: expected " + std::to_string(count()) + " values, got " +
                       std::to_string(host_values.size()));
  device_->copy_from_host(parameters(), host_values.data(), count() * sizeof(float));
  refresh_weight_copy(GradientRange{0, count()});
  device_->synchronize();
}

std::vector<float> ParameterSet::download() const {
  std::vector<float> values(count());
  device_->copy_to_host(values.data(), parameters(), count() * sizeof(float));
  return values;
}

}  // namespace dpbench
