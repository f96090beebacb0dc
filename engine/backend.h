// Backend: the narrow op interface every layer, optimizer and strategy calls.
// Two implementations: `cuda` (cuBLAS + own kernels, asynchronous on one stream of a Device) and
// `reference` (plain host C++, synchronous). The reference backend is the oracle for [gpu] tests.
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

#include "engine/attention_geometry.h"
#include "engine/cnn_geometry.h"
#include "engine/data_type.h"
#include "engine/errors.h"
#include "engine/rnn_geometry.h"
#include "engine/backend_kind.h"

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

// What follows the bias in Backend::add_row_bias: an optional ReLU, dropout and residual add.
struct RowBiasEpilogue {
  bool relu = false;
  DropoutDraw dropout;
  const void* residual = nullptr;  // with `out`: out = residual + the result, y left undefined
  void* out = nullptr;
};

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
  // Device hands out, engine/counting_backend.h), for code that needs the concrete type.
  virtual Backend& implementation() { return *this; }
  const Backend& implementation() const { return const_cast<Backend*>(this)->implementation(); }

  // ---- dense linear algebra ----------------------------------------------------------------
  // C (m, n) = alpha * op(A) (m, k) * op(B) (k, n) + beta * C, all row-major with leading dims.
  // A and B hold `ab_type`, C holds `c_type` (fp32, or ab_type); the products accumulate in fp32
  // (the 16-bit types on tensor cores) and C is rounded to its type once. fp32 A, B with fp32 C
  // is the plain fp32 GEMM (TF32 on cuda under --precision=tf32).
  virtual void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
                    DataType ab_type, const void* a, int lda, const void* b, int ldb, float beta,
                    DataType c_type, void* c, int ldc) = 0;
  void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const float* a,
            int lda, const float* b, int ldb, float beta, float* c, int ldc) {
    gemm(trans_a, trans_b, m, n, k, alpha, DataType::f32, a, lda, b, ldb, beta, DataType::f32, c, ldc);
  }

  // y (rows, cols) += bias (cols) broadcast over rows.
  virtual void add_bias(float* y, const float* bias, int rows, int cols) = 0;
  // dbias (cols, fp32) = sum over rows of dy (rows, cols; of `dy_type`)  (overwrites).
  virtual void bias_gradient(DataType dy_type, const void* dy, float* dbias, int rows, int cols) = 0;
  void bias_gradient(const float* dy, float* dbias, int rows, int cols) {
    bias_gradient(DataType::f32, dy, dbias, rows, cols);
  }

  // ---- element-wise ------------------------------------------------------------------------
  // Ops taking a DataType read and write buffers of that type (void*) and compute in fp32; the
  // float* overloads are the same ops on fp32 buffers.
  virtual void relu_forward(DataType type, const void* x, void* y, size_t n) = 0;
  // dx = dy where y > 0, else 0 (y is the forward output). dx may alias dy.
  virtual void relu_backward(DataType type, const void* y, const void* dy, void* dx, size_t n) = 0;
  // x[0, n) = value rounded to `type`.
  virtual void fill(DataType type, void* x, size_t n, float value) = 0;
  void fill(float* x, size_t n, float value) { fill(DataType::f32, x, n, value); }
  virtual void scale(float* x, size_t n, float alpha) = 0;              // x *= alpha
  virtual void axpy(float alpha, const float* x, float* y, size_t n) = 0;  // y += alpha * x
  // y = a + b, then max(0, .) when `relu` (a residual join). y may alias a or b.
  virtual void add_tensors(DataType type, const void* a, const void* b, void* y, size_t n,
                           bool relu) = 0;
  // Backward of add_tensors: g = relu ? (y > 0 ? dy : 0) : dy, written to da and to db (nullptr:
  // not wanted). Either output may alias dy; y is the forward output.
  virtual void add_tensors_backward(DataType type, const void* y, const void* dy, bool relu,
                                    void* da, void* db, size_t n) = 0;
  // dst = src * scale, converted from src_type to dst_type (rounded to nearest even). dst may
  // alias src only when both types are the same.
  virtual void convert(DataType src_type, const void* src, DataType dst_type, void* dst, size_t n,
                       float scale = 1.0f) = 0;

  void relu_forward(const float* x, float* y, size_t n) { relu_forward(DataType::f32, x, y, n); }
  void relu_backward(const float* y, const float* dy, float* dx, size_t n) {
    relu_backward(DataType::f32, y, dy, dx, n);
  }
  void add_tensors(const float* a, const float* b, float* y, size_t n, bool relu) {
    add_tensors(DataType::f32, a, b, y, n, relu);
  }
  void add_tensors_backward(const float* y, const float* dy, bool relu, float* da, float* db,
                            size_t n) {
    add_tensors_backward(DataType::f32, y, dy, relu, da, db, n);
  }

  // ---- loss --------------------------------------------------------------------------------
  // Softmax cross-entropy, forward and backward fused.
  //   logits (rows, classes), labels (rows) in [0, classes)
  //   row_losses (rows): scratch, receives each row's -log softmax[label]
  //   loss_out (1): mean over rows; may point into host-visible memory (Device::allocate_host_visible)
  //   dlogits (rows, classes) = (softmax - onehot(label)) / rows; may alias logits.
  //   loss_scale: device pointer or nullptr; dlogits are multiplied by *loss_scale (fp16 loss
  //   scaling), loss_out is not.
  virtual void softmax_cross_entropy(const float* logits, const int32_t* labels, int rows,
                                     int classes, float* row_losses, float* loss_out,
                                     float* dlogits, const float* loss_scale = nullptr) = 0;

  // Row-wise softmax cross-entropy without the mean, for losses summed over tokens and for
  // vocabulary-sized logits processed a chunk of rows at a time:
  //   row_losses[r] = -log softmax(logits[r])[labels[r]] (* row_weights[r])
  //   dlogits[r] = (softmax(logits[r]) - onehot(labels[r])) * gradient_scale (* row_weights[r])
  //                (* *loss_scale)
  // logits and dlogits hold `logits_type` (fp32 or 16-bit; the arithmetic is fp32 and dlogits are
  // rounded once); row_losses are fp32. dlogits may alias logits. row_weights (device memory, rows values, or nullptr) mask padded
  // tokens out of a loss (weight 0) and carry its normalisation when it changes from batch to
  // batch (real text); read on the device, so a replayed graph sees each batch's. row_stride:
  // elements from one row of logits (and of dlogits) to the next, at least classes (0: classes);
  // the elements past classes are padding, not part of the op.
  virtual void softmax_cross_entropy_rows(DataType logits_type, const void* logits,
                                          const int32_t* labels, int rows, int classes,
                                          float gradient_scale, float* row_losses, void* dlogits,
                                          const float* loss_scale = nullptr,
                                          const float* row_weights = nullptr, int row_stride = 0) = 0;
  void softmax_cross_entropy_rows(const float* logits, const int32_t* labels, int rows, int classes,
                                  float gradient_scale, float* row_losses, float* dlogits,
                                  const float* loss_scale = nullptr,
                                  const float* row_weights = nullptr) {
    softmax_cross_entropy_rows(DataType::f32, logits, labels, rows, classes, gradient_scale,
                               row_losses, dlogits, loss_scale, row_weights);
  }
  // out[0] = scale * sum of x[0, n), summed in a fixed order (the same result every run).
  virtual void sum_scaled(const float* x, size_t n, float scale, float* out) = 0;

  // ---- sequence ops (shapes and weight layout: engine/rnn_geometry.h) ----------------------
  // Copy of `bytes` bytes; the ranges do not overlap. Either side may be memory of this device,
  // of another device of the same backend (a peer copy) or host-visible memory.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;

  // Embedding lookup: y (n, dim), row i = table[ids[i]] with table (vocab, dim), both of `type`
  // (a 16-bit run gathers from the 16-bit weight copy).
  virtual void embedding_forward(DataType type, const void* table, const int32_t* ids, size_t n,
                                 int dim, void* y) = 0;
  void embedding_forward(const float* table, const int32_t* ids, size_t n, int dim, float* y) {
    embedding_forward(DataType::f32, table, ids, n, dim, y);
  }
  // dtable[ids[i]] += dy[i] for every i (several i may share a row): callers zero dtable first.
  // dy holds `dy_type`; dtable (the gradient) is fp32 and sums in fp32.
  virtual void embedding_backward(const int32_t* ids, DataType dy_type, const void* dy, size_t n,
                                  int dim, float* dtable) = 0;
  void embedding_backward(const int32_t* ids, const float* dy, size_t n, int dim, float* dtable) {
    embedding_backward(ids, DataType::f32, dy, n, dim, dtable);
  }
  // The distinct ids among ids[0, n), ascending, in rows[0, *count) (rows holds n; count is
  // device memory): the embedding rows a step touched, for exchanging only those.
  // `workspace` holds embedding_touched_rows_workspace_bytes(n, vocab) bytes.
  virtual void embedding_touched_rows(const int32_t* ids, size_t n, int vocab, int32_t* rows,
                                      int32_t* count, void* workspace) = 0;
  virtual size_t embedding_touched_rows_workspace_bytes(size_t n, int vocab) = 0;
  // The rows[0, *count) of table (vocab, dim), packed for a sparse exchange; count is device
  // memory (embedding_touched_rows' count, at most capacity), so the host never reads it:
  //   i < *count:             rows_out[i] = rows[i], values_out[i] (dim) = table[rows[i]]
  //   *count <= i < capacity: rows_out[i] = 0, values_out[i] = 0
  // The padding scatters nothing (it adds zeros to row 0), so embedding_backward can take all
  // `capacity` rows. rows_out (capacity), values_out (capacity, dim).
  virtual void gather_rows(const float* table, int dim, const int32_t* rows, const int32_t* count,
                           size_t capacity, int32_t* rows_out, float* values_out) = 0;

  // A stacked LSTM over the whole sequence (cuDNN's fused RNN on cuda).
  //   x (T, B, in), y (T, B, H * D); hx, cx, hy, cy (L * D, B, H); weights: canonical layout.
  //   Every one of them holds g.type: fp32, or a 16-bit type (the weights are then the 16-bit
  //   weight copy) with fp32 arithmetic inside (cuDNN's math precision float).
  //   hx, cx == nullptr: zero initial state; hy, cy == nullptr: final state not wanted.
  //   reserve (lstm_reserve_bytes) keeps what the backward passes need; it must not be touched
  //   between lstm_forward and the two backward calls. workspace: lstm_workspace_bytes.
  virtual void lstm_forward(const RnnGeometry& g, const void* x, const void* hx, const void* cx,
                            const void* weights, void* y, void* hy, void* cy, void* reserve,
                            void* workspace) = 0;
  // Gradients of the inputs: dx (T, B, in), dhx, dcx (L * D, B, H), all overwritten (nullptr: not
  // wanted), from dy (nullptr: zero, the outputs feed nothing) and dhy, dcy (nullptr: zero); all
  // of g.type. Runs after lstm_forward and before lstm_backward_weights, with the same reserve.
  virtual void lstm_backward_data(const RnnGeometry& g, const void* y, const void* dy,
                                  const void* dhy, const void* dcy, const void* weights,
                                  const void* hx, const void* cx, void* dx, void* dhx,
                                  void* dcx, void* reserve, void* workspace) = 0;
  // dweights (canonical layout, fp32 whatever g.type: the gradient) += d(loss)/d(weights): it
  // ADDS, as cuDNN does, so callers zero it first. x, hx, y of g.type. Runs after
  // lstm_backward_data.
  virtual void lstm_backward_weights(const RnnGeometry& g, const void* x, const void* hx,
                                     const void* y, float* dweights, void* reserve,
                                     void* workspace) = 0;
  // The cuda backend prepares (and caches per geometry) its descriptors here; layers call these
  // once at set-up.
  virtual size_t lstm_workspace_bytes(const RnnGeometry& g) = 0;
  virtual size_t lstm_reserve_bytes(const RnnGeometry& g) = 0;

  // One time step of one LSTM layer, for the unrolled ("dynamic") RNN. Every buffer holds `type`
  // (fp32, or 16-bit with fp32 arithmetic inside and each output rounded once).
  //   gates (B, 4H): pre-activations x W^T + h R^T without the biases, gate order i, f, g, o;
  //   overwritten with the activations (i, f, g, o after their nonlinearities), which is what
  //   lstm_cell_backward reads. bias_input, bias_recurrent (4H) are both added (bW + bR).
  //   c_prev (B, H) (nullptr: zeros) -> c (B, H), h (B, H).
  virtual void lstm_cell_forward(DataType type, int batch, int hidden, void* gates,
                                 const void* bias_input, const void* bias_recurrent,
                                 const void* c_prev, void* c, void* h) = 0;
  void lstm_cell_forward(int batch, int hidden, float* gates, const float* bias_input,
                         const float* bias_recurrent, const float* c_prev, float* c, float* h) {
    lstm_cell_forward(DataType::f32, batch, hidden, gates, bias_input, bias_recurrent, c_prev, c, h);
  }
  // Backward of one step: from the activations the forward left in `gates`, c_prev (nullptr:
  // zeros) and c, and the gradients dh (B, H) and dc (B, H; nullptr: zero, the last step),
  // writes dgates (B, 4H; pre-activation gradients; may alias gates) and dc_prev (B, H; may
  // alias dc; nullptr: not wanted). All of `type`.
  virtual void lstm_cell_backward(DataType type, int batch, int hidden, const void* gates,
                                  const void* c_prev, const void* c, const void* dh,
                                  const void* dc, void* dgates, void* dc_prev) = 0;
  void lstm_cell_backward(int batch, int hidden, const float* gates, const float* c_prev,
                          const float* c, const float* dh, const float* dc, float* dgates,
                          float* dc_prev) {
    lstm_cell_backward(DataType::f32, batch, hidden, gates, c_prev, c, dh, dc, dgates, dc_prev);
  }

  // ---- optimizers over a flat range (params, grads and state share one layout) -------------
  // `extras` (see UpdateExtras) unscales the gradients, skips a non-finite step and refreshes the
  // 16-bit weight copy in the same pass.
  virtual void sgd_update(float* params, const float* grads, size_t n, float learning_rate,
                          const UpdateExtras& extras = {}) = 0;
  // v = momentum * v + g;  p -= lr * v   (tf.train.MomentumOptimizer semantics)
  virtual void momentum_update(float* params, const float* grads, float* velocity, size_t n,
                               float learning_rate, float momentum,
                               const UpdateExtras& extras = {}) = 0;
  // Adam with bias correction; `step` counts from 1.
  virtual void adam_update(float* params, const float* grads, float* m, float* v, size_t n,
                           float learning_rate, float beta1, float beta2, float epsilon,
                           int64_t step, const UpdateExtras& extras = {}) = 0;

  // ---- loss scaling (fp16) -------------------------------------------------------------------
  // state->non_finite = 1 when any of x[0, n) is infinite or NaN; never clears it.
  virtual void find_non_finite(const float* x, size_t n, LossScaleState* state) = 0;
  // After a step's update: a non-finite step halves the scale (not below 1) and restarts the
  // count; otherwise good_steps grows and, on reaching `increase_every`, the scale doubles (not
  // above 2^24) and the count restarts. inverse_scale follows; non_finite is cleared.
  virtual void update_loss_scale(LossScaleState* state, int increase_every) = 0;

  // ---- synthetic data, defined per global element index (engine/counter_random.h) ----------
  // x[i] = lo + (hi - lo) * uniform(seed, stream, first_index + i)
  virtual void fill_uniform_by_index(float* x, size_t n, uint64_t seed, uint64_t stream,
                                     uint64_t first_index, float lo, float hi) = 0;
  // labels[i] = uniform_int(seed, stream, first_index + i) mod classes
  virtual void fill_labels_by_index(int32_t* labels, size_t n, uint64_t seed, uint64_t stream,
                                    uint64_t first_index, int classes) = 0;

  // ---- image ops (shapes in engine/cnn_geometry.h) ------------------------------------------
  // Image buffers are void*: their element type is the shape's `type` (Tensor4::type,
  // FilterShape::type), arithmetic is fp32 inside every op. Per-channel vectors (bias, gamma,
  // beta, statistics and their gradients) are always fp32.
  // Convolution passes. Each overwrites its output. `workspace` holds at least
  // conv2d_workspace_bytes(g) bytes. Input, filter and output have one type.
  //   forward:         y (g.output) = x (g.input) (*) w (g.filter)
  //   backward_data:   dx (g.input) = d/dx of the forward, given dy (g.output); with
  //                    `accumulate` added to dx instead (a tensor read by several layers)
  //   backward_filter: dw (g.filter) = d/dw of the forward, given x and dy
  virtual void conv2d_forward(const ConvGeometry& g, const void* x, const void* w, void* y,
                              void* workspace, size_t workspace_bytes) = 0;
  virtual void conv2d_backward_data(const ConvGeometry& g, const void* dy, const void* w, void* dx,
                                    void* workspace, size_t workspace_bytes,
                                    bool accumulate = false) = 0;
  virtual void conv2d_backward_filter(const ConvGeometry& g, const void* x, const void* dy,
                                      void* dw, void* workspace, size_t workspace_bytes) = 0;
  // Bytes of workspace the three passes need. The cuda backend picks (and caches, per geometry)
  // its algorithms here, so layers call it once at set-up; the reference backend needs none.
  virtual size_t conv2d_workspace_bytes(const ConvGeometry& g) = 0;
  // The forward pass with its epilogue: y = conv(x, w) + bias (c, fp32) per channel, then
  // max(0, .) with `relu`. The cuda backend runs it as one fused kernel where cuDNN has one that
  // beats the two passes (prepared by conv2d_bias_workspace_bytes); otherwise (and always on the
  // reference backend) conv2d_forward then add_channel_bias.
  virtual void conv2d_forward_bias(const ConvGeometry& g, const void* x, const void* w,
                                   const float* bias, bool relu, void* y, void* workspace,
                                   size_t workspace_bytes) = 0;
  // conv2d_workspace_bytes for a layer whose forward is conv2d_forward_bias: also prepares (and
  // times) the fused path where the backend has one.
  virtual size_t conv2d_bias_workspace_bytes(const ConvGeometry& g, bool relu) = 0;
  // Whether conv2d_forward_bias of a prepared `g` runs as one fused operation.
  virtual bool conv2d_forward_bias_fused(const ConvGeometry& g, bool relu) = 0;
  // The forward with batch norm's statistics made in its epilogue: y = conv(x, w) and, per output
  // channel c of C, statistics[c] = the sum and statistics[C + c] = the sum of squares of y over
  // (n, h, w), fp32 (what batch_norm_forward_training's x_statistics takes), so the batch norm
  // reading y skips its own pass over it. Callers use it only where
  // conv2d_forward_statistics_fused(g) says the backend runs it as one fused kernel; the cuda
  // backend decides that in conv2d_statistics_workspace_bytes (cuDNN's graph API, timed against
  // the forward plus the statistics pass), the reference backend never fuses it unless told to
  // (ReferenceBackend::set_fuse_convolution_statistics, for tests).
  virtual size_t conv2d_statistics_workspace_bytes(const ConvGeometry& g) = 0;
  virtual bool conv2d_forward_statistics_fused(const ConvGeometry& g) = 0;
  virtual void conv2d_forward_statistics(const ConvGeometry& g, const void* x, const void* w, void* y,
                                         float* statistics, void* workspace, size_t workspace_bytes) = 0;

  // y (shape) += bias (c) per channel, then max(0, .) when `relu` (a convolution's epilogue).
  virtual void add_channel_bias(const Tensor4& shape, void* y, const float* bias, bool relu) = 0;
  // dbias (c) = sum over n, h, w of dy (overwrites). With `relu`, dy is first masked in place by
  // y > 0 (y: the forward output), which leaves it ready for the convolution's backward passes.
  // `workspace` holds at least channel_bias_workspace_bytes(shape) bytes.
  virtual void channel_bias_gradient(const Tensor4& shape, const void* y, void* dy, float* dbias,
                                     bool relu, void* workspace) = 0;
  virtual size_t channel_bias_workspace_bytes(const Tensor4& shape) = 0;

  // Batch normalisation in training mode: statistics of this batch per channel (biased variance),
  //   y = act(gamma * (x - mean) * inv_std + beta + residual),  inv_std = 1 / sqrt(var + epsilon),
  // with residual = 0 (nullptr) or a tensor of x's shape (a ResNet block's shortcut, added in the
  // same pass), and act = max(0, .) with `relu`, else the identity. saved_mean and saved_inv_std
  // (batch_norm_saved_floats(c) each) are written for the backward pass: the mean and inv_std as
  // floats in the first c; the next c are the backend's own (the cuda backend keeps relu's mask
  // there as a threshold on x, for a backward that need not read y). y may not alias x (backward
  // reads x) or residual.
  // `workspace` holds batch_norm_workspace_bytes(shape) bytes; nothing in it outlives the call.
  // x_statistics (2c fp32: sums, then sums of squares of x per channel, conv2d_forward_statistics)
  // gives the statistics instead of a pass over x: mean = sum / M, variance = max(0, sum of
  // squares / M - mean^2) in double (M = n * h * w). Same defaults in every override.
  virtual void batch_norm_forward_training(const Tensor4& shape, const void* x, const float* gamma,
                                           const float* beta, float epsilon, bool relu, void* y,
                                           float* saved_mean, float* saved_inv_std,
                                           void* workspace, const void* residual,
                                           const float* x_statistics = nullptr) = 0;
  // dx (shape), dgamma and dbeta (c), all overwritten, from dy and the forward's statistics. With
  // `relu`, dy is first masked by y > 0 (y = the forward's output); where the forward added a
  // residual, that masked dy is its gradient and is written to d_residual (overwritten), which such
  // a backward must pass: without one (nullptr) the forward added none, and a backend may take y's
  // mask from x and the saved arrays instead of reading y (the cuda backend does). dx may alias dy
  // (every element of dx is written after its dy has been read), but not x, y or d_residual.
  virtual void batch_norm_backward(const Tensor4& shape, const void* x, const void* y,
                                   const void* dy, const float* gamma, const float* saved_mean,
                                   const float* saved_inv_std, float epsilon, bool relu, void* dx,
                                   float* dgamma, float* dbeta, void* workspace,
                                   void* d_residual) = 0;
  // Scratch both batch-norm passes need for `shape` (per-channel partial sums); may be 0.
  virtual size_t batch_norm_workspace_bytes(const Tensor4& shape) = 0;
  // A join of two batch-normalised tensors in training (a ResNet block whose shortcut is a
  // convolution with its own batch norm): y = act(bn(x) + bn_z(z)), each batch norm on its own
  // batch statistics, saved as batch_norm_forward_training saves them, and y written in one pass
  // (neither normalised tensor is stored). Both use `epsilon`. The backward is batch_norm_backward
  // of x with d_residual (the gradient of bn_z(z)), then batch_norm_backward of z from it.
  // `workspace` holds 2 * batch_norm_workspace_bytes(shape) bytes. x_statistics and z_statistics
  // as batch_norm_forward_training's, each optional.
  virtual void batch_norm_pair_forward_training(const Tensor4& shape, const void* x, const float* gamma,
                                                const float* beta, float* saved_mean, float* saved_inv_std,
                                                const void* z, const float* z_gamma, const float* z_beta,
                                                float* z_saved_mean, float* z_saved_inv_std, float epsilon,
                                                bool relu, void* y, void* workspace,
                                                const float* x_statistics = nullptr,
                                                const float* z_statistics = nullptr) = 0;
  // Batch normalisation in inference mode, on given per-channel statistics (the running mean and
  // variance) instead of the batch's, with what follows it in a ResNet block fused in:
  //   y = act(norm(x) + residual),  norm(v) = gamma * (v - mean) / sqrt(variance + epsilon) + beta,
  // residual = 0 (z == nullptr), z, or z_norm(z) (z_norm given); act = max(0, .) with `relu`.
  // One pass over x (and z); y may alias x or z.
  virtual void batch_norm_inference(const Tensor4& shape, const void* x, const InferenceNorm& norm,
                                    const void* z, const InferenceNorm* z_norm, bool relu, void* y) = 0;

  virtual void pool_forward(const PoolGeometry& g, const void* x, void* y) = 0;
  // dx (g.input, overwritten) from dy (g.output). Max pooling sends each window's gradient to
  // the first (lowest h, then w) position holding the maximum; with g.relu_input, then 0 where
  // x is not above 0 (bit for bit pool_backward, then relu_backward with y = x).
  virtual void pool_backward(const PoolGeometry& g, const void* x, const void* y, const void* dy,
                             void* dx) = 0;

  // Inverted dropout over n elements:
  //   keep_i = dropout_keeps(seed, *step, first_index + i, rate) (engine/counter_random.h),
  //   y = keep ? x * dropout_keep_scale(rate) : 0,  the scale 1 / (1 - rate) rounded to float once
  // (engine/counter_random.h holds the rule: dropout_keeps, dropout_keep_scale).
  // `first_index` places the buffer in the global batch (replica r's first sample times the
  // elements per sample), so a sample's mask does not depend on which replica trains it. `step`
  // points to device memory (the runner's step counter), so a replayed CUDA graph draws a fresh
  // mask every step; backward regenerates the mask instead of storing it.
  virtual void dropout_forward(DataType type, const void* x, void* y, size_t n, float rate,
                               uint64_t seed, uint64_t first_index, const int32_t* step) = 0;
  virtual void dropout_backward(DataType type, const void* dy, void* dx, size_t n, float rate,
                                uint64_t seed, uint64_t first_index, const int32_t* step) = 0;

  // Channel slices, for concatenating branches (same n, h, w and format on both sides):
  //   copy_into_channels:  dst[:, offset : offset + src.c] = src
  //   copy_from_channels:  dst = src[:, offset : offset + dst.c]
  virtual void copy_into_channels(const Tensor4& src_shape, const void* src,
                                  const Tensor4& dst_shape, void* dst, int channel_offset) = 0;
  virtual void copy_from_channels(const Tensor4& src_shape, const void* src, int channel_offset,
                                  const Tensor4& dst_shape, void* dst) = 0;

  // ---- Transformer ops (shapes in engine/attention_geometry.h) ------------------------------
  // A linear layer's epilogue, one pass over y (rows, cols; of `type`):
  //   v = y + bias (cols, fp32) broadcast over rows;  v = max(0, v) with then.relu;
  //   v = dropout_forward's inverted dropout of v with then.dropout (element (r, c) at index
  //       then.dropout.first_index + r * cols + c) when its rate is above 0;
  //   then y = v, or, given then.residual (rows, cols; of `type`), then.out = residual + v (y is
  //   then left undefined; out may alias residual).
  // Each step rounds to `type` as the separate ops do, so the pass equals add_row_bias alone,
  // dropout_forward and add_tensors in sequence, bit for bit: the fusion only saves the passes
  // over memory (the feed-forward block's ReLU and dropout, each sub-layer's output dropout and
  // residual add).
  virtual void add_row_bias(DataType type, void* y, const float* bias, int rows, int cols,
                            const RowBiasEpilogue& then) = 0;
  // Backward of dropout(ReLU(x)) (the feed-forward block's inner activation) from its forward
  // output y: dx = y > 0 ? dy * dropout_keep_scale(rate) : 0. An output above 0 is one the ReLU
  // passed and the dropout kept, so no mask is drawn; equal, bit for bit, to dropout_backward
  // then relu_backward on y. dx may alias dy.
  virtual void relu_dropout_backward(DataType type, const void* y, const void* dy, void* dx, size_t n,
                                     float rate) = 0;

  // Layer normalisation of each row of x (rows, cols) over its cols (biased variance):
  //   y = gamma * (x - mean) * inv_std + beta,  inv_std = 1 / sqrt(var + epsilon).
  // x, y of `type`; gamma, beta (cols) fp32; saved_mean, saved_inv_std (rows, fp32) written for
  // the backward pass. y may not alias x (the backward reads x).
  virtual void layer_norm_forward(DataType type, const void* x, const float* gamma, const float* beta,
                                  int rows, int cols, float epsilon, void* y, float* saved_mean,
                                  float* saved_inv_std) = 0;
  // dx (rows, cols; overwritten) from dy and the forward's x and statistics; dgamma and dbeta
  // (cols, fp32) overwritten. x, dy, dx of `type`; dx may alias dy. `workspace` holds
  // layer_norm_workspace_bytes(rows, cols) bytes.
  virtual void layer_norm_backward(DataType type, const void* x, const void* dy, const float* gamma,
                                   const float* saved_mean, const float* saved_inv_std, int rows,
                                   int cols, void* dx, float* dgamma, float* dbeta, void* workspace) = 0;
  virtual size_t layer_norm_workspace_bytes(int rows, int cols) = 0;

  // y (seq_len, batch, dim) = x * scale + PE(t), the sinusoids of "Attention Is All You Need":
  // PE(t, 2i) = sin(t / 10000^(2i / dim)), PE(t, 2i + 1) = cos(t / 10000^(2i / dim)). x, y of
  // `type`, arithmetic in fp32; y may alias x. (Its backward is convert with the same scale.)
  virtual void add_positional_encoding(DataType type, const void* x, void* y, int seq_len, int batch,
                                       int dim, float scale) = 0;

  // Multi-head scaled-dot-product attention as engine/attention_geometry.h defines it: o (rows of
  // g.model_dim() at g.o_stride) and each query row's log-sum-exp lse (fp32, g.lse_count(), index
  // (b * heads + h) * query_len + i). key_lengths: device memory (g.batch values) or nullptr (every
  // key real); a row that sees no key gets o = 0. step: the runner's step counter (device memory;
  // read only with dropout). o may not overlap q, k or v. `workspace` holds
  // attention_workspace_bytes(g) bytes; nothing in it outlives the call.
  virtual void attention_forward(const AttentionGeometry& g, const void* q, const void* k, const void* v,
                                 const int32_t* key_lengths, const int32_t* step, void* o, float* lse,
                                 void* workspace) = 0;
  // dq, dk, dv (overwritten; the strides of q, k, v) from d_o and the forward's q, k, v, o, lse and
  // masks (the same key_lengths and step). They may be column slices of one buffer, but none may
  // overlap the inputs.
  virtual void attention_backward(const AttentionGeometry& g, const void* q, const void* k, const void* v,
                                  const void* o, const void* d_o, const float* lse,
                                  const int32_t* key_lengths, const int32_t* step, void* dq, void* dk,
                                  void* dv, void* workspace) = 0;
  virtual size_t attention_workspace_bytes(const AttentionGeometry& g) = 0;

  // ---- bookkeeping -------------------------------------------------------------------------
  // history[*cursor] = *value; ++*cursor  (cursor is device memory, history may be host-visible).
  // A replayed CUDA graph cannot take a new pointer each step; the cursor files each step's loss
  // under its own step instead.
  virtual void append_scalar(const float* value, float* history, int32_t* cursor) = 0;

  // ---- timing inside a step (device clocks, so a replayed CUDA graph keeps timing itself) ---
  // *slot = the device clock in nanoseconds when the stream reaches this point (%globaltimer on
  // cuda, steady_clock on reference).
  virtual void write_timestamp(int64_t* slot) = 0;
  // *total += clock now - *start, in nanoseconds.
  virtual void add_elapsed_since(const int64_t* start, int64_t* total) = 0;
  // One lap of a stopwatch: *total += now - *clock, then *clock = now (one op where
  // add_elapsed_since and write_timestamp would be two).
  virtual void lap(int64_t* clock, int64_t* total) = 0;

  // ---- reductions (blocking: they wait for the stream and return to the host) --------------
  // Sum of squares accumulated in double. `scratch` holds at least sum_squares_scratch_bytes().
  virtual double sum_squares(const float* x, size_t n, void* scratch) = 0;
  virtual size_t sum_squares_scratch_bytes() const = 0;
};

}  // namespace dpbench
