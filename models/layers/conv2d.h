// 2-D convolution layer with an optional per-channel bias and an optional fused ReLU. The filter is stored as the data
// format wants it (KCRS for NCHW, KRSC for NHWC) but initialised by logical (k, c, r, s) index,
// so both formats start from the same network.
#pragma once

#include "models/layers/layer.h"

namespace dpbench {

struct Conv2dOptions {
  int out_channels = 0;
  int kernel_h = 1, kernel_w = 1;
  int stride = 1;
  Padding padding = Padding::explicit_symmetric;
  int pad_h = 0, pad_w = 0;  // with Padding::explicit_symmetric
  bool bias = false;
  // ReLU on the output, fused into the bias add (forward) and the bias gradient (backward).
  bool relu = false;
};

class Conv2dLayer : public Layer {
 public:
  // Declares "<name>/weights" (k, c, r, s) and, with a bias, "<name>/bias" (k).
  Conv2dLayer(ParameterLayout& layout, const std::string& name, const Tensor4& input,
              const Conv2dOptions& options);

  const ConvGeometry& geometry() const { return geometry_; }
  bool relu() const { return relu_; }
  bool has_bias() const { return bias_id_ >= 0; }
  // The one layer reading the output applies the fused ReLU's backward itself (a max pool:
  // Network::fuse_relu_into_max_pools), so backward takes dy as already masked.
  void take_masked_output_gradient() { output_gradient_masked_ = true; }
  // The batch norm reading the output takes its statistics from this layer's forward where the
  // backend fuses them into the convolution (Network::fuse_batch_norm_statistics): the workspace
  // is sized for that plan, and forward makes them wherever LayerPass::y_statistics is given.
  void make_output_statistics() { output_statistics_ = true; }
  bool makes_output_statistics() const { return output_statistics_; }
  StepFlops flops(bool input_gradient) const override;

  void initialize(const ParameterLayout& layout, uint64_t seed,
                  std::vector<float>& host_params) const override;
  size_t workspace_bytes(Backend& ops) const override;
  bool can_accumulate_input_gradient() const override { return true; }
  // The fused ReLU's mask is read back from the output.
  bool backward_reads_output() const override { return relu_; }
  void forward(const LayerPass& pass, const int32_t* step) const override;
  void backward(const LayerPass& pass, const int32_t* step) const override;

 private:
  size_t filter_gradient_staging_bytes() const;

  ConvGeometry geometry_;
  int weights_id_ = -1;
  int bias_id_ = -1;  // -1: no bias
  bool relu_ = false;
  bool output_gradient_masked_ = false;
  bool output_statistics_ = false;
};

}  // namespace dpbench
