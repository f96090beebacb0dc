// Shapes of the sequence ops: a stacked (optionally bidirectional) LSTM run over a whole sequence,
// and the canonical layout of its weights inside a model's flat parameter buffer.
//
// Canonical weight layout = cuDNN's weight space (cudnnGetRNNWeightParams, checked on cuDNN 9.14),
// so the fused LSTM reads a model's parameters in place: first the matrices of every pseudo-layer
// p = layer * directions + direction (forward first),
//   W  (4H, in_l)  input weights, row-major, gate rows in the order i, f, g, o
//   R  (4H, H)     recurrent weights, same gate order
// then the biases of every pseudo-layer,
//   bW (4H), bR (4H)   input and recurrent bias (both are added, as cuDNN and PyTorch do)
// where in_0 = input_size and in_l = H * directions for l > 0 (the next layer reads the
// concatenation [forward, backward]). Gates: i = sigmoid, f = sigmoid, g = tanh, o = sigmoid;
//   c_t = f * c_{t-1} + i * g,   h_t = o * tanh(c_t).
// Activations are sequence-major: x (T, B, in), y (T, B, H * directions); states hx, cx, hy, cy
// (layers * directions, B, H), pseudo-layer p = l * directions + d.
#pragma once

#include <cstddef>

#include "engine/data_type.h"

namespace dpbench {

struct RnnGeometry {
  int seq_len = 1;      // T
  int batch = 1;        // B
  int input_size = 1;   // features of x
  int hidden_size = 1;  // H
  int num_layers = 1;
  bool bidirectional = false;
  // Storage type of x, y, the states and the weights the LSTM reads (its weight gradient is fp32).
  DataType type = DataType::f32;

  int directions() const { return bidirectional ? 2 : 1; }
  int pseudo_layers() const { return num_layers * directions(); }
  int output_size() const { return hidden_size * directions(); }
  int layer_input_size(int layer) const { return layer == 0 ? input_size : output_size(); }

  // Elements of one pseudo-layer's two matrices, and of the whole canonical layout.
  size_t matrices_count(int layer) const {
    const size_t gates = 4 * static_cast<size_t>(hidden_size);
    return gates * layer_input_size(layer) + gates * hidden_size;
  }
  size_t all_matrices_count() const {
    size_t total = 0;
    for (int l = 0; l < num_layers; ++l) total += matrices_count(l) * directions();
    return total;
  }
  size_t weight_count() const {
    return all_matrices_count() + 8 * static_cast<size_t>(hidden_size) * pseudo_layers();
  }
  // Offsets (in elements) of the parts of pseudo-layer (layer, direction).
  size_t input_weights_offset(int layer, int direction) const {
    size_t offset = 0;
    for (int l = 0; l < layer; ++l) offset += matrices_count(l) * directions();
    return offset + matrices_count(layer) * direction;
  }
  size_t recurrent_weights_offset(int layer, int direction) const {
    return input_weights_offset(layer, direction) + 4 * static_cast<size_t>(hidden_size) * layer_input_size(layer);
  }
  size_t input_bias_offset(int layer, int direction) const {
    const size_t pseudo_layer = static_cast<size_t>(layer) * directions() + direction;
    return all_matrices_count() + pseudo_layer * 8 * static_cast<size_t>(hidden_size);
  }
  size_t recurrent_bias_offset(int layer, int direction) const {
    return input_bias_offset(layer, direction) + 4 * static_cast<size_t>(hidden_size);
  }

  size_t input_count() const { return static_cast<size_t>(seq_len) * batch * input_size; }
  size_t output_count() const { return static_cast<size_t>(seq_len) * batch * output_size(); }
  size_t state_count() const { return static_cast<size_t>(pseudo_layers()) * batch * hidden_size; }

  bool operator==(const RnnGeometry& o) const {
    return seq_len == o.seq_len && batch == o.batch && input_size == o.input_size &&
           hidden_size == o.hidden_size && num_layers == o.num_layers &&
           bidirectional == o.bidirectional && type == o.type;
  }
};

}  // namespace dpbench
