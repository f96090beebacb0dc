// Dense layer forward and backward as GEMMs on the backend.
#include "models/layers/dense.h"

#include <cmath>

#include "engine/backend/counter_random.h"

namespace dpbench {

DenseLayer::DenseLayer(ParameterLayout& layout, const std::string& name, int inputs, int outputs)
    : inputs_(inputs), outputs_(outputs) {
  weights_id_ = layout.declare(name + "/weights", {inputs, outputs});
  bias_id_ = layout.declare(name + "/bias", {outputs});
}

void DenseLayer::forward(Backend& ops, const ParameterSet& params, DataType type, const void* x,
                         float* y, int batch) const {
  // y (B, out) = x (B, in) · W (in, out)
  ops.gemm(Transpose::no, Transpose::no, batch, outputs_, inputs_, 1.0f, type, x, inputs_,
           params.parameter_as(weights_id_, type), outputs_, 0.0f, DataType::f32, y, outputs_);
  ops.add_bias(y, params.parameter(bias_id_), batch, outputs_);
}

void DenseLayer::backward(Backend& ops, const ParameterSet& params, DataType type, const void* x,
                          const void* dy, DataType dx_type, void* dx, int batch) const {
  // dW (in, out) = x^T (in, B) · dy (B, out)
  ops.gemm(Transpose::yes, Transpose::no, inputs_, outputs_, batch, 1.0f, type, x, inputs_, dy,
           outputs_, 0.0f, DataType::f32, params.gradient(weights_id_), outputs_);
  ops.bias_gradient(type, dy, params.gradient(bias_id_), batch, outputs_);
  if (dx != nullptr) {
    // dx (B, in) = dy (B, out) · W^T (out, in)
    ops.gemm(Transpose::no, Transpose::yes, batch, inputs_, outputs_, 1.0f, type, dy, outputs_,
             params.parameter_as(weights_id_, type), outputs_, 0.0f, dx_type, dx, inputs_);
  }
}

void initialize_dense(const DenseLayer& layer, const ParameterLayout& layout, uint64_t seed,
                      std::vector<float>& host_params) {
  const TensorView& weights = layout.tensor(layer.weights_id());
  const float limit = std::sqrt(6.0f / static_cast<float>(layer.inputs() + layer.outputs()));
  const uint64_t stream = kRandomStreamParameters + static_cast<uint64_t>(layer.weights_id());
  for (size_t i = 0; i < weights.count; ++i)
    host_params[weights.offset + i] = (2.0f * counter_uniform(seed, stream, i) - 1.0f) * limit;
  const TensorView& bias = layout.tensor(layer.bias_id());
  for (size_t i = 0; i < bias.count; ++i) host_params[bias.offset + i] = 0.0f;
}

}  // namespace dpbench
