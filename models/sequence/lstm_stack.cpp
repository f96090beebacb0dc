// The two implementations of LstmStack: the backend's fused whole-sequence LSTM, and the LSTM
// unrolled one time step at a time from GEMMs and fused cell kernels.
#include "models/sequence/lstm_stack.h"

#include "engine/backend/counter_random.h"
#include "engine/errors.h"

namespace dpbench {

LstmStack::LstmStack(ParameterLayout& layout, const std::string& name, const RnnGeometry& geometry,
                     LstmImplementation implementation)
    : name_(name), geometry_(geometry), implementation_(implementation) {
  if (implementation == LstmImplementation::unrolled && geometry.bidirectional)
    throw RuntimeError(name + ": the unrolled LSTM is unidirectional; build a bidirectional one "
                              "from two stacks");
  parameter_id_ = layout.declare(name + "/weights", {static_cast<int64_t>(geometry.weight_count())});
}

void LstmStack::initialize(const ParameterLayout& layout, uint64_t seed,
                           std::vector<float>& host_params) const {
  const TensorView& weights = layout.tensor(parameter_id_);
  const uint64_t stream = kRandomStreamParameters + static_cast<uint64_t>(parameter_id_);
  for (size_t i = 0; i < weights.count; ++i)
    host_params[weights.offset + i] = 0.1f * (2.0f * counter_uniform(seed, stream, i) - 1.0f);
}

namespace {

// cuDNN-style: one call per pass for the whole stack.
class FusedLstmReplica final : public LstmStackReplica {
 public:
  FusedLstmReplica(const LstmStack& stack, Device& device)
      : stack_(stack), device_(device), g_(stack.geometry()) {
    Backend& ops = device.ops();
    // cuDNN's reserve space is what its backward reads of the forward: kept activations.
    const MemoryTag kept{MemoryCategory::activations, stack.name()};
    output_ = device.allocate(g_.output_count() * data_type_bytes(g_.type), kept);
    reserve_ = device.allocate(std::max<size_t>(ops.lstm_reserve_bytes(g_), 16), kept);
    workspace_ = device.allocate(std::max<size_t>(ops.lstm_workspace_bytes(g_), 16),
                                 MemoryTag{MemoryCategory::workspaces, stack.name()});
  }

  void forward(const ParameterSet& params, const void* x, const void* hx, const void* cx, void* hy,
               void* cy) override {
    device_.ops().lstm_forward(g_, x, hx, cx, params.parameter_as(stack_.parameter_id(), g_.type),
                               output_.data(), hy, cy, reserve_.data(), workspace_.data());
  }
  const void* output() const override { return output_.data(); }

  void backward_data(const ParameterSet& params, const void*, const void* hx, const void* cx, void* dy,
                     const void* dhy, const void* dcy, void* dx, void* dhx, void* dcx) override {
    device_.ops().lstm_backward_data(g_, output_.data(), dy, dhy, dcy,
                                     params.parameter_as(stack_.parameter_id(), g_.type), hx, cx, dx, dhx,
                                     dcx, reserve_.data(), workspace_.data());
  }

  void backward_weights(const ParameterSet& params, const void* x, const void* hx) override {
    Backend& ops = device_.ops();
    float* dweights = params.gradient(stack_.parameter_id());
    // The weight pass adds to what is there (cuDNN's only mode), so the gradient starts at zero.
    ops.fill(dweights, g_.weight_count(), 0.0f);
    ops.lstm_backward_weights(g_, x, hx, output_.data(), dweights, reserve_.data(), workspace_.data());
  }

 private:
  const LstmStack& stack_;
  Device& device_;
  RnnGeometry g_;
  Buffer output_;     // (T, B, H * D)
  Buffer reserve_;    // what the forward keeps for the backward passes
  Buffer workspace_;
};

// dynamic_rnn: each layer runs over the whole sequence before the next one starts, so the input
// projection x W^T of a layer is one GEMM over all T * B rows; the recurrence then costs one
// small GEMM and one cell kernel per step. Under mixed precision every activation and GEMM input
// is 16-bit; the weight-gradient GEMMs write the fp32 gradient directly.
class UnrolledLstmReplica final : public LstmStackReplica {
 public:
  UnrolledLstmReplica(const LstmStack& stack, Device& device, StateSlots slots)
      : stack_(stack), device_(device), g_(stack.geometry()), slots_(slots) {
    const size_t T = g_.seq_len, B = g_.batch, H = g_.hidden_size;
    const MemoryTag kept{MemoryCategory::activations, stack.name()}, passing{MemoryCategory::scratch, stack.name()};
    for (int l = 0; l < g_.num_layers; ++l) {
      Layer layer;
      layer.gates = device.allocate(bytes(T * B * 4 * H), kept);
      layer.hidden = device.allocate(bytes((T + 1) * B * H), kept);
      layer.cell = device.allocate(bytes((T + 1) * B * H), kept);
      layer.hidden_gradient = device.allocate(bytes(T * B * H), passing);
      layers_.push_back(std::move(layer));
    }
    cell_gradient_ = device.allocate(bytes(B * H), passing);
  }

  void forward(const ParameterSet& params, const void* x, const void* hx, const void* cx, void* hy,
               void* cy) override {
    Backend& ops = device_.ops();
    const DataType type = g_.type;
    const int T = g_.seq_len, B = g_.batch, H = g_.hidden_size, G = 4 * H;
    const size_t step_states = static_cast<size_t>(B) * H;
    const void* weights = params.parameter_as(stack_.parameter_id(), type);
    for (int l = 0; l < g_.num_layers; ++l) {
      Layer& layer = layers_[l];
      const int in = g_.layer_input_size(l);
      const void* input = l == 0 ? x : at(layers_[l - 1].hidden.data(), step_states);  // (T, B, in)
      const void* W = at(weights, g_.input_weights_offset(l, 0));      // (4H, in)
      const void* R = at(weights, g_.recurrent_weights_offset(l, 0));  // (4H, H)
      void* gates = layer.gates.data();                                // (T, B, 4H)
      void* hidden = layer.hidden.data();                              // (T + 1, B, H), [0] = h0
      void* cell = layer.cell.data();                                  // (T + 1, B, H), [0] = c0
      set_initial_state(ops, hidden, hx, l);
      set_initial_state(ops, cell, cx, l);
      ops.gemm(Transpose::no, Transpose::yes, T * B, G, in, 1.0f, type, input, in, W, in, 0.0f, type,
               gates, G);
      for (int t = 0; t < T; ++t) {
        void* step_gates = at(gates, static_cast<size_t>(t) * B * G);
        ops.gemm(Transpose::no, Transpose::yes, B, G, H, 1.0f, type, at(hidden, t * step_states), H, R,
                 H, 1.0f, type, step_gates, G);
        ops.lstm_cell_forward(type, B, H, step_gates, at(weights, g_.input_bias_offset(l, 0)),
                              at(weights, g_.recurrent_bias_offset(l, 0)), at(cell, t * step_states),
                              at(cell, (t + 1) * step_states), at(hidden, (t + 1) * step_states));
      }
      if (hy != nullptr) ops.copy(slot(hy, l), at(hidden, T * step_states), bytes(step_states));
      if (cy != nullptr) ops.copy(slot(cy, l), at(cell, T * step_states), bytes(step_states));
    }
  }

  const void* output() const override {
    return at(layers_.back().hidden.data(), static_cast<size_t>(g_.batch) * g_.hidden_size);
  }

  // Each layer's gate gradients stay in its `gates` buffer for the weight pass.
  void backward_data(const ParameterSet& params, const void*, const void*, const void*, void* dy,
                     const void* dhy, const void* dcy, void* dx, void* dhx, void* dcx) override {
    // The forward kept the initial states in hidden[0] and cell[0], so x, hx and cx go unread.
    Backend& ops = device_.ops();
    const DataType type = g_.type;
    const int T = g_.seq_len, B = g_.batch, H = g_.hidden_size, G = 4 * H;
    const size_t step_states = static_cast<size_t>(B) * H;
    const void* weights = params.parameter_as(stack_.parameter_id(), type);
    void* dc = cell_gradient_.data();  // (B, H), carried from step t to t - 1
    for (int l = g_.num_layers - 1; l >= 0; --l) {
      Layer& layer = layers_[l];
      const int in = g_.layer_input_size(l);
      const void* W = at(weights, g_.input_weights_offset(l, 0));
      const void* R = at(weights, g_.recurrent_weights_offset(l, 0));
      void* gates = layer.gates.data();  // activations in, gate gradients out
      const void* cell = layer.cell.data();
      // dh (T, B, H): what the layer above (or the caller) sends; the recurrence adds to it.
      void* dh = layer.hidden_gradient.data();
      if (l == g_.num_layers - 1) {
        if (dy != nullptr) {
          dh = dy;
        } else {
          ops.fill(type, dh, static_cast<size_t>(T) * step_states, 0.0f);
        }
      }
      void* last_dh = at(dh, static_cast<size_t>(T - 1) * step_states);
      if (dhy != nullptr) ops.add_tensors(type, last_dh, slot(dhy, l), last_dh, step_states, false);
      if (dcy != nullptr) {
        ops.copy(dc, slot(dcy, l), bytes(step_states));
      } else {
        ops.fill(type, dc, step_states, 0.0f);
      }
      for (int t = T - 1; t >= 0; --t) {
        void* step_gates = at(gates, static_cast<size_t>(t) * B * G);
        ops.lstm_cell_backward(type, B, H, step_gates, at(cell, t * step_states),
                               at(cell, (t + 1) * step_states), at(dh, t * step_states), dc, step_gates, dc);
        if (t > 0)
          ops.gemm(Transpose::no, Transpose::no, B, H, G, 1.0f, type, step_gates, G, R, H, 1.0f, type,
                   at(dh, (t - 1) * step_states), H);
      }
      if (dhx != nullptr)
        ops.gemm(Transpose::no, Transpose::no, B, H, G, 1.0f, type, gates, G, R, H, 0.0f, type, slot(dhx, l), H);
      if (dcx != nullptr) ops.copy(slot(dcx, l), dc, bytes(step_states));
      void* dinput = l > 0 ? layers_[l - 1].hidden_gradient.data() : dx;
      if (dinput != nullptr)
        ops.gemm(Transpose::no, Transpose::no, T * B, in, G, 1.0f, type, gates, G, W, in, 0.0f, type,
                 dinput, in);
    }
  }

  void backward_weights(const ParameterSet& params, const void* x, const void*) override {
    Backend& ops = device_.ops();
    const DataType type = g_.type;
    const int T = g_.seq_len, B = g_.batch, H = g_.hidden_size, G = 4 * H;
    const size_t step_states = static_cast<size_t>(B) * H;
    float* dweights = params.gradient(stack_.parameter_id());
    for (int l = g_.num_layers - 1; l >= 0; --l) {
      const int in = g_.layer_input_size(l);
      const void* input = l == 0 ? x : at(layers_[l - 1].hidden.data(), step_states);
      const void* gates = layers_[l].gates.data();
      // Over all steps at once, into the fp32 gradient: dW = dgates^T x, dR = dgates^T h_{t-1}.
      ops.gemm(Transpose::yes, Transpose::no, G, in, T * B, 1.0f, type, gates, G, input, in, 0.0f,
               DataType::f32, dweights + g_.input_weights_offset(l, 0), in);
      ops.gemm(Transpose::yes, Transpose::no, G, H, T * B, 1.0f, type, gates, G, layers_[l].hidden.data(), H, 0.0f,
               DataType::f32, dweights + g_.recurrent_weights_offset(l, 0), H);
      float* dbias_input = dweights + g_.input_bias_offset(l, 0);
      ops.bias_gradient(type, gates, dbias_input, T * B, G);
      ops.copy(dweights + g_.recurrent_bias_offset(l, 0), dbias_input, sizeof(float) * G);
    }
  }

 private:
  struct Layer {
    Buffer gates, hidden, cell, hidden_gradient;
  };

  size_t bytes(size_t count) const { return count * data_type_bytes(g_.type); }
  void* at(void* base, size_t elements) const { return element_at(base, g_.type, elements); }
  const void* at(const void* base, size_t elements) const { return element_at(base, g_.type, elements); }
  void* slot(void* states, int layer) const {
    return at(states, static_cast<size_t>(layer * slots_.stride + slots_.offset) * g_.batch * g_.hidden_size);
  }
  const void* slot(const void* states, int layer) const { return slot(const_cast<void*>(states), layer); }
  void set_initial_state(Backend& ops, void* first_step, const void* given, int layer) {
    const size_t count = static_cast<size_t>(g_.batch) * g_.hidden_size;
    if (given != nullptr) {
      ops.copy(first_step, slot(given, layer), bytes(count));
    } else {
      ops.fill(g_.type, first_step, count, 0.0f);
    }
  }

  const LstmStack& stack_;
  Device& device_;
  RnnGeometry g_;
  StateSlots slots_;
  std::vector<Layer> layers_;
  Buffer cell_gradient_;
};

}  // namespace

std::unique_ptr<LstmStackReplica> create_lstm_stack_replica(const LstmStack& stack, Device& device,
                                                            StateSlots slots) {
  if (stack.implementation() == LstmImplementation::fused) {
    if (slots.stride != 1 || slots.offset != 0)
      throw RuntimeError("the fused LSTM keeps its states in its own pseudo-layer order");
    return std::make_unique<FusedLstmReplica>(stack, device);
  }
  return std::make_unique<UnrolledLstmReplica>(stack, device, slots);
}

}  // namespace dpbench
