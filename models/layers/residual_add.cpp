// Residual add with the element-wise ops. A same-shape copy_into_channels at offset 0 is a plain
// copy, which the backend otherwise lacks.
#include "models/layers/residual_add.h"

#include "engine/errors.h"

namespace dpbench {

ResidualAddLayer::ResidualAddLayer(const std::string& name, const Tensor4& a, const Tensor4& b)
    : Layer(name, a) {
  if (!(a == b)) throw RuntimeError(name + ": cannot add " + describe(a) + " and " + describe(b));
}

void ResidualAddLayer::forward(const LayerPass& pass, const int32_t*) const {
  const Tensor4& shape = output_shape();
  if (pass.y != pass.x[0]) pass.ops->copy_into_channels(shape, pass.x[0], shape, pass.y, 0);
  pass.ops->axpy(1.0f, pass.x[1], pass.y, shape.count());
}

void ResidualAddLayer::backward(const LayerPass& pass, const int32_t*) const {
  const Tensor4& shape = output_shape();
  for (float* dx : pass.dx)
    if (dx != nullptr && dx != pass.dy) pass.ops->copy_into_channels(shape, pass.dy, shape, dx, 0);
}

}  // namespace dpbench
