// dpbench's own fused LSTM (cuda_persistent_lstm.h): GEMMs through CudaBackend around the
// persistent recurrence kernels. Shapes are sequence-major as everywhere (rnn_geometry.h):
// x (T, B, in), y and every hidden sequence (T, B, H), gates (T, B, 4H), states (L, B, H).
#include "engine/cuda/cuda_persistent_lstm.h"

#include <string>
#include <type_traits>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

constexpr size_t kAlignment = 256;
size_t aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// Where each buffer lies, in bytes from the start of the workspace or the reserve.
//   workspace: projection (T, B, 4H) fp32, the input projections of the layer being run;
//              passed_down (T, B, H) of the type, between layers in backward data: the gradient
//              of layer l's input, which is layer l - 1's dy; bias_sum (4H) fp32.
//   reserve, per layer: gates (T, B, 4H) of the type, the activations from forward, then their
//              pre-activation gradients from backward data, which backward weights reads;
//              cell (T + 1, B, H) fp32; hidden (T, B, H) of the type, layer l's output for
//              every layer but the last (the last one's is the caller's y).
struct PersistentBuffers {
  explicit PersistentBuffers(const RnnGeometry& g) {
    const size_t element = data_type_bytes(g.type);
    const size_t steps = static_cast<size_t>(g.seq_len) * g.batch;
    const size_t gates = 4 * static_cast<size_t>(g.hidden_size);
    projection = 0;
    passed_down = aligned(steps * gates * sizeof(float));
    bias_sum = passed_down + (g.num_layers > 1 ? aligned(steps * g.hidden_size * element) : 0);
    workspace_bytes = bias_sum + aligned(gates * sizeof(float));
    gates_bytes = aligned(steps * gates * element);
    cell_bytes = aligned((steps + g.batch) * g.hidden_size * sizeof(float));
    hidden_bytes = aligned(steps * g.hidden_size * element);
    reserve_bytes = g.num_layers * (gates_bytes + cell_bytes) + (g.num_layers - 1) * hidden_bytes;
  }
  size_t layer_start(int layer) const { return layer * (gates_bytes + cell_bytes + hidden_bytes); }
  size_t gates(int layer) const { return layer_start(layer); }
  size_t cell(int layer) const { return layer_start(layer) + gates_bytes; }
  size_t hidden(int layer) const { return layer_start(layer) + gates_bytes + cell_bytes; }

  size_t projection = 0, passed_down = 0, bias_sum = 0, workspace_bytes = 0;
  size_t gates_bytes = 0, cell_bytes = 0, hidden_bytes = 0, reserve_bytes = 0;
};

// The buffer `bytes` into `base`, as P (const-ness kept).
template <typename P>
P* at(P* base, size_t bytes) {
  using Void = std::conditional_t<std::is_const_v<P>, const void, void>;
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return static_cast<P*>(static_cast<Void*>(static_cast<Byte*>(static_cast<Void*>(base)) + bytes));
}
// Layer l's (B, H) slice of a (L, B, H) state, or nullptr for an absent state.
template <typename P>
P* state_of(P* states, const RnnGeometry& g, int layer) {
  if (states == nullptr) return nullptr;
  return at(states, static_cast<size_t>(layer) * g.batch * g.hidden_size * data_type_bytes(g.type));
}

// Layer l's input sequence and output sequence: x or the layer below's output in the reserve;
// the reserve's, or the caller's y for the last layer.
const void* layer_input(const RnnGeometry& g, const PersistentBuffers& b, const void* x,
                        const void* reserve, int layer) {
  return layer == 0 ? x : at(reserve, b.hidden(layer - 1));
}
template <typename P>
P* layer_output(const RnnGeometry& g, const PersistentBuffers& b, P* y, P* reserve, int layer) {
  return layer == g.num_layers - 1 ? y : at(reserve, b.hidden(layer));
}

void require(const RnnGeometry& g, const void* reserve, const void* workspace, const char* op) {
  if (!persistent_lstm_supports(g))
    throw RuntimeError(std::string("CudaBackend::") + op +
                       ": the own_persistent LSTM takes fp16 or bf16 data, one direction and 32, 64 "
                       "or 128 hidden units; use --lstm_algorithm=fastest or standard");
  if (reserve == nullptr || workspace == nullptr)
    throw RuntimeError(std::string("CudaBackend::") + op +
                       ": workspace and reserve are required (lstm_workspace_bytes, lstm_reserve_bytes)");
}

}  // namespace

bool persistent_lstm_supports(const RnnGeometry& g) {
  return !g.bidirectional && cuda_kernels::persistent_lstm_supports(g.type, g.hidden_size);
}

size_t persistent_lstm_workspace_bytes(const RnnGeometry& g) { return PersistentBuffers(g).workspace_bytes; }

size_t persistent_lstm_reserve_bytes(const RnnGeometry& g) { return PersistentBuffers(g).reserve_bytes; }

void persistent_lstm_forward(CudaBackend& ops, const RnnGeometry& g, const void* x, const void* hx,
                             const void* cx, const void* weights, void* y, void* hy, void* cy,
                             void* reserve, void* workspace) {
  require(g, reserve, workspace, "lstm_forward");
  const PersistentBuffers b(g);
  const int rows = g.seq_len * g.batch, gates = 4 * g.hidden_size;
  float* projection = at(static_cast<float*>(workspace), b.projection);
  for (int l = 0; l < g.num_layers; ++l) {
    const int in = g.layer_input_size(l);
    // projection (T B, 4H) = input (T B, in) W^T, W (4H, in).
    ops.gemm(Transpose::no, Transpose::yes, rows, gates, in, 1.0f, g.type, layer_input(g, b, x, reserve, l), in,
             element_at(weights, g.type, g.input_weights_offset(l, 0)), in, 0.0f, DataType::f32, projection, gates);
    cuda_kernels::PersistentLstmForward args;
    args.seq_len = g.seq_len;
    args.batch = g.batch;
    args.hidden = g.hidden_size;
    args.input_projection = projection;
    args.recurrent_weights = element_at(weights, g.type, g.recurrent_weights_offset(l, 0));
    args.bias_input = element_at(weights, g.type, g.input_bias_offset(l, 0));
    args.bias_recurrent = element_at(weights, g.type, g.recurrent_bias_offset(l, 0));
    args.hx = state_of(hx, g, l);
    args.cx = state_of(cx, g, l);
    args.y = layer_output(g, b, y, reserve, l);
    args.hy = state_of(hy, g, l);
    args.cy = state_of(cy, g, l);
    args.gates = at(reserve, b.gates(l));
    args.cell = at(static_cast<float*>(reserve), b.cell(l));
    cuda_kernels::launch_persistent_lstm_forward(ops.stream(), g.type, args);
  }
}

void persistent_lstm_backward_data(CudaBackend& ops, const RnnGeometry& g, const void* dy,
                                   const void* dhy, const void* dcy, const void* weights, void* dx,
                                   void* dhx, void* dcx, void* reserve, void* workspace) {
  require(g, reserve, workspace, "lstm_backward_data");
  const PersistentBuffers b(g);
  const int rows = g.seq_len * g.batch, gates = 4 * g.hidden_size;
  void* passed_down = at(workspace, b.passed_down);
  for (int l = g.num_layers - 1; l >= 0; --l) {
    cuda_kernels::PersistentLstmBackward args;
    args.seq_len = g.seq_len;
    args.batch = g.batch;
    args.hidden = g.hidden_size;
    args.recurrent_weights = element_at(weights, g.type, g.recurrent_weights_offset(l, 0));
    args.gates = at(reserve, b.gates(l));
    args.cell = at(static_cast<const float*>(reserve), b.cell(l));
    args.dh_in = l == g.num_layers - 1 ? dy : passed_down;
    args.dhy = state_of(dhy, g, l);
    args.dcy = state_of(dcy, g, l);
    args.dhx = state_of(dhx, g, l);
    args.dcx = state_of(dcx, g, l);
    cuda_kernels::launch_persistent_lstm_backward(ops.stream(), g.type, args);
    // The gradient of this layer's input (T B, in) = dgates (T B, 4H) W (4H, in): the layer
    // below's dy (written over the passed_down this kernel has read), or the caller's dx.
    void* input_gradient = l > 0 ? passed_down : dx;
    if (input_gradient == nullptr) continue;
    const int in = g.layer_input_size(l);
    ops.gemm(Transpose::no, Transpose::no, rows, in, gates, 1.0f, g.type, args.gates, gates,
             element_at(weights, g.type, g.input_weights_offset(l, 0)), in, 0.0f, g.type, input_gradient, in);
  }
}

void persistent_lstm_backward_weights(CudaBackend& ops, const RnnGeometry& g, const void* x,
                                      const void* hx, const void* y, float* dweights,
                                      void* reserve, void* workspace) {
  require(g, reserve, workspace, "lstm_backward_weights");
  const PersistentBuffers b(g);
  const int rows = g.seq_len * g.batch, gates = 4 * g.hidden_size, H = g.hidden_size;
  float* bias_sum = at(static_cast<float*>(workspace), b.bias_sum);
  for (int l = 0; l < g.num_layers; ++l) {
    const int in = g.layer_input_size(l);
    const void* dgates = at(static_cast<const void*>(reserve), b.gates(l));
    // dW (4H, in) += dgates^T (4H, T B) input (T B, in).
    ops.gemm(Transpose::yes, Transpose::no, gates, in, rows, 1.0f, g.type, dgates, gates,
             layer_input(g, b, x, reserve, l), in, 1.0f, DataType::f32, dweights + g.input_weights_offset(l, 0), in);
    // dR (4H, H) += sum over t of dgates_t^T h_{t-1}: steps 1 .. T-1 against the output of
    // steps 0 .. T-2 in one product, step 0 against hx (zeros when absent: nothing to add).
    float* dR = dweights + g.recurrent_weights_offset(l, 0);
    const void* output = layer_output(g, b, y, static_cast<const void*>(reserve), l);
    if (g.seq_len > 1) {
      ops.gemm(Transpose::yes, Transpose::no, gates, H, rows - g.batch, 1.0f, g.type,
               element_at(dgates, g.type, static_cast<size_t>(g.batch) * gates), gates, output, H, 1.0f,
               DataType::f32, dR, H);
    }
    if (hx != nullptr) {
      ops.gemm(Transpose::yes, Transpose::no, gates, H, g.batch, 1.0f, g.type, dgates, gates, state_of(hx, g, l), H,
               1.0f, DataType::f32, dR, H);
    }
    // Both biases are added to every pre-activation, so each takes the column sums of dgates.
    ops.bias_gradient(g.type, dgates, bias_sum, rows, gates);
    ops.axpy(1.0f, bias_sum, dweights + g.input_bias_offset(l, 0), gates);
    ops.axpy(1.0f, bias_sum, dweights + g.recurrent_bias_offset(l, 0), gates);
  }
}

}  // namespace dpbench
