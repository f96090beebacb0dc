// Concatenation: forward copies each branch into its channel slice, backward copies the slices out.
#include "models/layers/concat.h"

#include "engine/errors.h"

namespace dpbench {
namespace {

Tensor4 concatenated(const std::string& name, const std::vector<Tensor4>& inputs) {
  if (inputs.empty()) throw RuntimeError(name + ": nothing to concatenate");
  Tensor4 out = inputs.front();
  out.c = 0;
  for (const Tensor4& in : inputs) {
    if (in.n != out.n || in.h != out.h || in.w != out.w || in.format != out.format ||
        in.type != out.type)
      throw RuntimeError(name + ": cannot concatenate " + describe(in) + " with " +
                         describe(inputs.front()));
    out.c += in.c;
  }
  return out;
}

}  // namespace

ConcatLayer::ConcatLayer(const std::string& name, const std::vector<Tensor4>& inputs)
    : Layer(name, concatenated(name, inputs)), inputs_(inputs) {
  int offset = 0;
  for (const Tensor4& in : inputs) {
    channel_offsets_.push_back(offset);
    offset += in.c;
  }
}

void ConcatLayer::forward(const LayerPass& pass, const int32_t*) const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    pass.ops->copy_into_channels(inputs_[i], pass.x[i], output_shape(), pass.y, channel_offsets_[i]);
}

void ConcatLayer::backward(const LayerPass& pass, const int32_t*) const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (pass.dx[i] != nullptr)
      pass.ops->copy_from_channels(output_shape(), pass.dy, channel_offsets_[i], inputs_[i],
                                   pass.dx[i]);
}

}  // namespace dpbench
