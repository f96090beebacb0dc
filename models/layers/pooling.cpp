// Pooling forward and backward on the backend.
#include "models/layers/pooling.h"

namespace dpbench {
namespace {

PoolGeometry geometry_of(const Tensor4& input, const PoolOptions& o) {
  return make_pool_geometry(input, o.mode, o.window, o.window, o.stride, o.stride, o.padding, o.pad,
                            o.pad);
}

}  // namespace

PoolingLayer::PoolingLayer(const std::string& name, const Tensor4& input, const PoolOptions& options)
    : Layer(name, geometry_of(input, options).output), geometry_(geometry_of(input, options)) {}

void PoolingLayer::forward(const LayerPass& pass, const int32_t*) const {
  pass.ops->pool_forward(geometry_, pass.x[0], pass.y);
}

void PoolingLayer::backward(const LayerPass& pass, const int32_t*) const {
  if (pass.dx[0] != nullptr) pass.ops->pool_backward(geometry_, pass.x[0], pass.y, pass.dy, pass.dx[0]);
}

}  // namespace dpbench
