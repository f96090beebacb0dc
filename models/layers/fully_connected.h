// Fully connected layer on an image tensor: flattens its (n, c, h, w) input to (n, c*h*w) for
// free (the memory already is that matrix) and applies the dense layer. Flattened features
// follow memory order, (c, h, w) for NCHW and (h, w, c) for NHWC, so the weight rows are
// initialised by logical (c, h, w) index and stored at their memory position: both formats
// start from the same network.
//
// The layer computes in fp32 whatever its input's type: under mixed precision it widens a 16-bit
// input once, runs fp32 GEMMs (TF32 tensor cores) and narrows the input gradient. Its output, the
// classifier that follows and the logits stay fp32. In these models the fully connected layers
// are a sliver of the FLOPs (VGG-16's 123M weights: about 0.3% of a step), so 16-bit GEMMs would
// buy nothing measurable while fp32 logits keep the loss exact.
#pragma once

#include "models/layers/dense.h"
#include "models/layers/layer.h"

namespace dpbench {

class FullyConnectedLayer : public Layer {
 public:
  // Declares "<name>/weights" (c*h*w, outputs) then "<name>/bias" (outputs).
  FullyConnectedLayer(ParameterLayout& layout, const std::string& name, const Tensor4& input,
                      int outputs);

  void initialize(const ParameterLayout& layout, uint64_t seed,
                  std::vector<float>& host_params) const override;
  std::unique_ptr<LayerState> create_state(Device& device, const ReplicaShard& shard) const override;
  size_t workspace_bytes(Backend& ops) const override;
  StepFlops flops(bool input_gradient) const override;
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;

 private:
  Tensor4 input_;
  DenseLayer dense_;
};

}  // namespace dpbench
