// Fully connected layer on an image tensor: flattens its (n, c, h, w) input to (n, c*h*w) for
// free (the memory already is that matrix) and applies the dense layer. Flattened features
// follow memory order, (c, h, w) for NCHW and (h, w, c) for NHWC, so the weight rows are
// initialised by logical (c, h, w) index and stored at their memory position: both formats
// start from the same network.
//
// Under mixed precision (math_type bf16 or fp16) the GEMMs run on 16-bit operands with fp32
// accumulation, as PyTorch's autocast runs nn.Linear: the input as it comes (a 16-bit pooled
// feature map) or narrowed once (the fp32 output of a classifier layer before), the weights'
// 16-bit copy, and the output gradient narrowed once; the weight and bias gradients are written in
// fp32. The output, and so the logits, stay fp32 to keep the loss exact. VGG-16's classifier holds
// 123M of its 138M weights: on TF32 its GEMMs took 0.77 ms of a 13 ms bf16 step against the
// compiled twin's 0.48 ms in bf16 (docs/BENCHMARKS.md), the GEMMs at batch 64 being bound by
// reading the weights, which 16 bits halve.
#pragma once

#include "models/layers/dense.h"
#include "models/layers/layer.h"

namespace dpbench {

class FullyConnectedLayer : public Layer {
 public:
  // Declares "<name>/weights" (c*h*w, outputs) then "<name>/bias" (outputs).
  // math_type: f32, or the run's 16-bit type (then the input is fp32 or of that type).
  FullyConnectedLayer(ParameterLayout& layout, const std::string& name, const Tensor4& input,
                      int outputs, DataType math_type = DataType::f32);

  void initialize(const ParameterLayout& layout, uint64_t seed,
                  std::vector<float>& host_params) const override;
  std::unique_ptr<LayerState> create_state(Device& device, const ReplicaShard& shard) const override;
  size_t workspace_bytes(Backend& ops) const override;
  StepFlops flops(bool input_gradient) const override;
  // An input of another type than the GEMMs' is read through its narrowed copy (the layer's state).
  bool backward_reads_input(size_t) const override { return input_.type == math_type_; }
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;

 private:
  Tensor4 input_;
  DataType math_type_;
  DenseLayer dense_;
};

}  // namespace dpbench
