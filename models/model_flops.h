// FLOP counts of the building blocks, for Model::flops_per_sample (engine/training/model.h): 2 FLOPs per
// multiply-add. A product's backward runs the weight gradient and, where something needs it, the
// input gradient, each as many multiply-adds as the forward.
#pragma once

#include "engine/backend/cnn_geometry.h"
#include "engine/backend/rnn_geometry.h"
#include "engine/training/model.h"

namespace dpbench {

// (m x k) times (k x n).
inline StepFlops matmul_flops(double m, double k, double n, bool input_gradient) {
  const double forward = 2.0 * m * k * n;
  return StepFlops{forward, forward * (input_gradient ? 2.0 : 1.0), 0.0};
}

// A convolution over its whole batch: every output element is a dot product over c * r * s inputs.
inline StepFlops conv_flops(const ConvGeometry& g, bool input_gradient) {
  const double outputs = static_cast<double>(g.output.count());
  return matmul_flops(outputs, static_cast<double>(g.filter.c) * g.filter.r * g.filter.s, 1.0, input_gradient);
}

// An LSTM stack over its whole sequence and batch: per token and pseudo-layer, the gates' input
// and recurrent products, 4H x (in + H) multiply-adds (RnnGeometry::matrices_count). Backward
// runs both products' input gradients (the recurrence needs them; the first layer's only where
// `input_gradient`) and the weight gradients.
inline StepFlops lstm_flops(const RnnGeometry& g, bool input_gradient) {
  const double tokens = static_cast<double>(g.seq_len) * g.batch;
  const double forward = 2.0 * tokens * static_cast<double>(g.all_matrices_count());
  const double first_layer_input = 2.0 * tokens * 4.0 * g.hidden_size * g.input_size * g.directions();
  return StepFlops{forward, 2.0 * forward - (input_gradient ? 0.0 : first_layer_input), 0.0};
}

inline StepFlops per_sample(StepFlops flops, int batch) {
  flops.forward /= batch;
  flops.backward /= batch;
  flops.recompute /= batch;
  return flops;
}

}  // namespace dpbench
