// Max and average pooling (PoolMode says which average: padding counted or not).
#pragma once

#include "models/layers/layer.h"

namespace dpbench {

struct PoolOptions {
  PoolMode mode = PoolMode::max;
  int window = 2;
  int stride = 2;
  Padding padding = Padding::valid;
  int pad = 0;  // with Padding::explicit_symmetric
};

class PoolingLayer : public Layer {
 public:
  PoolingLayer(const std::string& name, const Tensor4& input, const PoolOptions& options);

  const PoolGeometry& geometry() const { return geometry_; }
  // Max pooling: backward also applies the backward of the ReLU that made the input
  // (PoolGeometry::relu_input); Network::fuse_relu_into_max_pools decides.
  void apply_input_relu_backward() { geometry_.relu_input = true; }
  bool backward_reads_output() const override { return true; }
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;

 private:
  PoolGeometry geometry_;
};

}  // namespace dpbench
