// Concatenation of branches along channels (Inception modules). Inputs share n, h, w and format.
#pragma once

#include "models/layers/layer.h"

namespace dpbench {

class ConcatLayer : public Layer {
 public:
  ConcatLayer(const std::string& name, const std::vector<Tensor4>& inputs);

  bool backward_reads_input(size_t) const override { return false; }
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;

 private:
  std::vector<Tensor4> inputs_;
  std::vector<int> channel_offsets_;  // where each input starts in the output
};

}  // namespace dpbench
