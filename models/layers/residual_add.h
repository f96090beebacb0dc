// Residual connection: y = a + b (same shape), optionally followed by ReLU in the same pass (the
// ResNet block's join). Backward hands the (ReLU-masked) dy to both inputs. Runs in place over `a`
// (the main path) where the network allows, which saves a buffer.
#pragma once

#include "models/layers/layer.h"

namespace dpbench {

class ResidualAddLayer : public Layer {
 public:
  ResidualAddLayer(const std::string& name, const Tensor4& a, const Tensor4& b, bool relu);

  bool can_run_in_place() const override { return true; }
  // The ReLU's mask is read back from the output.
  bool backward_reads_output() const override { return relu_; }
  bool backward_reads_input(size_t) const override { return false; }
  bool input_gradient_may_overwrite_output_gradient(size_t) const override { return true; }  // add_tensors_backward
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;

  bool fused_relu() const { return relu_; }

 private:
  bool relu_;
};

}  // namespace dpbench
