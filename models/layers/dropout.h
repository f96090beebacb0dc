// Inverted dropout (training mode). The mask is a pure function of (seed, step, element), so
// backward regenerates it instead of storing it, and the GPU draws exactly the reference's mask.
#pragma once

#include "models/layers/layer.h"

namespace dpbench {

class DropoutLayer : public Layer {
 public:
  // `layer_key` tells this layer's masks from other dropout layers' (the node's index).
  DropoutLayer(const std::string& name, const Tensor4& input, float rate, uint64_t layer_key);

  float rate() const { return rate_; }
  // Each layer draws its own masks; a sample's mask is the same whichever replica trains it, so
  // N replicas of batch B drop exactly what one device with batch N*B would.
  std::unique_ptr<LayerState> create_state(Device& device, const ReplicaShard& shard) const override;
  // Backward draws the mask again from its counters; it reads no values.
  bool backward_reads_input(size_t) const override { return false; }
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;

 private:
  float rate_;
  uint64_t layer_key_;
};

}  // namespace dpbench
