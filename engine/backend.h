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

#include "engine/cnn_geometry.h"
#include "engine/run_config.h"

namespace dpbench {

enum class Transpose { no, yes };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;

  // ---- dense linear algebra ----------------------------------------------------------------
  // C (m, n) = alpha * op(A) (m, k) * op(B) (k, n) + beta * C, all row-major with leading dims.
  virtual void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
                    const float* a, int lda, const float* b, int ldb, float beta, float* c,
                    int ldc) = 0;

  // y (rows, cols) += bias (cols) broadcast over rows.
  virtual void add_bias(float* y, const float* bias, int rows, int cols) = 0;
  // dbias (cols) = sum over rows of dy (rows, cols)  (overwrites).
  virtual void bias_gradient(const float* dy, float* dbias, int rows, int cols) = 0;

  // ---- element-wise ------------------------------------------------------------------------
  virtual void relu_forward(const float* x, float* y, size_t n) = 0;
  // dx = dy where y > 0, else 0 (y is the forward output). dx may alias dy.
  virtual void relu_backward(const float* y, const float* dy, float* dx, size_t n) = 0;
  virtual void fill(float* x, size_t n, float value) = 0;
  virtual void scale(float* x, size_t n, float alpha) = 0;              // x *= alpha
  virtual void axpy(float alpha, const float* x, float* y, size_t n) = 0;  // y += alpha * x
  // y = a + b, then max(0, .) when `relu` (a residual join). y may alias a or b.
  virtual void add_tensors(const float* a, const float* b, float* y, size_t n, bool relu) = 0;
  // Backward of add_tensors: g = relu ? (y > 0 ? dy : 0) : dy, written to da and to db (nullptr:
  // not wanted). Either output may alias dy; y is the forward output.
  virtual void add_tensors_backward(const float* y, const float* dy, bool relu, float* da, float* db,
                                    size_t n) = 0;

  // ---- loss --------------------------------------------------------------------------------
  // Softmax cross-entropy, forward and backward fused.
  //   logits (rows, classes), labels (rows) in [0, classes)
  //   row_losses (rows): scratch, receives each row's -log softmax[label]
  //   loss_out (1): mean over rows; may point into host-visible memory (Device::allocate_host_visible)
  //   dlogits (rows, classes) = (softmax - onehot(label)) / rows; may alias logits.
  virtual void softmax_cross_entropy(const float* logits, const int32_t* labels, int rows,
                                     int classes, float* row_losses, float* loss_out,
                                     float* dlogits) = 0;

  // ---- optimizers over a flat range (params, grads and state share one layout) -------------
  virtual void sgd_update(float* params, const float* grads, size_t n, float learning_rate) = 0;
  // v = momentum * v + g;  p -= lr * v   (tf.train.MomentumOptimizer semantics)
  virtual void momentum_update(float* params, const float* grads, float* velocity, size_t n,
                               float learning_rate, float momentum) = 0;
  // Adam with bias correction; `step` counts from 1.
  virtual void adam_update(float* params, const float* grads, float* m, float* v, size_t n,
                           float learning_rate, float beta1, float beta2, float epsilon,
                           int64_t step) = 0;

  // ---- synthetic data, defined per global element index (engine/counter_random.h) ----------
  // x[i] = lo + (hi - lo) * uniform(seed, stream, first_index + i)
  virtual void fill_uniform_by_index(float* x, size_t n, uint64_t seed, uint64_t stream,
                                     uint64_t first_index, float lo, float hi) = 0;
  // labels[i] = uniform_int(seed, stream, first_index + i) mod classes
  virtual void fill_labels_by_index(int32_t* labels, size_t n, uint64_t seed, uint64_t stream,
                                    uint64_t first_index, int classes) = 0;

  // ---- image ops (shapes in engine/cnn_geometry.h; fp32) -----------------------------------
  // Convolution passes. Each overwrites its output. `workspace` holds at least
  // conv2d_workspace_bytes(g) bytes.
  //   forward:         y (g.output) = x (g.input) (*) w (g.filter)
  //   backward_data:   dx (g.input) = d/dx of the forward, given dy (g.output); with
  //                    `accumulate` added to dx instead (a tensor read by several layers)
  //   backward_filter: dw (g.filter) = d/dw of the forward, given x and dy
  virtual void conv2d_forward(const ConvGeometry& g, const float* x, const float* w, float* y,
                              void* workspace, size_t workspace_bytes) = 0;
  virtual void conv2d_backward_data(const ConvGeometry& g, const float* dy, const float* w,
                                    float* dx, void* workspace, size_t workspace_bytes,
                                    bool accumulate = false) = 0;
  virtual void conv2d_backward_filter(const ConvGeometry& g, const float* x, const float* dy,
                                      float* dw, void* workspace, size_t workspace_bytes) = 0;
  // Bytes of workspace the three passes need. The cuda backend picks (and caches, per geometry)
  // its algorithms here, so layers call it once at set-up; the reference backend needs none.
  virtual size_t conv2d_workspace_bytes(const ConvGeometry& g) = 0;

  // y (shape) += bias (c) per channel, then max(0, .) when `relu` (a convolution's epilogue).
  virtual void add_channel_bias(const Tensor4& shape, float* y, const float* bias, bool relu) = 0;
  // dbias (c) = sum over n, h, w of dy (overwrites). With `relu`, dy is first masked in place by
  // y > 0 (y: the forward output), which leaves it ready for the convolution's backward passes.
  // `workspace` holds at least channel_bias_workspace_bytes(shape) bytes.
  virtual void channel_bias_gradient(const Tensor4& shape, const float* y, float* dy, float* dbias,
                                     bool relu, void* workspace) = 0;
  virtual size_t channel_bias_workspace_bytes(const Tensor4& shape) = 0;

  // Batch normalisation in training mode: statistics of this batch per channel (biased variance),
  //   y = gamma * (x - mean) * inv_std + beta,  inv_std = 1 / sqrt(var + epsilon),
  // and with `relu` the ReLU of that, max(0, y), fused into the same pass. saved_mean and
  // saved_inv_std (c) are written for the backward pass. y may not alias x (backward reads x).
  // `workspace` holds batch_norm_workspace_bytes(shape) bytes; nothing in it outlives the call.
  virtual void batch_norm_forward_training(const Tensor4& shape, const float* x, const float* gamma,
                                           const float* beta, float epsilon, bool relu, float* y,
                                           float* saved_mean, float* saved_inv_std,
                                           void* workspace) = 0;
  // dx (shape), dgamma and dbeta (c), all overwritten, from dy and the forward's statistics. With
  // `relu`, dy is first masked by y > 0 (y = the forward's output, read only then). dx may alias
  // dy (every element of dx is written after its dy has been read), but not x or y.
  virtual void batch_norm_backward(const Tensor4& shape, const float* x, const float* y,
                                   const float* dy, const float* gamma, const float* saved_mean,
                                   const float* saved_inv_std, float epsilon, bool relu, float* dx,
                                   float* dgamma, float* dbeta, void* workspace) = 0;
  // Scratch both batch-norm passes need for `shape` (per-channel partial sums); may be 0.
  virtual size_t batch_norm_workspace_bytes(const Tensor4& shape) = 0;

  virtual void pool_forward(const PoolGeometry& g, const float* x, float* y) = 0;
  // dx (g.input, overwritten) from dy (g.output). Max pooling sends each window's gradient to
  // the first (lowest h, then w) position holding the maximum.
  virtual void pool_backward(const PoolGeometry& g, const float* x, const float* y, const float* dy,
                             float* dx) = 0;

  // Inverted dropout over n elements:
  //   keep_i = counter_uniform(seed, kRandomStreamDropout + *step, first_index + i) >= rate,
  //   y = keep ? x / (1 - rate) : 0.
  // `first_index` places the buffer in the global batch (replica r's first sample times the
  // elements per sample), so a sample's mask does not depend on which replica trains it. `step`
  // points to device memory (the runner's step counter), so a replayed CUDA graph draws a fresh
  // mask every step; backward regenerates the mask instead of storing it.
  virtual void dropout_forward(const float* x, float* y, size_t n, float rate, uint64_t seed,
                               uint64_t first_index, const int32_t* step) = 0;
  virtual void dropout_backward(const float* dy, float* dx, size_t n, float rate, uint64_t seed,
                                uint64_t first_index, const int32_t* step) = 0;

  // Channel slices, for concatenating branches (same n, h, w and format on both sides):
  //   copy_into_channels:  dst[:, offset : offset + src.c] = src
  //   copy_from_channels:  dst = src[:, offset : offset + dst.c]
  virtual void copy_into_channels(const Tensor4& src_shape, const float* src,
                                  const Tensor4& dst_shape, float* dst, int channel_offset) = 0;
  virtual void copy_from_channels(const Tensor4& src_shape, const float* src, int channel_offset,
                                  const Tensor4& dst_shape, float* dst) = 0;

  // ---- bookkeeping -------------------------------------------------------------------------
  // history[*cursor] = *value; ++*cursor  (cursor is device memory, history may be host-visible).
  // A replayed CUDA graph cannot take a new pointer each step; the cursor files each step's loss
  // under its own step instead.
  virtual void append_scalar(const float* value, float* history, int32_t* cursor) = 0;

  // ---- reductions (blocking: they wait for the stream and return to the host) --------------
  // Sum of squares accumulated in double. `scratch` holds at least sum_squares_scratch_bytes().
  virtual double sum_squares(const float* x, size_t n, void* scratch) = 0;
  virtual size_t sum_squares_scratch_bytes() const = 0;
};

}  // namespace dpbench
