// The Backend op list: every op of the interface declared once, with its contract beside it.
// Include engine/backend/backend.h to call the ops. This file is an X-macro list, expanded inside a class
// body by Backend (the pure virtuals and the fp32 forms), CountingBackend (forwarding that counts
// launches) and each implementation (engine/backend/backend_overrides.h), so no signature is restated.
//
// Each entry is one of:
//   DPBENCH_ENQUEUES(ret, name, (params), (args))
//       an op that enqueues work on the backend's stream, one launch in the device's counts
//       (Note [counted launches] in engine/backend/device.h);
//   DPBENCH_ENQUEUES_N(ret, name, (params), (args), launches)
//       the same, counted as `launches` launches: an expression of the params and of `backend`,
//       the backend that runs the op;
//   DPBENCH_QUERY(ret, name, (params), (args))
//       a question that enqueues nothing (a workspace size, whether a path is fused): not counted;
//   DPBENCH_FP32_FORM(ret, name, (params), (call))
//       a non-virtual overload of the op just above on fp32 buffers, which is name(call) (at most
//       one per op: implementations un-hide it with `using Backend::name`).
// params is the parameter list as every declaration writes it, default arguments included (the
// same ones on each override, so a caller holding a concrete backend gets them too); a `const`
// after it makes a const member function. args names the parameters again, in order, for
// forwarding them.
//
// An includer defines DPBENCH_OP(ret, name, params, args) for every op alike, or the kinds it
// tells apart; ENQUEUES_N falls back to ENQUEUES, ENQUEUES and QUERY to DPBENCH_OP, FP32_FORM to
// nothing. Including this file undefines them all again. No include guard: it is meant to be
// included once per class that expands it.

#ifndef DPBENCH_ENQUEUES
#define DPBENCH_ENQUEUES(ret, name, params, args) DPBENCH_OP(ret, name, params, args)
#endif
#ifndef DPBENCH_ENQUEUES_N
#define DPBENCH_ENQUEUES_N(ret, name, params, args, launches) DPBENCH_ENQUEUES(ret, name, params, args)
#endif
#ifndef DPBENCH_QUERY
#define DPBENCH_QUERY(ret, name, params, args) DPBENCH_OP(ret, name, params, args)
#endif
#ifndef DPBENCH_FP32_FORM
#define DPBENCH_FP32_FORM(ret, name, params, call)
#endif

// ---- dense linear algebra ----------------------------------------------------------------
// C (m, n) = alpha * op(A) (m, k) * op(B) (k, n) + beta * C, all row-major with leading dims.
// A and B hold `ab_type`, C holds `c_type` (fp32, or ab_type); the products accumulate in fp32
// (the 16-bit types on tensor cores) and C is rounded to its type once. fp32 A, B with fp32 C
// is the plain fp32 GEMM (TF32 on cuda under --precision=tf32).
DPBENCH_ENQUEUES(void, gemm,
                 (Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, DataType ab_type,
                  const void* a, int lda, const void* b, int ldb, float beta, DataType c_type, void* c, int ldc),
                 (trans_a, trans_b, m, n, k, alpha, ab_type, a, lda, b, ldb, beta, c_type, c, ldc))
DPBENCH_FP32_FORM(void, gemm,
                  (Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                   const float* b, int ldb, float beta, float* c, int ldc),
                  (trans_a, trans_b, m, n, k, alpha, DataType::f32, a, lda, b, ldb, beta, DataType::f32, c, ldc))

// A linear layer, y = x W^T + b, as one op so that a backend can fuse its parts:
//   y (rows, out) = x (rows, in) W^T (W: (out, in), the weight copy) + bias (out, fp32), then
//   `then` as Backend::add_row_bias applies it (ReLU, dropout, a residual into then.out, GELU into
//   then.activated); x, W, y (and the tensors of `then`) of `type`. bias_copy is the same bias
//   in `type` (the weight copy's; the fp32 bias itself for fp32).
// Equal to gemm then add_row_bias (linear_forward_in_two_ops), except where the backend fuses
// them (linear_forward_fused): the cuda backend then runs one cuBLASLt matmul whose epilogue adds
// the bias, the residual (as C with beta 1) or the GELU (keeping the pre-activation as its aux
// output), rounding y + bias once where the two ops round twice, and adding bias_copy (cuBLASLt
// takes a bias of the output's type only, as PyTorch's autocast adds it too).
DPBENCH_ENQUEUES_N(void, linear_forward,
                   (DataType type, const void* x, const void* weights, const float* bias, const void* bias_copy,
                    int rows, int in, int out, void* y, const RowBiasEpilogue& then),
                   (type, x, weights, bias, bias_copy, rows, in, out, y, then),
                   backend.linear_forward_fused(type, rows, in, out, then) ? 1 : 2)
DPBENCH_QUERY(bool, linear_forward_fused,
              (DataType type, int rows, int in, int out, const RowBiasEpilogue& then), (type, rows, in, out, then))
// linear_forward's backward, from dy (rows, out; of `type`):
//   dweights (out, in) = dy^T x, fp32, overwritten;
//   dbias (out, fp32) = the column sums of dy, overwritten (nullptr: not wanted);
//   dx (rows, in) = dy W, overwritten (added to dx with `accumulate`) (nullptr: not wanted);
//   with gelu.input (x was GELU(u), u = gelu.input): dx = (dy W) * GELU'(u) instead, u's
//   gradient, and gelu.bias_gradient = its column sums (the bias gradient of the layer that made
//   u); accumulate must then be false.
// Equal to bias_gradient, gemm, gemm (gelu_backward, bias_gradient) in sequence, rounding dx once
// where a backend fuses GELU's backward into dx's product (the cuda backend: cuBLASLt's DGELU and
// bias-gradient epilogues, linear_backward_launches counting what runs; u's bias gradient is then
// summed in fp32 but stored through `type`, cuBLASLt's only choice for a 16-bit dx).
DPBENCH_ENQUEUES_N(void, linear_backward,
                   (DataType type, const void* x, const void* dy, const void* weights, int rows, int in, int out,
                    float* dweights, float* dbias, void* dx, bool accumulate, const GeluInputGradient& gelu),
                   (type, x, dy, weights, rows, in, out, dweights, dbias, dx, accumulate, gelu),
                   backend.linear_backward_launches(type, rows, in, out, dbias != nullptr, dx != nullptr,
                                                    gelu.input != nullptr))
DPBENCH_QUERY(int, linear_backward_launches,
              (DataType type, int rows, int in, int out, bool bias, bool input_gradient, bool gelu),
              (type, rows, in, out, bias, input_gradient, gelu))

// y (rows, cols) += bias (cols) broadcast over rows.
DPBENCH_ENQUEUES(void, add_bias, (float* y, const float* bias, int rows, int cols), (y, bias, rows, cols))
// dbias (cols, fp32) = sum over rows of dy (rows, cols; of `dy_type`)  (overwrites).
DPBENCH_ENQUEUES(void, bias_gradient, (DataType dy_type, const void* dy, float* dbias, int rows, int cols),
                 (dy_type, dy, dbias, rows, cols))
DPBENCH_FP32_FORM(void, bias_gradient, (const float* dy, float* dbias, int rows, int cols),
                  (DataType::f32, dy, dbias, rows, cols))

// ---- element-wise ------------------------------------------------------------------------
// Ops taking a DataType read and write buffers of that type (void*) and compute in fp32; the
// float* overloads are the same ops on fp32 buffers.
DPBENCH_ENQUEUES(void, relu_forward, (DataType type, const void* x, void* y, size_t n), (type, x, y, n))
DPBENCH_FP32_FORM(void, relu_forward, (const float* x, float* y, size_t n), (DataType::f32, x, y, n))
// dx = dy where y > 0, else 0 (y is the forward output). dx may alias dy.
DPBENCH_ENQUEUES(void, relu_backward, (DataType type, const void* y, const void* dy, void* dx, size_t n),
                 (type, y, dy, dx, n))
DPBENCH_FP32_FORM(void, relu_backward, (const float* y, const float* dy, float* dx, size_t n),
                  (DataType::f32, y, dy, dx, n))
// x[0, n) = value rounded to `type`.
DPBENCH_ENQUEUES(void, fill, (DataType type, void* x, size_t n, float value), (type, x, n, value))
DPBENCH_FP32_FORM(void, fill, (float* x, size_t n, float value), (DataType::f32, x, n, value))
// x *= alpha
DPBENCH_ENQUEUES(void, scale, (float* x, size_t n, float alpha), (x, n, alpha))
// y += alpha * x
DPBENCH_ENQUEUES(void, axpy, (float alpha, const float* x, float* y, size_t n), (alpha, x, y, n))
// y = a + b, then max(0, .) when `relu` (a residual join). y may alias a or b.
DPBENCH_ENQUEUES(void, add_tensors, (DataType type, const void* a, const void* b, void* y, size_t n, bool relu),
                 (type, a, b, y, n, relu))
DPBENCH_FP32_FORM(void, add_tensors, (const float* a, const float* b, float* y, size_t n, bool relu),
                  (DataType::f32, a, b, y, n, relu))
// Backward of add_tensors: g = relu ? (y > 0 ? dy : 0) : dy, written to da and to db (nullptr:
// not wanted). Either output may alias dy; y is the forward output.
DPBENCH_ENQUEUES(void, add_tensors_backward,
                 (DataType type, const void* y, const void* dy, bool relu, void* da, void* db, size_t n),
                 (type, y, dy, relu, da, db, n))
DPBENCH_FP32_FORM(void, add_tensors_backward,
                  (const float* y, const float* dy, bool relu, float* da, float* db, size_t n),
                  (DataType::f32, y, dy, relu, da, db, n))
// dst = src * scale, converted from src_type to dst_type (rounded to nearest even). dst may
// alias src only when both types are the same.
DPBENCH_ENQUEUES(void, convert,
                 (DataType src_type, const void* src, DataType dst_type, void* dst, size_t n, float scale = 1.0f),
                 (src_type, src, dst_type, dst, n, scale))

// ---- loss --------------------------------------------------------------------------------
// Softmax cross-entropy, forward and backward fused.
//   logits (rows, classes), labels (rows) in [0, classes)
//   row_losses (rows): scratch, receives each row's -log softmax[label]
//   loss_out (1): mean over rows; may point into host-visible memory (Device::allocate_host_visible)
//   dlogits (rows, classes) = (softmax - onehot(label)) / rows; may alias logits.
//   loss_scale: device pointer or nullptr; dlogits are multiplied by *loss_scale (fp16 loss
//   scaling), loss_out is not.
DPBENCH_ENQUEUES(void, softmax_cross_entropy,
                 (const float* logits, const int32_t* labels, int rows, int classes, float* row_losses,
                  float* loss_out, float* dlogits, const float* loss_scale = nullptr),
                 (logits, labels, rows, classes, row_losses, loss_out, dlogits, loss_scale))

// Row-wise softmax cross-entropy without the mean, for losses summed over tokens and for
// vocabulary-sized logits processed a chunk of rows at a time:
//   row_losses[r] = -log softmax(logits[r])[labels[r]] (* row_weights[r])
//   dlogits[r] = (softmax(logits[r]) - onehot(labels[r])) * gradient_scale (* row_weights[r])
//                (* *loss_scale)
// logits and dlogits hold `logits_type` (fp32 or 16-bit; the arithmetic is fp32 and dlogits are
// rounded once); row_losses are fp32. dlogits may alias logits. row_weights (device memory, rows
// values, or nullptr) mask padded tokens out of a loss (weight 0) and carry its normalisation
// when it changes from batch to batch (real text); read on the device, so a replayed graph sees
// each batch's. row_stride: elements from one row of logits (and of dlogits) to the next, at
// least classes (0: classes); the elements past classes are padding, not part of the op.
DPBENCH_ENQUEUES(void, softmax_cross_entropy_rows,
                 (DataType logits_type, const void* logits, const int32_t* labels, int rows, int classes,
                  float gradient_scale, float* row_losses, void* dlogits, const float* loss_scale = nullptr,
                  const float* row_weights = nullptr, int row_stride = 0),
                 (logits_type, logits, labels, rows, classes, gradient_scale, row_losses, dlogits, loss_scale,
                  row_weights, row_stride))
DPBENCH_FP32_FORM(void, softmax_cross_entropy_rows,
                  (const float* logits, const int32_t* labels, int rows, int classes, float gradient_scale,
                   float* row_losses, float* dlogits, const float* loss_scale = nullptr,
                   const float* row_weights = nullptr),
                  (DataType::f32, logits, labels, rows, classes, gradient_scale, row_losses, dlogits, loss_scale,
                   row_weights))
// out[0] = scale * sum of x[0, n), summed in a fixed order (the same result every run).
DPBENCH_ENQUEUES(void, sum_scaled, (const float* x, size_t n, float scale, float* out), (x, n, scale, out))

// ---- sequence ops (shapes and weight layout: engine/backend/rnn_geometry.h) ----------------------
// Copy of `bytes` bytes; the ranges do not overlap. Either side may be memory of this device,
// of another device of the same backend (a peer copy) or host-visible memory.
DPBENCH_ENQUEUES(void, copy, (void* dst, const void* src, size_t bytes), (dst, src, bytes))

// Embedding lookup: y (n, dim), row i = table[ids[i]] with table (vocab, dim), both of `type`
// (a 16-bit run gathers from the 16-bit weight copy).
DPBENCH_ENQUEUES(void, embedding_forward,
                 (DataType type, const void* table, const int32_t* ids, size_t n, int dim, void* y),
                 (type, table, ids, n, dim, y))
DPBENCH_FP32_FORM(void, embedding_forward, (const float* table, const int32_t* ids, size_t n, int dim, float* y),
                  (DataType::f32, table, ids, n, dim, y))
// dtable[ids[i]] += dy[i] for every i (several i may share a row): callers zero dtable first.
// dy holds `dy_type`; dtable (the gradient) is fp32 and sums in fp32.
DPBENCH_ENQUEUES(void, embedding_backward,
                 (const int32_t* ids, DataType dy_type, const void* dy, size_t n, int dim, float* dtable),
                 (ids, dy_type, dy, n, dim, dtable))
DPBENCH_FP32_FORM(void, embedding_backward, (const int32_t* ids, const float* dy, size_t n, int dim, float* dtable),
                  (ids, DataType::f32, dy, n, dim, dtable))
// The distinct ids among ids[0, n), ascending, in rows[0, *count) (rows holds n; count is
// device memory): the embedding rows a step touched, for exchanging only those.
// `workspace` holds embedding_touched_rows_workspace_bytes(n, vocab) bytes.
DPBENCH_ENQUEUES(void, embedding_touched_rows,
                 (const int32_t* ids, size_t n, int vocab, int32_t* rows, int32_t* count, void* workspace),
                 (ids, n, vocab, rows, count, workspace))
DPBENCH_QUERY(size_t, embedding_touched_rows_workspace_bytes, (size_t n, int vocab), (n, vocab))
// The rows[0, *count) of table (vocab, dim), packed for a sparse exchange; count is device
// memory (embedding_touched_rows' count, at most capacity), so the host never reads it:
//   i < *count:             rows_out[i] = rows[i], values_out[i] (dim) = table[rows[i]]
//   *count <= i < capacity: rows_out[i] = 0, values_out[i] = 0
// The padding scatters nothing (it adds zeros to row 0), so embedding_backward can take all
// `capacity` rows. rows_out (capacity), values_out (capacity, dim).
DPBENCH_ENQUEUES(void, gather_rows,
                 (const float* table, int dim, const int32_t* rows, const int32_t* count, size_t capacity,
                  int32_t* rows_out, float* values_out),
                 (table, dim, rows, count, capacity, rows_out, values_out))

// A stacked LSTM over the whole sequence (cuDNN's fused RNN on cuda).
//   x (T, B, in), y (T, B, H * D); hx, cx, hy, cy (L * D, B, H); weights: canonical layout.
//   Every one of them holds g.type: fp32, or a 16-bit type (the weights are then the 16-bit
//   weight copy) with fp32 arithmetic inside (cuDNN's math precision float).
//   hx, cx == nullptr: zero initial state; hy, cy == nullptr: final state not wanted.
//   reserve (lstm_reserve_bytes) keeps what the backward passes need; it must not be touched
//   between lstm_forward and the two backward calls. workspace: lstm_workspace_bytes.
DPBENCH_ENQUEUES(void, lstm_forward,
                 (const RnnGeometry& g, const void* x, const void* hx, const void* cx, const void* weights, void* y,
                  void* hy, void* cy, void* reserve, void* workspace),
                 (g, x, hx, cx, weights, y, hy, cy, reserve, workspace))
// Gradients of the inputs: dx (T, B, in), dhx, dcx (L * D, B, H), all overwritten (nullptr: not
// wanted), from dy (nullptr: zero, the outputs feed nothing) and dhy, dcy (nullptr: zero); all
// of g.type. Runs after lstm_forward and before lstm_backward_weights, with the same reserve.
DPBENCH_ENQUEUES(void, lstm_backward_data,
                 (const RnnGeometry& g, const void* y, const void* dy, const void* dhy, const void* dcy,
                  const void* weights, const void* hx, const void* cx, void* dx, void* dhx, void* dcx,
                  void* reserve, void* workspace),
                 (g, y, dy, dhy, dcy, weights, hx, cx, dx, dhx, dcx, reserve, workspace))
// dweights (canonical layout, fp32 whatever g.type: the gradient) += d(loss)/d(weights): it
// ADDS, as cuDNN does, so callers zero it first. x, hx, y of g.type. Runs after
// lstm_backward_data.
DPBENCH_ENQUEUES(void, lstm_backward_weights,
                 (const RnnGeometry& g, const void* x, const void* hx, const void* y, float* dweights,
                  void* reserve, void* workspace),
                 (g, x, hx, y, dweights, reserve, workspace))
// The cuda backend prepares (and caches per geometry) its descriptors here; layers call these
// once at set-up.
DPBENCH_QUERY(size_t, lstm_workspace_bytes, (const RnnGeometry& g), (g))
DPBENCH_QUERY(size_t, lstm_reserve_bytes, (const RnnGeometry& g), (g))

// One time step of one LSTM layer, for the unrolled ("dynamic") RNN. Every buffer holds `type`
// (fp32, or 16-bit with fp32 arithmetic inside and each output rounded once).
//   gates (B, 4H): pre-activations x W^T + h R^T without the biases, gate order i, f, g, o;
//   overwritten with the activations (i, f, g, o after their nonlinearities), which is what
//   lstm_cell_backward reads. bias_input, bias_recurrent (4H) are both added (bW + bR).
//   c_prev (B, H) (nullptr: zeros) -> c (B, H), h (B, H).
DPBENCH_ENQUEUES(void, lstm_cell_forward,
                 (DataType type, int batch, int hidden, void* gates, const void* bias_input,
                  const void* bias_recurrent, const void* c_prev, void* c, void* h),
                 (type, batch, hidden, gates, bias_input, bias_recurrent, c_prev, c, h))
DPBENCH_FP32_FORM(void, lstm_cell_forward,
                  (int batch, int hidden, float* gates, const float* bias_input, const float* bias_recurrent,
                   const float* c_prev, float* c, float* h),
                  (DataType::f32, batch, hidden, gates, bias_input, bias_recurrent, c_prev, c, h))
// Backward of one step: from the activations the forward left in `gates`, c_prev (nullptr:
// zeros) and c, and the gradients dh (B, H) and dc (B, H; nullptr: zero, the last step),
// writes dgates (B, 4H; pre-activation gradients; may alias gates) and dc_prev (B, H; may
// alias dc; nullptr: not wanted). All of `type`.
DPBENCH_ENQUEUES(void, lstm_cell_backward,
                 (DataType type, int batch, int hidden, const void* gates, const void* c_prev, const void* c,
                  const void* dh, const void* dc, void* dgates, void* dc_prev),
                 (type, batch, hidden, gates, c_prev, c, dh, dc, dgates, dc_prev))
DPBENCH_FP32_FORM(void, lstm_cell_backward,
                  (int batch, int hidden, const float* gates, const float* c_prev, const float* c, const float* dh,
                   const float* dc, float* dgates, float* dc_prev),
                  (DataType::f32, batch, hidden, gates, c_prev, c, dh, dc, dgates, dc_prev))

// ---- optimizers over a flat range (params, grads and state share one layout) -------------
// `extras` (see UpdateExtras) unscales the gradients, skips a non-finite step and refreshes the
// 16-bit weight copy in the same pass.
DPBENCH_ENQUEUES(void, sgd_update,
                 (float* params, const float* grads, size_t n, float learning_rate, const UpdateExtras& extras = {}),
                 (params, grads, n, learning_rate, extras))
// v = momentum * v + g;  p -= lr * v   (tf.train.MomentumOptimizer semantics)
DPBENCH_ENQUEUES(void, momentum_update,
                 (float* params, const float* grads, float* velocity, size_t n, float learning_rate, float momentum,
                  const UpdateExtras& extras = {}),
                 (params, grads, velocity, n, learning_rate, momentum, extras))
// Adam with bias correction; `step` counts from 1. weight_decay > 0 makes it AdamW (decoupled
// weight decay, torch.optim.AdamW): p *= 1 - lr * weight_decay first, then the Adam step; 0 is
// plain Adam, bit for bit. A skipped step (extras.skip) decays nothing either.
DPBENCH_ENQUEUES(void, adam_update,
                 (float* params, const float* grads, float* m, float* v, size_t n, float learning_rate, float beta1,
                  float beta2, float epsilon, int64_t step, float weight_decay, const UpdateExtras& extras = {}),
                 (params, grads, m, v, n, learning_rate, beta1, beta2, epsilon, step, weight_decay, extras))

// ---- loss scaling (fp16) -------------------------------------------------------------------
// state->non_finite = 1 when any of x[0, n) is infinite or NaN; never clears it.
DPBENCH_ENQUEUES(void, find_non_finite, (const float* x, size_t n, LossScaleState* state), (x, n, state))
// After a step's update: a non-finite step halves the scale (not below 1) and restarts the
// count; otherwise good_steps grows and, on reaching `increase_every`, the scale doubles (not
// above 2^24) and the count restarts. inverse_scale follows; non_finite is cleared.
DPBENCH_ENQUEUES(void, update_loss_scale, (LossScaleState* state, int increase_every), (state, increase_every))

// ---- synthetic data, defined per global element index (engine/backend/counter_random.h) ----------
// x[i] = lo + (hi - lo) * uniform(seed, stream, first_index + i)
DPBENCH_ENQUEUES(void, fill_uniform_by_index,
                 (float* x, size_t n, uint64_t seed, uint64_t stream, uint64_t first_index, float lo, float hi),
                 (x, n, seed, stream, first_index, lo, hi))
// labels[i] = uniform_int(seed, stream, first_index + i) mod classes
DPBENCH_ENQUEUES(void, fill_labels_by_index,
                 (int32_t* labels, size_t n, uint64_t seed, uint64_t stream, uint64_t first_index, int classes),
                 (labels, n, seed, stream, first_index, classes))

// ---- image ops (shapes in engine/backend/cnn_geometry.h) ------------------------------------------
// Image buffers are void*: their element type is the shape's `type` (Tensor4::type,
// FilterShape::type), arithmetic is fp32 inside every op. Per-channel vectors (bias, gamma,
// beta, statistics and their gradients) are always fp32.
// Convolution passes. Each overwrites its output. `workspace` holds at least
// conv2d_workspace_bytes(g) bytes. Input, filter and output have one type.
//   forward:         y (g.output) = x (g.input) (*) w (g.filter)
//   backward_data:   dx (g.input) = d/dx of the forward, given dy (g.output); with
//                    `accumulate` added to dx instead (a tensor read by several layers)
//   backward_filter: dw (g.filter) = d/dw of the forward, given x and dy
DPBENCH_ENQUEUES(void, conv2d_forward,
                 (const ConvGeometry& g, const void* x, const void* w, void* y, void* workspace,
                  size_t workspace_bytes),
                 (g, x, w, y, workspace, workspace_bytes))
DPBENCH_ENQUEUES(void, conv2d_backward_data,
                 (const ConvGeometry& g, const void* dy, const void* w, void* dx, void* workspace,
                  size_t workspace_bytes, bool accumulate = false),
                 (g, dy, w, dx, workspace, workspace_bytes, accumulate))
DPBENCH_ENQUEUES(void, conv2d_backward_filter,
                 (const ConvGeometry& g, const void* x, const void* dy, void* dw, void* workspace,
                  size_t workspace_bytes),
                 (g, x, dy, dw, workspace, workspace_bytes))
// Before the first step: how conv2d_backward_data with `accumulate` runs for `g` within
// `workspace_bytes` (the cuda backend times cuDNN's graph API's accumulating plan against the
// classic algorithm with beta = 1 on scratch tensors, as its algorithm search does, so the
// scratch comes and goes before the step's activations exist; Note [search memory] in
// engine/cuda/device_memory.h). Without it the first accumulating call decides. Nothing to
// decide on the reference backend.
DPBENCH_QUERY(void, prepare_conv2d_backward_data_accumulate, (const ConvGeometry& g, size_t workspace_bytes),
              (g, workspace_bytes))
// Bytes of workspace the three passes need. The cuda backend picks (and caches, per geometry)
// its algorithms here, so layers call it once at set-up; the reference backend needs none.
DPBENCH_QUERY(size_t, conv2d_workspace_bytes, (const ConvGeometry& g), (g))
// The forward pass with its epilogue: y = conv(x, w) + bias (c, fp32) per channel, then
// max(0, .) with `relu`. The cuda backend runs it as one fused kernel where cuDNN has one that
// beats the two passes (prepared by conv2d_bias_workspace_bytes); otherwise (and always on the
// reference backend) conv2d_forward then add_channel_bias: two launches.
DPBENCH_ENQUEUES_N(void, conv2d_forward_bias,
                   (const ConvGeometry& g, const void* x, const void* w, const float* bias, bool relu, void* y,
                    void* workspace, size_t workspace_bytes),
                   (g, x, w, bias, relu, y, workspace, workspace_bytes),
                   backend.conv2d_forward_bias_fused(g, relu) ? 1 : 2)
// conv2d_workspace_bytes for a layer whose forward is conv2d_forward_bias: also prepares (and
// times) the fused path where the backend has one.
DPBENCH_QUERY(size_t, conv2d_bias_workspace_bytes, (const ConvGeometry& g, bool relu), (g, relu))
// Whether conv2d_forward_bias of a prepared `g` runs as one fused operation.
DPBENCH_QUERY(bool, conv2d_forward_bias_fused, (const ConvGeometry& g, bool relu), (g, relu))
// The forward with batch norm's statistics made in its epilogue: y = conv(x, w) and, per output
// channel c of C, statistics[c] = the sum and statistics[C + c] = the sum of squares of y over
// (n, h, w), fp32 (what batch_norm_forward_training's x_statistics takes), so the batch norm
// reading y skips its own pass over it. Callers use it only where
// conv2d_forward_statistics_fused(g) says the backend runs it as one fused kernel; the cuda
// backend decides that in conv2d_statistics_workspace_bytes (cuDNN's graph API, timed against
// the forward plus the statistics pass), the reference backend never fuses it unless told to
// (ReferenceBackend::set_fuse_convolution_statistics, for tests).
DPBENCH_QUERY(size_t, conv2d_statistics_workspace_bytes, (const ConvGeometry& g), (g))
DPBENCH_QUERY(bool, conv2d_forward_statistics_fused, (const ConvGeometry& g), (g))
DPBENCH_ENQUEUES(void, conv2d_forward_statistics,
                 (const ConvGeometry& g, const void* x, const void* w, void* y, float* statistics, void* workspace,
                  size_t workspace_bytes),
                 (g, x, w, y, statistics, workspace, workspace_bytes))

// y (shape) += bias (c) per channel, then max(0, .) when `relu` (a convolution's epilogue).
DPBENCH_ENQUEUES(void, add_channel_bias, (const Tensor4& shape, void* y, const float* bias, bool relu),
                 (shape, y, bias, relu))
// dbias (c) = sum over n, h, w of dy (overwrites). With `relu`, dy is first masked in place by
// y > 0 (y: the forward output), which leaves it ready for the convolution's backward passes.
// `workspace` holds at least channel_bias_workspace_bytes(shape) bytes.
DPBENCH_ENQUEUES(void, channel_bias_gradient,
                 (const Tensor4& shape, const void* y, void* dy, float* dbias, bool relu, void* workspace),
                 (shape, y, dy, dbias, relu, workspace))
DPBENCH_QUERY(size_t, channel_bias_workspace_bytes, (const Tensor4& shape), (shape))

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
// squares / M - mean^2) in double (M = n * h * w).
DPBENCH_ENQUEUES(void, batch_norm_forward_training,
                 (const Tensor4& shape, const void* x, const float* gamma, const float* beta, float epsilon,
                  bool relu, void* y, float* saved_mean, float* saved_inv_std, void* workspace,
                  const void* residual, const float* x_statistics = nullptr),
                 (shape, x, gamma, beta, epsilon, relu, y, saved_mean, saved_inv_std, workspace, residual,
                  x_statistics))
// dx (shape), dgamma and dbeta (c), all overwritten, from dy and the forward's statistics. With
// `relu`, dy is first masked by y > 0 (y = the forward's output); where the forward added a
// residual, that masked dy is its gradient and is written to d_residual (overwritten), which such
// a backward must pass: without one (nullptr) the forward added none, and a backend may take y's
// mask from x and the saved arrays instead of reading y (the cuda backend does). dx may alias dy
// (every element of dx is written after its dy has been read), but not x, y or d_residual;
// d_residual may alias dy (a join's shortcut gradient written over its output's).
DPBENCH_ENQUEUES(void, batch_norm_backward,
                 (const Tensor4& shape, const void* x, const void* y, const void* dy, const float* gamma,
                  const float* saved_mean, const float* saved_inv_std, float epsilon, bool relu, void* dx,
                  float* dgamma, float* dbeta, void* workspace, void* d_residual),
                 (shape, x, y, dy, gamma, saved_mean, saved_inv_std, epsilon, relu, dx, dgamma, dbeta, workspace,
                  d_residual))
// Scratch both batch-norm passes need for `shape` (per-channel partial sums); may be 0.
DPBENCH_QUERY(size_t, batch_norm_workspace_bytes, (const Tensor4& shape), (shape))
// A join of two batch-normalised tensors in training (a ResNet block whose shortcut is a
// convolution with its own batch norm): y = act(bn(x) + bn_z(z)), each batch norm on its own
// batch statistics, saved as batch_norm_forward_training saves them, and y written in one pass
// (neither normalised tensor is stored). Both use `epsilon`. The backward is batch_norm_backward
// of x with d_residual (the gradient of bn_z(z)), then batch_norm_backward of z from it.
// `workspace` holds 2 * batch_norm_workspace_bytes(shape) bytes. x_statistics and z_statistics
// as batch_norm_forward_training's, each optional.
DPBENCH_ENQUEUES(void, batch_norm_pair_forward_training,
                 (const Tensor4& shape, const void* x, const float* gamma, const float* beta, float* saved_mean,
                  float* saved_inv_std, const void* z, const float* z_gamma, const float* z_beta,
                  float* z_saved_mean, float* z_saved_inv_std, float epsilon, bool relu, void* y, void* workspace,
                  const float* x_statistics = nullptr, const float* z_statistics = nullptr),
                 (shape, x, gamma, beta, saved_mean, saved_inv_std, z, z_gamma, z_beta, z_saved_mean,
                  z_saved_inv_std, epsilon, relu, y, workspace, x_statistics, z_statistics))
// Batch normalisation in inference mode, on given per-channel statistics (the running mean and
// variance) instead of the batch's, with what follows it in a ResNet block fused in:
//   y = act(norm(x) + residual),  norm(v) = gamma * (v - mean) / sqrt(variance + epsilon) + beta,
// residual = 0 (z == nullptr), z, or z_norm(z) (z_norm given); act = max(0, .) with `relu`.
// One pass over x (and z); y may alias x or z.
DPBENCH_ENQUEUES(void, batch_norm_inference,
                 (const Tensor4& shape, const void* x, const InferenceNorm& norm, const void* z,
                  const InferenceNorm* z_norm, bool relu, void* y),
                 (shape, x, norm, z, z_norm, relu, y))

DPBENCH_ENQUEUES(void, pool_forward, (const PoolGeometry& g, const void* x, void* y), (g, x, y))
// dx (g.input, overwritten) from dy (g.output). Max pooling sends each window's gradient to
// the first (lowest h, then w) position holding the maximum; with g.relu_input, then 0 where
// x is not above 0 (bit for bit pool_backward, then relu_backward with y = x).
DPBENCH_ENQUEUES(void, pool_backward, (const PoolGeometry& g, const void* x, const void* y, const void* dy, void* dx),
                 (g, x, y, dy, dx))

// Inverted dropout over n elements:
//   keep_i = dropout_keeps(seed, *step, first_index + i, rate) (engine/backend/counter_random.h),
//   y = keep ? x * dropout_keep_scale(rate) : 0,  the scale 1 / (1 - rate) rounded to float once
// (engine/backend/counter_random.h holds the rule: dropout_keeps, dropout_keep_scale).
// `first_index` places the buffer in the global batch (replica r's first sample times the
// elements per sample), so a sample's mask does not depend on which replica trains it. `step`
// points to device memory (the runner's step counter), so a replayed CUDA graph draws a fresh
// mask every step; backward regenerates the mask instead of storing it.
DPBENCH_ENQUEUES(void, dropout_forward,
                 (DataType type, const void* x, void* y, size_t n, float rate, uint64_t seed, uint64_t first_index,
                  const int32_t* step),
                 (type, x, y, n, rate, seed, first_index, step))
DPBENCH_ENQUEUES(void, dropout_backward,
                 (DataType type, const void* dy, void* dx, size_t n, float rate, uint64_t seed,
                  uint64_t first_index, const int32_t* step),
                 (type, dy, dx, n, rate, seed, first_index, step))

// Channel slices, for concatenating branches (same n, h, w and format on both sides):
//   copy_into_channels:  dst[:, offset : offset + src.c] = src
//   copy_from_channels:  dst = src[:, offset : offset + dst.c]
DPBENCH_ENQUEUES(void, copy_into_channels,
                 (const Tensor4& src_shape, const void* src, const Tensor4& dst_shape, void* dst, int channel_offset),
                 (src_shape, src, dst_shape, dst, channel_offset))
DPBENCH_ENQUEUES(void, copy_from_channels,
                 (const Tensor4& src_shape, const void* src, int channel_offset, const Tensor4& dst_shape, void* dst),
                 (src_shape, src, channel_offset, dst_shape, dst))

// ---- Transformer ops (shapes in engine/backend/attention_geometry.h) ------------------------------
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
// With then.gelu (GPT-2's MLP): v = y + bias rounded to `type` as above, y = v (the
// pre-activation gelu_backward reads) and then.activated (rows, cols; of `type`; not y) =
// gelu(v), the tanh form of engine/backend/gelu.h computed in fp32 from the rounded v and rounded
// to `type` once. GELU takes no ReLU, dropout or residual; check_row_bias_epilogue (backend.h)
// says what else each backend refuses.
DPBENCH_ENQUEUES(void, add_row_bias,
                 (DataType type, void* y, const float* bias, int rows, int cols, const RowBiasEpilogue& then),
                 (type, y, bias, rows, cols, then))
// Backward of dropout(ReLU(x)) (the feed-forward block's inner activation) from its forward
// output y: dx = y > 0 ? dy * dropout_keep_scale(rate) : 0. An output above 0 is one the ReLU
// passed and the dropout kept, so no mask is drawn; equal, bit for bit, to dropout_backward
// then relu_backward on y. dx may alias dy.
DPBENCH_ENQUEUES(void, relu_dropout_backward,
                 (DataType type, const void* y, const void* dy, void* dx, size_t n, float rate),
                 (type, y, dy, dx, n, rate))
// Backward of add_row_bias's GELU: dx = dy * gelu'(x) (engine/backend/gelu.h), x the
// pre-activation add_row_bias left in y. x, dy, dx of `type`, the arithmetic fp32 and dx rounded
// once; dx may alias dy.
DPBENCH_ENQUEUES(void, gelu_backward, (DataType type, const void* x, const void* dy, void* dx, size_t n),
                 (type, x, dy, dx, n))

// Layer normalisation of each row of x (rows, cols) over its cols (biased variance):
//   y = gamma * (x - mean) * inv_std + beta,  inv_std = 1 / sqrt(var + epsilon).
// x, y of `type`; gamma, beta (cols) fp32; saved_mean, saved_inv_std (rows, fp32) written for
// the backward pass. y may not alias x (the backward reads x).
DPBENCH_ENQUEUES(void, layer_norm_forward,
                 (DataType type, const void* x, const float* gamma, const float* beta, int rows, int cols,
                  float epsilon, void* y, float* saved_mean, float* saved_inv_std),
                 (type, x, gamma, beta, rows, cols, epsilon, y, saved_mean, saved_inv_std))
// dx (rows, cols; overwritten) from dy and the forward's x and statistics; dgamma and dbeta
// (cols, fp32) overwritten. x, dy, dx of `type`; dx may alias dy. With `accumulate` the gradient
// is added to what dx holds (a pre-norm block's residual gradient), in fp32 and rounded once;
// dx may then not alias dy. `workspace` holds layer_norm_workspace_bytes(rows, cols) bytes.
DPBENCH_ENQUEUES(void, layer_norm_backward,
                 (DataType type, const void* x, const void* dy, const float* gamma, const float* saved_mean,
                  const float* saved_inv_std, int rows, int cols, void* dx, float* dgamma, float* dbeta,
                  void* workspace, bool accumulate = false),
                 (type, x, dy, gamma, saved_mean, saved_inv_std, rows, cols, dx, dgamma, dbeta, workspace, accumulate))
DPBENCH_QUERY(size_t, layer_norm_workspace_bytes, (int rows, int cols), (rows, cols))

// y (seq_len, batch, dim) = x * scale + PE(t), the sinusoids of "Attention Is All You Need":
// PE(t, 2i) = sin(t / 10000^(2i / dim)), PE(t, 2i + 1) = cos(t / 10000^(2i / dim)). x, y of
// `type`, arithmetic in fp32; y may alias x. (Its backward is convert with the same scale.)
DPBENCH_ENQUEUES(void, add_positional_encoding,
                 (DataType type, const void* x, void* y, int seq_len, int batch, int dim, float scale),
                 (type, x, y, seq_len, batch, dim, scale))

// Multi-head scaled-dot-product attention as engine/backend/attention_geometry.h defines it: o (rows of
// g.model_dim() at g.o_stride) and each query row's log-sum-exp lse (fp32, g.lse_count(), index
// (b * heads + h) * query_len + i). key_lengths: device memory (g.batch values) or nullptr (every
// key real); a row that sees no key gets o = 0. step: the runner's step counter (device memory;
// read only with dropout). o may not overlap q, k or v. `workspace` holds
// attention_workspace_bytes(g) bytes; nothing in it outlives the call.
DPBENCH_ENQUEUES(void, attention_forward,
                 (const AttentionGeometry& g, const void* q, const void* k, const void* v,
                  const int32_t* key_lengths, const int32_t* step, void* o, float* lse, void* workspace),
                 (g, q, k, v, key_lengths, step, o, lse, workspace))
// dq, dk, dv (overwritten; the strides of q, k, v) from d_o and the forward's q, k, v, o, lse and
// masks (the same key_lengths and step). They may be column slices of one buffer, but none may
// overlap the inputs.
DPBENCH_ENQUEUES(void, attention_backward,
                 (const AttentionGeometry& g, const void* q, const void* k, const void* v, const void* o,
                  const void* d_o, const float* lse, const int32_t* key_lengths, const int32_t* step, void* dq,
                  void* dk, void* dv, void* workspace),
                 (g, q, k, v, o, d_o, lse, key_lengths, step, dq, dk, dv, workspace))
DPBENCH_QUERY(size_t, attention_workspace_bytes, (const AttentionGeometry& g), (g))

// ---- bookkeeping -------------------------------------------------------------------------
// history[*cursor] = *value; ++*cursor  (cursor is device memory, history may be host-visible).
// A replayed CUDA graph cannot take a new pointer each step; the cursor files each step's loss
// under its own step instead.
DPBENCH_ENQUEUES(void, append_scalar, (const float* value, float* history, int32_t* cursor), (value, history, cursor))

// ---- timing inside a step (device clocks, so a replayed CUDA graph keeps timing itself) ---
// *slot = the device clock in nanoseconds when the stream reaches this point (%globaltimer on
// cuda, steady_clock on reference).
DPBENCH_ENQUEUES(void, write_timestamp, (int64_t* slot), (slot))
// *total += clock now - *start, in nanoseconds.
DPBENCH_ENQUEUES(void, add_elapsed_since, (const int64_t* start, int64_t* total), (start, total))
// One lap of a stopwatch: *total += now - *clock, then *clock = now (one op where
// add_elapsed_since and write_timestamp would be two).
DPBENCH_ENQUEUES(void, lap, (int64_t* clock, int64_t* total), (clock, total))

// ---- reductions (blocking: they wait for the stream and return to the host) --------------
// Sum of squares accumulated in double. `scratch` holds at least sum_squares_scratch_bytes().
DPBENCH_ENQUEUES(double, sum_squares, (const float* x, size_t n, void* scratch), (x, n, scratch))
DPBENCH_QUERY(size_t, sum_squares_scratch_bytes, () const, ())

#undef DPBENCH_OP
#undef DPBENCH_ENQUEUES
#undef DPBENCH_ENQUEUES_N
#undef DPBENCH_QUERY
#undef DPBENCH_FP32_FORM
