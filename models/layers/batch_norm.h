// Batch normalisation in training mode (statistics of the current batch, per channel), with a
// learned scale (gamma) and shift (beta). Running statistics for inference are not kept: a
// training benchmark never reads them, and they are not parameters.
#pragma once

#include "models/layers/layer.h"

namespace dpbench {

class BatchNormLayer : public Layer {
 public:
  // Declares "<name>/gamma" then "<name>/beta", each (c).
  BatchNormLayer(ParameterLayout& layout, const std::string& name, const Tensor4& input,
                 float epsilon);

  void initialize(const ParameterLayout& layout, uint64_t seed,
                  std::vector<float>& host_params) const override;
  std::unique_ptr<LayerState> create_state(Device& device, const ReplicaShard& shard) const override;
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;

 private:
  Tensor4 shape_;
  float epsilon_;
  int gamma_id_, beta_id_;
};

}  // namespace dpbench
