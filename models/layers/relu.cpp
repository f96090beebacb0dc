// ReLU forward and backward over the whole tensor (layout does not matter element-wise).
#include "models/layers/relu.h"

namespace dpbench {

void ReluLayer::forward(const LayerPass& pass, const int32_t*) const {
  pass.ops->relu_forward(output_shape().type, pass.x[0], pass.y, output_shape().count());
}

void ReluLayer::backward(const LayerPass& pass, const int32_t*) const {
  if (pass.dx[0] != nullptr) pass.ops->relu_backward(output_shape().type, pass.y, pass.dy, pass.dx[0], output_shape().count());
}

}  // namespace dpbench
