// LstmStack: a stacked LSTM of a sequence model, in one of two implementations of the same
// network (the seeds' --encoder_type):
// - fused:    the backend's whole-sequence LSTM (cuDNN's fused RNN on cuda), uni- or bidirectional;
// - unrolled: TensorFlow's dynamic_rnn, one time step at a time: per step and layer one GEMM
//             (h_{t-1} R^T, added onto the input projection computed for all steps at once) and
//             one fused cell kernel, forward and backward; unidirectional only (a bidirectional
//             encoder is two stacks, the second reading the sequence reversed).
// Both keep their weights as ONE parameter tensor in the canonical layout of engine/backend/rnn_geometry.h,
// so a unidirectional stack has the same parameters either way. Activations, states and the weights
// the stack reads have the geometry's type (16-bit under mixed precision: the weight copy); the
// weight gradient is fp32.
//
// Note [LSTM units]: a stack is one parameter unit (engine/training/model.h), all its layers
// together. A unit is a range of whole tensors, and a stack's layers share its one weight tensor:
// the fused implementation hands cuDNN the whole stack's weights in one call, and the unrolled one
// keeps the same tensor so both build the same parameters from the same seed. Nor is a layer a
// range inside it: the canonical layout puts every layer's matrices before all the biases. Cutting
// per layer would take one tensor per layer, which the fused call cannot read, and would change
// every unrolled run's initial values.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/backend/rnn_geometry.h"
#include "engine/training/parameter_set.h"

namespace dpbench {

enum class LstmImplementation { fused, unrolled };

// Where a stack's per-layer states sit in a state tensor (slots, B, H) shared with other stacks:
// layer l uses slot l * stride + offset. A decoder initialised from a bidirectional encoder of
// two unrolled stacks reads them interleaved (forward l, backward l), as cuDNN orders its
// pseudo-layers. The fused implementation uses its own order: stride 1, offset 0.
struct StateSlots {
  int stride = 1;
  int offset = 0;
};

class LstmStack {
 public:
  // Declares "<name>/weights" (geometry.weight_count() floats). geometry.batch is per replica.
  LstmStack(ParameterLayout& layout, const std::string& name, const RnnGeometry& geometry,
            LstmImplementation implementation);

  const std::string& name() const { return name_; }
  const RnnGeometry& geometry() const { return geometry_; }
  LstmImplementation implementation() const { return implementation_; }
  int parameter_id() const { return parameter_id_; }
  GradientRange gradient_range(const ParameterLayout& layout) const {
    return layout.range_of(parameter_id_, parameter_id_);
  }
  // Every weight and bias uniform in [-0.1, 0.1], as TensorFlow's NMT initialised them.
  void initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& host_params) const;

 private:
  std::string name_;
  RnnGeometry geometry_;
  LstmImplementation implementation_;
  int parameter_id_;
};

// One replica's buffers for a stack, allocated once; forward and backward only enqueue ops.
class LstmStackReplica {
 public:
  virtual ~LstmStackReplica() = default;
  // Every buffer below holds the geometry's type.
  // x (T, B, in); hx, cx: initial states in the slots (nullptr: zeros); the final states are
  // written to hy, cy (nullptr: not wanted). The outputs stay in output().
  virtual void forward(const ParameterSet& params, const void* x, const void* hx, const void* cx,
                       void* hy, void* cy) = 0;
  virtual const void* output() const = 0;  // (T, B, H * directions)
  // From dy (T, B, H * directions; overwritten; nullptr: the outputs feed nothing) and dhy, dcy
  // (slots; nullptr: zero): dx (T, B, in; nullptr: not wanted), dhx, dcx (slots; nullptr: not
  // wanted), and the stack's weight gradient (overwritten). x, hx, cx are the forward's.
  void backward(const ParameterSet& params, const void* x, const void* hx, const void* cx, void* dy,
                const void* dhy, const void* dcy, void* dx, void* dhx, void* dcx) {
    backward_data(params, x, hx, cx, dy, dhy, dcy, dx, dhx, dcx);
    backward_weights(params, x, hx);
  }
  // backward in its two halves, for a caller that uses dx before the weight pass runs (nmt starts
  // the exchange of its source embedding's gradient while the encoder's weight pass computes):
  // first the input and state gradients, then the weight gradient from what the first half kept.
  virtual void backward_data(const ParameterSet& params, const void* x, const void* hx, const void* cx,
                             void* dy, const void* dhy, const void* dcy, void* dx, void* dhx,
                             void* dcx) = 0;
  virtual void backward_weights(const ParameterSet& params, const void* x, const void* hx) = 0;
};

std::unique_ptr<LstmStackReplica> create_lstm_stack_replica(const LstmStack& stack, Device& device,
                                                            StateSlots slots = {});

}  // namespace dpbench
