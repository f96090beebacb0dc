// Batch normalisation with a learned scale (gamma) and shift (beta), optionally followed by a
// ReLU fused into the same backend op (one pass over the activations instead of two). Training
// uses the statistics of the current batch, per channel. Inference (--forward_only) uses running
// statistics, which a model that was never trained holds at their initial values, mean 0 and
// variance 1 (as tf_cnn_benchmarks' forward-only runs); training does not update them: a training
// benchmark never reads them, and they are not parameters.
#pragma once

#include "models/layers/layer.h"

namespace dpbench {

class BatchNormLayer : public Layer {
 public:
  // Declares "<name>/gamma" then "<name>/beta", each (c). With `relu` the output is max(0, bn(x)).
  BatchNormLayer(ParameterLayout& layout, const std::string& name, const Tensor4& input,
                 float epsilon, bool relu);

  void initialize(const ParameterLayout& layout, uint64_t seed,
                  std::vector<float>& host_params) const override;
  std::unique_ptr<LayerState> create_state(Device& device, const ReplicaShard& shard) const override;
  size_t workspace_bytes(Backend& ops) const override;
  // The fused ReLU's backward masks dy by the output, so nothing may overwrite it in place.
  bool backward_reads_output() const override { return relu_; }
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;

  bool fused_relu() const { return relu_; }
  // Inference: this layer's normalisation on one replica, from its parameters and the running
  // statistics in `state` (made by create_state).
  InferenceNorm inference_norm(const ParameterSet& params, const LayerState& state) const;
  // Training passes for a layer that runs this batch norm inside its own pass (a ResNet block's
  // join, models/layers/normalised_residual_add.h), on `state` made by create_state and that
  // layer's pass: y = act(bn(x) + residual) (act: ReLU with `relu`), and backward the gradients
  // of x, gamma and beta, and of the residual (the masked dy) into d_residual. x is the pass's
  // input 0 (and z below its input 1): where the pass carries their statistics
  // (LayerPass::x_statistics, made by the producing convolution) no pass over them makes them.
  void forward_training(const LayerPass& pass, LayerState& state, const void* x, const void* residual,
                        bool relu, void* y) const;
  void backward_training(const LayerPass& pass, LayerState& state, const void* x, const void* y,
                         const void* dy, bool relu, void* dx, void* d_residual) const;
  // y = act(bn(x) + shortcut_norm(z)) in training (a downsampling block's join), this batch norm
  // on `state`, the other on `shortcut_state`; both must have the same epsilon. Needs twice this
  // layer's workspace.
  void forward_training_pair(const LayerPass& pass, LayerState& state, const void* x,
                             const BatchNormLayer& shortcut_norm, LayerState& shortcut_state, const void* z,
                             bool relu, void* y) const;
  float epsilon() const { return epsilon_; }

 private:
  Tensor4 shape_;
  float epsilon_;
  bool relu_;
  int gamma_id_, beta_id_;
};

}  // namespace dpbench
