// A ResNet block's join with the batch norms that fed it run in the same pass:
//   y = act(bn_a(a) + b) or act(bn_a(a) + bn_b(b)),
// in training on the batch's statistics, with the backward passes, in inference on the running
// statistics.
// The plain network runs each batch norm as a pass of its own and then the add: two more writes
// and reads of the block's widest tensor forward, and in training one more backward (the add's
// gradient written for both inputs, then read again by the batch norm). Network::finalize() (training)
// and prepare_for_inference() put it in place of a residual add whose main path (and perhaps the
// shortcut) is a batch norm without ReLU read by nothing else; the batch-norm nodes stay in the
// network, declaring their parameters and announcing their gradients as before, but no longer run.
#pragma once

#include "models/layers/batch_norm.h"
#include "models/layers/layer.h"
#include "models/layers/residual_add.h"

namespace dpbench {

class NormalisedResidualAddLayer : public Layer {
 public:
  // Inputs: the main path's batch norm's input, then the shortcut's (or the shortcut itself
  // where `shortcut_norm` is null). The batch norms must outlive this layer (the network's nodes).
  // `training`: the join trains (forward and backward on batch statistics).
  NormalisedResidualAddLayer(const ResidualAddLayer& add, const BatchNormLayer& main_norm,
                             const BatchNormLayer* shortcut_norm, bool training);

  std::unique_ptr<LayerState> create_state(Device& device, const ReplicaShard& shard) const override;
  // Training with two batch norms computes both sets of statistics before the one pass.
  size_t workspace_bytes(Backend& ops) const override {
    return main_norm_.workspace_bytes(ops) * (training_ && shortcut_norm_ != nullptr ? 2 : 1);
  }
  // Training reads the batch norm's input back in backward, so the output needs its own buffer.
  bool can_run_in_place() const override { return !training_; }
  // The ReLU's mask is read back from the output.
  bool backward_reads_output() const override { return training_ && relu_; }
  // The main path's batch norm input, and the shortcut's where a batch norm runs on it.
  bool backward_reads_input(size_t input) const override { return input == 0 || shortcut_norm_ != nullptr; }
  // The shortcut's gradient is the main norm's d_residual, which may alias dy
  // (Backend::batch_norm_backward); a shortcut norm then works on it in place.
  bool input_gradient_may_overwrite_output_gradient(size_t input) const override { return input == 1; }
  bool has_shortcut_norm() const { return shortcut_norm_ != nullptr; }
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;

 private:
  const BatchNormLayer& main_norm_;
  const BatchNormLayer* shortcut_norm_;
  bool relu_;
  bool training_;
};

}  // namespace dpbench
