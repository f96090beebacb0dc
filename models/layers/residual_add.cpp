// Residual add (and ReLU) as one element-wise pass each way.
#include "models/layers/residual_add.h"

#include "engine/errors.h"

namespace dpbench {

ResidualAddLayer::ResidualAddLayer(const std::string& name, const Tensor4& a, const Tensor4& b,
                                   bool relu)
    : Layer(name, a), relu_(relu) {
  if (!(a == b)) throw RuntimeError(name + ": cannot add " + describe(a) + " and " + describe(b));
}

void ResidualAddLayer::forward(const LayerPass& pass, const int32_t*) const {
  pass.ops->add_tensors(output_shape().type, pass.x[0], pass.x[1], pass.y, output_shape().count(), relu_);
}

void ResidualAddLayer::backward(const LayerPass& pass, const int32_t*) const {
  void* da = pass.dx[0];
  void* db = pass.dx[1];
  // Without ReLU a gradient buffer shared with dy already holds the answer.
  if (!relu_ && da == pass.dy) da = nullptr;
  if (!relu_ && db == pass.dy) db = nullptr;
  pass.ops->add_tensors_backward(output_shape().type, pass.y, pass.dy, relu_, da, db,
                                 output_shape().count());
}

}  // namespace dpbench
