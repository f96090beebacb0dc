// Inference only (--forward_only): a ResNet block's join with the batch norms that fed it applied
// in the same pass, y = act(bn_a(a) + b) or act(bn_a(a) + bn_b(b)), where the plain network runs
// each batch norm as a pass of its own and then the add (two more writes and reads of the block's
// widest tensor). Network::prepare_for_inference() puts it in place of a residual add whose main
// path (and perhaps shortcut) is a batch norm without ReLU read by nothing else; the batch-norm
// nodes stay in the network, declaring their parameters as before, but no longer run.
#pragma once

#include "models/layers/batch_norm.h"
#include "models/layers/layer.h"
#include "models/layers/residual_add.h"

namespace dpbench {

class NormalisedResidualAddLayer : public Layer {
 public:
  // Inputs: the main path's batch norm's input, then the shortcut's (or the shortcut itself
  // where `shortcut_norm` is null). The batch norms must outlive this layer (the network's nodes).
  NormalisedResidualAddLayer(const ResidualAddLayer& add, const BatchNormLayer& main_norm,
                             const BatchNormLayer* shortcut_norm);

  std::unique_ptr<LayerState> create_state(Device& device, const ReplicaShard& shard) const override;
  bool can_run_in_place() const override { return true; }
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;  // throws: inference only

 private:
  const BatchNormLayer& main_norm_;
  const BatchNormLayer* shortcut_norm_;
  bool relu_;
};

}  // namespace dpbench
