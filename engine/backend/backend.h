// Backend: the narrow op interface every layer, optimizer and strategy calls.
// Two implementations: `cuda` (cuBLAS + own kernels, asynchronous on one stream of a Device) and
// `reference` (plain host C++, synchronous). The reference backend is the oracle for [gpu] tests.
// Each op is declared once, with its contract, in engine/backend/backend_ops.h: an op list that this
// class, the counting decorator (engine/backend/counting_backend.h) and both implementations expand.
//
// Conventions:
// - Pointers are device pointers for cuda and host pointers for reference (Buffer::data()).
// - Matrices are row-major. Shapes are written as comments `// (rows, cols)`.
// - Every op is enqueued on the stream the Backend object is bound to (see Device::ops); nothing
//   here synchronises with the host except the few calls documented as "blocking".
// - Nothing allocates device memory per call; scratch space is passed in by the caller.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/backend/attention_geometry.h"
#include "engine/backend/backend_kind.h"
#include "engine/backend/cnn_geometry.h"
#include "engine/backend/rnn_geometry.h"
#include "engine/data_type.h"
#include "engine/errors.h"

namespace dpbench {

enum class Transpose { no, yes };

// An inverted dropout fused into another op's pass (Backend::add_row_bias): the mask of
// Backend::dropout_forward with this seed, first index and step counter (device memory); a rate
// of 0 drops nothing and draws nothing.
struct DropoutDraw {
  float rate = 0.0f;
  uint64_t seed = 0;
  uint64_t first_index = 0;
  const int32_t* step = nullptr;
};

// What follows the bias in Backend::add_row_bias: an optional ReLU, dropout and residual add, or
// instead a GELU written to a second tensor.
struct RowBiasEpilogue {
  bool relu = false;
  DropoutDraw dropout;
  const void* residual = nullptr;  // with `out`: out = residual + the result, y left undefined
  void* out = nullptr;
  bool gelu = false;           // with `activated`: activated = gelu(y + bias), y keeps y + bias
  void* activated = nullptr;
};

// Where a linear layer's backward (Backend::linear_backward) also takes a GELU's backward: `input`
// (rows, in; of the layer's type) the pre-activation u whose GELU was the layer's input x, and
// `bias_gradient` (in, fp32) the gradient of the bias of the layer that made u. Both or neither.
struct GeluInputGradient {
  const void* input = nullptr;
  float* bias_gradient = nullptr;
};

// Throws RuntimeError, naming `op`, where `then` asks add_row_bias for what it does not define: a
// dropout rate outside [0, 1) or without its step counter, a residual without an output (or the
// reverse), GELU together with ReLU, dropout or a residual, GELU without `activated` (or the
// reverse), `activated` on y itself. Both backends call it before any work.
void check_row_bias_epilogue(const RowBiasEpilogue& then, const void* y, const char* op);

// Device-side state of automatic loss scaling (fp16): kept in device memory so that a replayed
// CUDA graph adapts the scale without the host. Backend::update_loss_scale documents the rule.
struct LossScaleState {
  float scale = 1.0f;
  float inverse_scale = 1.0f;  // 1 / scale, what gradients are multiplied by before the update
  int32_t good_steps = 0;      // steps since the last change of scale without a non-finite gradient
  int32_t non_finite = 0;      // set by find_non_finite during a step, cleared by update_loss_scale
};

// Extras of a mixed-precision update, all device pointers, all optional (nullptr: not used).
struct UpdateExtras {
  // Gradients are multiplied by *inverse_loss_scale before the rule sees them.
  const float* inverse_loss_scale = nullptr;
  // *skip != 0: the step's gradients were not finite; parameters and state stay as they are.
  const int32_t* skip = nullptr;
  // The updated parameters are also written, rounded, into this copy of type `half_type` (the
  // weights the 16-bit convolutions read), at the same element offsets as `params`.
  void* half_params = nullptr;
  DataType half_type = DataType::bf16;
  // Adam only: when set, the step's number is read on the device, t = *step_from_zero + 1, and
  // the `step` argument is ignored; a replayed CUDA graph then corrects the bias of each step.
  const int32_t* step_from_zero = nullptr;
};
// Per-channel inference normalisation (batch norm on running statistics): device arrays of c floats.
struct InferenceNorm {
  const float* gamma = nullptr;
  const float* beta = nullptr;
  const float* mean = nullptr;
  const float* variance = nullptr;
  float epsilon = 0;
};
// Floats in each of a training batch norm's saved arrays (Backend::batch_norm_forward_training's
// saved_mean and saved_inv_std) for c channels: the statistics, then what the backend keeps for its
// backward.
inline size_t batch_norm_saved_floats(int channels) { return 2 * static_cast<size_t>(channels); }

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  // The backend that runs the ops: itself, or the one a wrapper forwards to (the counting one a
  // Device hands out, engine/backend/counting_backend.h), for code that needs the concrete type.
  virtual Backend& implementation() { return *this; }
  const Backend& implementation() const { return const_cast<Backend*>(this)->implementation(); }

  // The ops, each declared once in engine/backend/backend_ops.h with its contract: a pure virtual each,
  // and the fp32 forms as non-virtual overloads that call the typed op.
#define DPBENCH_OP(ret, name, params, args) virtual ret name params = 0;
#define DPBENCH_FP32_FORM(ret, name, params, call) \
  ret name params { return name call; }
#include "engine/backend/backend_ops.h"
};

}  // namespace dpbench
