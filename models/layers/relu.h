// ReLU activation. It may run in place (output over its input, dx over dy): backward needs only
// the output, so the network shares buffers where nothing else reads the input.
#pragma once

#include "models/layers/layer.h"

namespace dpbench {

class ReluLayer : public Layer {
 public:
  ReluLayer(const std::string& name, const Tensor4& input) : Layer(name, input) {}

  bool can_run_in_place() const override { return true; }
  bool backward_reads_output() const override { return true; }
  bool backward_reads_input(size_t) const override { return false; }
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;
};

}  // namespace dpbench
