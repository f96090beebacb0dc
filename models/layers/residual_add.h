// Residual connection: y = a + b (same shape). Backward hands dy to both inputs. Runs in place
// over `a` (the main path) where the network allows, which saves a buffer and a copy.
#pragma once

#include "models/layers/layer.h"

namespace dpbench {

class ResidualAddLayer : public Layer {
 public:
  ResidualAddLayer(const std::string& name, const Tensor4& a, const Tensor4& b);

  bool can_run_in_place() const override { return true; }
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;
};

}  // namespace dpbench
