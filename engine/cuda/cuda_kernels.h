// Launchers of dpbench's own CUDA kernels (the ops no library provides). Each takes the stream
// to enqueue on, launches asynchronously and checks the launch. Pointers are device pointers
// (or host-mapped pointers, where a comment says so). Used by CudaBackend only. A DataType
// argument (or a Tensor4's type) says what the void* buffers hold; arithmetic is fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/backend/attention_geometry.h"
#include "engine/backend/backend.h"
#include "engine/backend/cnn_geometry.h"
#include "engine/data_type.h"

namespace dpbench::cuda_kernels {

// Partial sums written by the first stage of sum_squares: the size of its scratch, in doubles.
constexpr int kSumSquaresMaxPartials = 1024;

// ---- element-wise (cuda_kernels_elementwise.cu) ---------------------------------------------
void launch_add_bias(cudaStream_t stream, float* y, const float* bias, int rows, int cols);
void launch_relu_forward(cudaStream_t stream, DataType type, const void* x, void* y, size_t n);
// dx = y > 0 ? dy * scale : 0: relu_backward (scale 1), relu_dropout_backward (the keep scale).
void launch_relu_backward(cudaStream_t stream, DataType type, const void* y, const void* dy,
                          void* dx, size_t n, float scale);
// dx = dy * gelu'(x) (Backend::gelu_backward); dx may alias dy.
void launch_gelu_backward(cudaStream_t stream, DataType type, const void* x, const void* dy, void* dx, size_t n);
// x[0, n) = value rounded to `type`.
void launch_fill(cudaStream_t stream, DataType type, void* x, size_t n, float value);
void launch_scale(cudaStream_t stream, float* x, size_t n, float alpha);
void launch_axpy(cudaStream_t stream, float alpha, const float* x, float* y, size_t n);
void launch_add_tensors(cudaStream_t stream, DataType type, const void* a, const void* b, void* y,
                        size_t n, bool relu);
void launch_add_tensors_backward(cudaStream_t stream, DataType type, const void* y, const void* dy,
                                 bool relu, void* da, void* db, size_t n);
// dst = src * scale, converted (Backend::convert).
void launch_convert(cudaStream_t stream, DataType src_type, const void* src, DataType dst_type,
                    void* dst, size_t n, float scale);
void launch_fill_uniform_by_index(cudaStream_t stream, float* x, size_t n, uint64_t seed,
                                  uint64_t random_stream, uint64_t first_index, float lo, float hi);
void launch_fill_labels_by_index(cudaStream_t stream, int32_t* labels, size_t n, uint64_t seed,
                                 uint64_t random_stream, uint64_t first_index, int classes);

// history[*cursor] = *value; ++*cursor (one thread; history may be host-mapped).
void launch_append_scalar(cudaStream_t stream, const float* value, float* history, int32_t* cursor);
void launch_write_timestamp(cudaStream_t stream, int64_t* slot);
void launch_add_elapsed_since(cudaStream_t stream, const int64_t* start, int64_t* total);
void launch_lap(cudaStream_t stream, int64_t* clock, int64_t* total);

// ---- reductions (cuda_kernels_reduce.cu); deterministic: no atomics, fixed summation order --
// dbias (cols, fp32) = column sums of dy (rows, cols) of `dy_type`, summed in fp32: rows split
// into parts fixed by the shape, then the parts added in a fixed order (Note [column sums in
// parts] in cuda_kernels_reduce.cu). `scratch` holds bias_gradient_scratch_floats() floats for
// the parts' sums (a fixed amount, whatever the shape); nullptr sums each column in one part.
void launch_bias_gradient(cudaStream_t stream, DataType dy_type, const void* dy, float* dbias,
                          int rows, int cols, float* scratch);
size_t bias_gradient_scratch_floats();
// Stage 2 of a column sum in parts: for each of `count` (at most kMaxColumnPartsBatch) entries,
// out[c] = the sum over p < parts of partials[p * cols + c], in the fixed order of Note [column
// sums in parts]; in fp32, or in double rounded once (`in_double`).
struct ColumnParts {
  const float* partials;  // (parts, cols)
  float* out;             // (cols)
};
constexpr int kMaxColumnPartsBatch = 2;
void launch_sum_column_parts(cudaStream_t stream, const ColumnParts* sums, int count, size_t parts,
                             int cols, bool in_double);
// Leaves the sum of squares of x in scratch[0]; scratch holds kSumSquaresMaxPartials doubles.
void launch_sum_squares(cudaStream_t stream, const float* x, size_t n, double* scratch);
// Loss scaling (Backend::find_non_finite, Backend::update_loss_scale).
void launch_find_non_finite(cudaStream_t stream, const float* x, size_t n, LossScaleState* state);
void launch_update_loss_scale(cudaStream_t stream, LossScaleState* state, int increase_every);

// ---- loss (cuda_kernels_loss.cu) -------------------------------------------------------------
// loss_out may be host-mapped memory.
void launch_softmax_cross_entropy(cudaStream_t stream, const float* logits, const int32_t* labels,
                                  int rows, int classes, float* row_losses, float* loss_out,
                                  float* dlogits, const float* loss_scale);

// ---- optimizers (cuda_kernels_optimizer.cu); one fused pass over the range --------------------
void launch_sgd_update(cudaStream_t stream, float* params, const float* grads, size_t n,
                       float learning_rate, const UpdateExtras& extras);
void launch_momentum_update(cudaStream_t stream, float* params, const float* grads,
                            float* velocity, size_t n, float learning_rate, float momentum,
                            const UpdateExtras& extras);
// The bias corrections 1 - beta^step arrive computed on the host (in double), unless
// extras.step_from_zero is set: then each block computes them on the device from
// t = *step_from_zero + 1 (also in double) and the two arguments are ignored, so a replayed CUDA
// graph corrects every step by its own number. `decay` multiplies the parameters before the
// step (AdamW's 1 - lr * weight_decay; 1 for Adam).
void launch_adam_update(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                        size_t n, float learning_rate, float beta1, float beta2, float epsilon,
                        float first_moment_correction, float second_moment_correction, float decay,
                        const UpdateExtras& extras);

// ---- sequence ops (cuda_kernels_sequence.cu); Backend's sequence-op semantics ----------------
// Row-wise softmax cross-entropy (Backend::softmax_cross_entropy_rows): one block per row, the
// row held in shared memory where it fits (read once and written once), else read twice (an
// online max-and-sum pass, then the gradient pass).
// logits and dlogits hold `type`, row_stride elements apart; the statistics and row_losses are fp32.
void launch_softmax_cross_entropy_rows(cudaStream_t stream, DataType type, const void* logits,
                                       const int32_t* labels, int rows, int classes, int row_stride,
                                       float gradient_scale, float* row_losses, void* dlogits,
                                       const float* loss_scale, const float* row_weights);
// out[0] = scale * sum of x[0, n): one block, in double, in an order that depends on n alone.
void launch_sum_scaled(cudaStream_t stream, const float* x, size_t n, float scale, float* out);
// y (n, dim), row i = table[ids[i]], both of `type` (rows copied as they are stored); ids must
// lie in [0, vocab).
void launch_embedding_forward(cudaStream_t stream, DataType type, const void* table,
                              const int32_t* ids, size_t n, int dim, void* y);
// dtable[ids[i]] += dy[i] (n, dim), dy of `dy_type` widened to the fp32 dtable, by atomic adds:
// rows shared by several ids sum in no fixed order.
void launch_embedding_backward(cudaStream_t stream, const int32_t* ids, DataType dy_type,
                               const void* dy, size_t n, int dim, float* dtable);
// The same sum in a fixed order (--deterministic): ids sorted stably (CUB), then each distinct
// id's dy rows summed in position order (in fp32) and added to its row once. `workspace` holds
// embedding_backward_sorted_workspace_bytes(n).
void launch_embedding_backward_sorted(cudaStream_t stream, const int32_t* ids, DataType dy_type,
                                      const void* dy, size_t n, int dim, float* dtable,
                                      void* workspace);
size_t embedding_backward_sorted_workspace_bytes(size_t n);
// The distinct ids in [0, vocab) among ids[0, n), ascending, into rows[0, *count): a flag per
// vocabulary row in the workspace, then a compaction of the flagged row numbers (CUB).
void launch_embedding_touched_rows(cudaStream_t stream, const int32_t* ids, size_t n, int vocab,
                                   int32_t* rows, int32_t* count, void* workspace);
size_t embedding_touched_rows_workspace_bytes(int vocab);
// Backend::gather_rows: one row of (rows_out, values_out) per threadIdx.y; *count is read on
// the device, so the padding past it is written without the host.
void launch_gather_rows(cudaStream_t stream, const float* table, int dim, const int32_t* rows,
                        const int32_t* count, size_t capacity, int32_t* rows_out, float* values_out);

// ---- LSTM (cuda_kernels_lstm.cu) ------------------------------------------------------------
// One LSTM time step (Backend::lstm_cell_forward / lstm_cell_backward), every buffer of `type`:
// one thread per (b, h) (per 16 bytes of consecutive h where rows allow), all four gates of it
// in the thread.
void launch_lstm_cell_forward(cudaStream_t stream, DataType type, int batch, int hidden,
                              void* gates, const void* bias_input, const void* bias_recurrent,
                              const void* c_prev, void* c, void* h);
void launch_lstm_cell_backward(cudaStream_t stream, DataType type, int batch, int hidden,
                               const void* gates, const void* c_prev, const void* c,
                               const void* dh, const void* dc, void* dgates, void* dc_prev);
// A run of `count` elements at `canonical` in the canonical LSTM weight layout (rnn_geometry.h)
// and at `packed` in cuDNN's weight space (offsets in elements of the weights' type).
struct WeightBlock {
  size_t canonical = 0;
  size_t packed = 0;
  size_t count = 0;
};
// packed[block.packed + i] = canonical[block.canonical + i] for every block (device table of
// block_count entries, none longer than max_count), both of `type`.
void launch_pack_weights(cudaStream_t stream, DataType type, const WeightBlock* blocks,
                         int block_count, size_t max_count, const void* canonical, void* packed);
// canonical[block.canonical + i] += packed[block.packed + i] for every block: packed holds
// `packed_type` (cuDNN's weight gradients), canonical is the fp32 gradient.
void launch_add_unpacked_weights(cudaStream_t stream, DataType packed_type,
                                 const WeightBlock* blocks, int block_count, size_t max_count,
                                 const void* packed, float* canonical);

// ---- persistent LSTM (cuda_kernels_persistent_lstm.cu, Note [persistent LSTM]) -------------
// One direction of one layer over the whole sequence, in one launch: the recurrent weights stay
// in shared memory, each block owns 16 batch rows from the first step to the last. 16-bit data
// (`type` fp16 or bf16) and 32, 64 or 128 hidden units (persistent_lstm_supports).
bool persistent_lstm_supports(DataType type, int hidden);
struct PersistentLstmForward {
  int seq_len = 0, batch = 0, hidden = 0;   // T, B, H
  const float* input_projection = nullptr;  // (T, B, 4H) fp32: x_t W^T, without biases
  const void* recurrent_weights = nullptr;  // R (4H, H), gates i, f, g, o
  const void* bias_input = nullptr;         // bW (4H)
  const void* bias_recurrent = nullptr;     // bR (4H)
  const void* hx = nullptr;                 // (B, H); nullptr: zeros
  const void* cx = nullptr;                 // (B, H); nullptr: zeros
  void* y = nullptr;                        // (T, B, H)
  void* hy = nullptr;                       // (B, H); nullptr: not wanted
  void* cy = nullptr;                       // (B, H); nullptr: not wanted
  void* gates = nullptr;                    // (T, B, 4H): the activations i, f, g, o, for backward
  float* cell = nullptr;                    // (T + 1, B, H) fp32: c_{-1} (cx), c_0 .. c_{T-1}
};
void launch_persistent_lstm_forward(cudaStream_t stream, DataType type, const PersistentLstmForward& args);
struct PersistentLstmBackward {
  int seq_len = 0, batch = 0, hidden = 0;
  const void* recurrent_weights = nullptr;  // R (4H, H)
  void* gates = nullptr;     // in: forward's activations; out: the pre-activation gradients
  const float* cell = nullptr;              // forward's (T + 1, B, H)
  const void* dh_in = nullptr;              // (T, B, H): dL/dy from above; nullptr: zeros
  const void* dhy = nullptr;                // (B, H); nullptr: zeros
  const void* dcy = nullptr;                // (B, H); nullptr: zeros
  void* dhx = nullptr;                      // (B, H); nullptr: not wanted
  void* dcx = nullptr;                      // (B, H); nullptr: not wanted
};
void launch_persistent_lstm_backward(cudaStream_t stream, DataType type, const PersistentLstmBackward& args);

// ---- image ops (cuda_kernels_cnn.cu); the rest of the image ops are cuDNN calls -------------
// A 4-D tensor seen as `outer` blocks of (channels x inner): NCHW is outer = n, inner = h * w;
// NHWC is outer = n * h * w, inner = 1. Element (o, c, i) lies at (o * channels + c) * inner + i.
struct ChannelLayout {
  size_t outer = 0;
  int channels = 0;
  size_t inner = 0;
};
// y += bias (channels) per channel, then max(0, .) when relu.
void launch_add_channel_bias(cudaStream_t stream, DataType type, void* y, const float* bias,
                             const ChannelLayout& layout, bool relu);
// dbias (channels) = sum of dy over outer and inner, deterministic (fixed partials, fixed order).
// With relu, dy is first set to 0 where y <= 0, in place. workspace: channel_sum_workspace_bytes.
void launch_channel_bias_gradient(cudaStream_t stream, DataType type, const void* y, void* dy,
                                  float* dbias, bool relu, const ChannelLayout& layout,
                                  float* workspace);
size_t channel_sum_workspace_bytes(const ChannelLayout& layout);
// A pooling's geometry for its kernels, sizes as unsigned so the kernels index in 32 bits
// (each dimension and n*h*w*c fit: checked by the caller).
struct PoolShape {
  unsigned n = 0, c = 0, in_h = 0, in_w = 0;
  int out_h = 0, out_w = 0, window_h = 0, window_w = 0, stride_h = 0, stride_w = 0, pad_h = 0, pad_w = 0;
  bool include_padding = false;  // average pooling's divisor: the whole window, or its part inside
  bool relu_input = false;  // PoolGeometry::relu_input: every backward kernel masks dx by x > 0
};
// Windows that tile the input exactly (stride == window, no padding; VGG's 2x2/2).
bool pool_tiles_exactly(const PoolShape& shape);
// dx = the gradient of max (`max`) or average pooling, as the reference computes it, bit for bit:
//   tiled:    max pooling whose windows tile the input exactly, one thread per window (each
//             window's dy sent to its first maximum); throws RuntimeError for other windows or modes;
//   gather:   any windows, one thread per input element gathering from the windows that hold it
//             (max pooling rescans each window);
//   two_pass: max pooling with at most 255 positions in a window (max_pool_positions_fit): one
//             pass writes each window's first maximum's position into `positions`
//             (max_pool_positions_bytes), then the gather reads those instead of rescanning.
enum class PoolBackwardKernel { tiled, gather, two_pass };
void launch_pool_backward(cudaStream_t stream, DataType type, const void* x, const void* dy, void* dx,
                          const PoolShape& shape, bool nhwc, PoolBackwardKernel kernel, bool max,
                          uint8_t* positions = nullptr);
size_t max_pool_positions_bytes(const PoolShape& shape);
bool max_pool_positions_fit(const PoolShape& shape);
// y = max (`max`) or average pooling of x, as the reference computes it, bit for bit; every
// n*c*h*w of x and y must fit in 31 bits.
void launch_pool_forward(cudaStream_t stream, DataType type, const void* x, void* y, const PoolShape& shape,
                         bool nhwc, bool max);
// Inverted dropout, forward (in = x) or backward (in = dy): see Backend::dropout_forward. `step`
// is read on the device. out may alias in.
void launch_dropout(cudaStream_t stream, DataType type, const void* in, void* out, size_t n,
                    float rate, uint64_t seed, uint64_t first_index, const int32_t* step);
// `rows` rows of `row_length` elements of `element_bytes` each from src (rows `src_stride`
// elements apart) to dst (`dst_stride` apart): a channel slice in either layout.
void launch_copy_rows(cudaStream_t stream, const void* src, size_t src_stride, void* dst,
                      size_t dst_stride, size_t row_length, size_t rows, size_t element_bytes);

// ---- Transformer ops (cuda_kernels_layer_norm.cu, cuda_kernels_transformer.cu, -------------
// cuda_kernels_attention.cu). Backend's Transformer-op semantics (shapes in
// engine/backend/attention_geometry.h). Deterministic throughout: no atomics, every sum in an order fixed
// by the shape.
// Backend::add_row_bias: a linear layer's bias with its ReLU, dropout and residual add, or its GELU,
// one pass. The caller has checked `then` (check_row_bias_epilogue).
void launch_row_bias_epilogue(cudaStream_t stream, DataType type, void* y, const float* bias, int rows, int cols,
                              const RowBiasEpilogue& then);
// One warp per row; statistics in fp32 by two passes (mean, then squared deviations).
void launch_layer_norm_forward(cudaStream_t stream, DataType type, const void* x, const float* gamma,
                               const float* beta, int rows, int cols, float epsilon, void* y,
                               float* saved_mean, float* saved_inv_std);
// dgamma, dbeta from per-part column sums (parts of rows fixed by the shape) added in a fixed
// order (launch_sum_column_parts); dx one warp per row, which (rows up to 1600 columns) also makes
// the part's sums in the same pass. dx may alias dy, except with `accumulate` (dx += the
// gradient, in fp32 before one rounding). `workspace` holds layer_norm_workspace_bytes(rows, cols).
void launch_layer_norm_backward(cudaStream_t stream, DataType type, const void* x, const void* dy,
                                const float* gamma, const float* saved_mean, const float* saved_inv_std,
                                int rows, int cols, void* dx, float* dgamma, float* dbeta,
                                void* workspace, bool accumulate);
size_t layer_norm_workspace_bytes(int rows, int cols);
// y = x * scale + PE(t) over (seq_len, batch, dim); y may alias x. seq_len <= 65535.
void launch_add_positional_encoding(cudaStream_t stream, DataType type, const void* x, void* y,
                                    int seq_len, int batch, int dim, float scale);
// Flash attention: head_dim in [1, 128]; causal needs query_len == key_len; step is read on the
// device (with dropout only). 16-bit data, and fp32 data when `tf32`, go to the tensor-core
// kernels (Note [tensor-core attention] in cuda_attention_mma.cuh) where the head and strides
// allow 16-byte packs; the rest to the fp32 kernels (Note [attention tiles]).
void launch_attention_forward(cudaStream_t stream, const AttentionGeometry& g, bool tf32,
                              const void* q, const void* k, const void* v,
                              const int32_t* key_lengths, const int32_t* step, void* o, float* lse);
// `workspace` holds attention_workspace_bytes(g): each query row's d_o . o.
void launch_attention_backward(cudaStream_t stream, const AttentionGeometry& g, bool tf32,
                               const void* q, const void* k, const void* v, const void* o,
                               const void* d_o,
                               const float* lse, const int32_t* key_lengths, const int32_t* step,
                               void* dq, void* dk, void* dv, void* workspace);
size_t attention_workspace_bytes(const AttentionGeometry& g);

// ---- batch norm (cuda_kernels_batch_norm.cu); Backend::batch_norm_* semantics -----------------
// Deterministic: the work is split by shape alone (not by the GPU), every reduction has a fixed
// order. The workspace holds per-channel partial results between the passes of one call.
size_t batch_norm_workspace_bytes(const Tensor4& shape);
// x, residual, y, dy, dx and d_residual hold shape.type; everything per channel is fp32, the saved
// arrays batch_norm_saved_floats(c) each. residual and d_residual may be nullptr
// (Backend::batch_norm_forward_training and batch_norm_backward), as may the statistics (a
// convolution's sums: no pass over x or z for them).
void launch_batch_norm_forward(cudaStream_t stream, const Tensor4& shape, const void* x,
                               const void* residual, const float* gamma, const float* beta, float epsilon, bool relu,
                               void* y, float* saved_mean, float* saved_inv_std, void* workspace,
                               const float* x_statistics);
// y = act(bn(x) + bn_z(z)), both on their batch statistics (a ResNet join whose shortcut has its own
// batch norm); `workspace` holds 2 * batch_norm_workspace_bytes(shape).
void launch_batch_norm_pair_forward(cudaStream_t stream, const Tensor4& shape, const void* x, const float* gamma,
                                    const float* beta, float* saved_mean, float* saved_inv_std, const void* z,
                                    const float* z_gamma, const float* z_beta, float* z_saved_mean,
                                    float* z_saved_inv_std, float epsilon, bool relu, void* y, void* workspace,
                                    const float* x_statistics, const float* z_statistics);
// Inference mode from given statistics; needs no workspace.
void launch_batch_norm_inference(cudaStream_t stream, const Tensor4& shape, const void* x, const InferenceNorm& norm,
                                 const void* z, const InferenceNorm* z_norm, bool relu, void* y);
void launch_batch_norm_backward(cudaStream_t stream, const Tensor4& shape, const void* x,
                                const void* y, const void* dy, const float* gamma,
                                const float* saved_mean, const float* saved_inv_std, bool relu,
                                void* dx, void* d_residual, float* dgamma, float* dbeta,
                                void* workspace);

}  // namespace dpbench::cuda_kernels
