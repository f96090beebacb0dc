// Dense (fully connected) layer: y (B, out) = x (B, in) · W (in, out) + b (out).
#pragma once

#include <string>

#include "engine/backend/backend.h"
#include "engine/training/parameter_set.h"

namespace dpbench {

class DenseLayer {
 public:
  // Declares "<name>/weights" then "<name>/bias" in the layout.
  DenseLayer(ParameterLayout& layout, const std::string& name, int inputs, int outputs);

  int inputs() const { return inputs_; }
  int outputs() const { return outputs_; }
  int weights_id() const { return weights_id_; }
  int bias_id() const { return bias_id_; }
  GradientRange gradient_range(const ParameterLayout& layout) const {
    return layout.range_of(weights_id_, bias_id_);
  }

  // x (batch, inputs) -> y (batch, outputs), fp32. x of a 16-bit `type` meets the weights' 16-bit
  // copy (ParameterSet::parameter_as) on tensor cores, accumulating in fp32.
  void forward(Backend& ops, const ParameterSet& params, DataType type, const void* x, float* y,
               int batch) const;
  void forward(Backend& ops, const ParameterSet& params, const float* x, float* y, int batch) const {
    forward(ops, params, DataType::f32, x, y, batch);
  }
  // From x and dy (batch, outputs), both of `type`: dW and db into the fp32 gradient buffer, and
  // dx (batch, inputs) of dx_type (fp32 or `type`) only when dx != nullptr.
  void backward(Backend& ops, const ParameterSet& params, DataType type, const void* x, const void* dy,
                DataType dx_type, void* dx, int batch) const;
  void backward(Backend& ops, const ParameterSet& params, const float* x, const float* dy, float* dx,
                int batch) const {
    backward(ops, params, DataType::f32, x, dy, DataType::f32, dx, batch);
  }

 private:
  int inputs_, outputs_;
  int weights_id_, bias_id_;
};

// Glorot-uniform weights and zero biases from the counter-based generator (deterministic per seed).
void initialize_dense(const DenseLayer& layer, const ParameterLayout& layout, uint64_t seed,
                      std::vector<float>& host_params);

}  // namespace dpbench
