// CountingBackend: what a Device hands out as its ops. It forwards every op to the backend that
// runs it and counts each op that enqueues work on the device's stream (Device::enqueued), so
// that the work a step enqueues is counted where it is issued (Note [counted launches] in
// engine/device.h). Queries (workspace sizes) are forwarded without counting.
#pragma once

#include "engine/backend.h"
#include "engine/device.h"

namespace dpbench {

class CountingBackend final : public Backend {
 public:
  CountingBackend(Backend& inner, Device& device, StreamKind stream)
      : inner_(inner), device_(device), stream_(stream) {}

  BackendKind kind() const override { return inner_.kind(); }
  Backend& implementation() override { return inner_.implementation(); }

  using Backend::bias_gradient;
  using Backend::embedding_backward;
  using Backend::embedding_forward;
  using Backend::fill;
  using Backend::gemm;
  using Backend::lstm_cell_backward;
  using Backend::lstm_cell_forward;
  using Backend::softmax_cross_entropy_rows;

  void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, DataType ab_type,
            const void* a, int lda, const void* b, int ldb, float beta, DataType c_type, void* c,
            int ldc) override {
    counted();
    inner_.gemm(trans_a, trans_b, m, n, k, alpha, ab_type, a, lda, b, ldb, beta, c_type, c, ldc);
  }
  void add_bias(float* y, const float* bias, int rows, int cols) override {
    counted();
    inner_.add_bias(y, bias, rows, cols);
  }
  void bias_gradient(DataType dy_type, const void* dy, float* dbias, int rows, int cols) override {
    counted();
    inner_.bias_gradient(dy_type, dy, dbias, rows, cols);
  }
  void relu_forward(DataType type, const void* x, void* y, size_t n) override {
    counted();
    inner_.relu_forward(type, x, y, n);
  }
  void relu_backward(DataType type, const void* y, const void* dy, void* dx, size_t n) override {
    counted();
    inner_.relu_backward(type, y, dy, dx, n);
  }
  void fill(DataType type, void* x, size_t n, float value) override {
    counted();
    inner_.fill(type, x, n, value);
  }
  void scale(float* x, size_t n, float alpha) override {
    counted();
    inner_.scale(x, n, alpha);
  }
  void axpy(float alpha, const float* x, float* y, size_t n) override {
    counted();
    inner_.axpy(alpha, x, y, n);
  }
  void add_tensors(DataType type, const void* a, const void* b, void* y, size_t n, bool relu) override {
    counted();
    inner_.add_tensors(type, a, b, y, n, relu);
  }
  void add_tensors_backward(DataType type, const void* y, const void* dy, bool relu, void* da, void* db,
                            size_t n) override {
    counted();
    inner_.add_tensors_backward(type, y, dy, relu, da, db, n);
  }
  void convert(DataType src_type, const void* src, DataType dst_type, void* dst, size_t n,
               float scale) override {
    counted();
    inner_.convert(src_type, src, dst_type, dst, n, scale);
  }
  void softmax_cross_entropy(const float* logits, const int32_t* labels, int rows, int classes,
                             float* row_losses, float* loss_out, float* dlogits,
                             const float* loss_scale) override {
    counted();
    inner_.softmax_cross_entropy(logits, labels, rows, classes, row_losses, loss_out, dlogits, loss_scale);
  }
  void softmax_cross_entropy_rows(DataType logits_type, const void* logits, const int32_t* labels, int rows,
                                  int classes, float gradient_scale, float* row_losses, void* dlogits,
                                  const float* loss_scale, const float* row_weights, int row_stride) override {
    counted();
    inner_.softmax_cross_entropy_rows(logits_type, logits, labels, rows, classes, gradient_scale, row_losses,
                                      dlogits, loss_scale, row_weights, row_stride);
  }
  void sum_scaled(const float* x, size_t n, float scale, float* out) override {
    counted();
    inner_.sum_scaled(x, n, scale, out);
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    counted();
    inner_.copy(dst, src, bytes);
  }
  void embedding_forward(DataType type, const void* table, const int32_t* ids, size_t n, int dim,
                         void* y) override {
    counted();
    inner_.embedding_forward(type, table, ids, n, dim, y);
  }
  void embedding_backward(const int32_t* ids, DataType dy_type, const void* dy, size_t n, int dim,
                          float* dtable) override {
    counted();
    inner_.embedding_backward(ids, dy_type, dy, n, dim, dtable);
  }
  void embedding_touched_rows(const int32_t* ids, size_t n, int vocab, int32_t* rows, int32_t* count,
                              void* workspace) override {
    counted();
    inner_.embedding_touched_rows(ids, n, vocab, rows, count, workspace);
  }
  size_t embedding_touched_rows_workspace_bytes(size_t n, int vocab) override {
    return inner_.embedding_touched_rows_workspace_bytes(n, vocab);
  }
  void gather_rows(const float* table, int dim, const int32_t* rows, const int32_t* count, size_t capacity,
                   int32_t* rows_out, float* values_out) override {
    counted();
    inner_.gather_rows(table, dim, rows, count, capacity, rows_out, values_out);
  }
  void lstm_forward(const RnnGeometry& g, const void* x, const void* hx, const void* cx,
                    const void* weights, void* y, void* hy, void* cy, void* reserve,
                    void* workspace) override {
    counted();
    inner_.lstm_forward(g, x, hx, cx, weights, y, hy, cy, reserve, workspace);
  }
  void lstm_backward_data(const RnnGeometry& g, const void* y, const void* dy, const void* dhy,
                          const void* dcy, const void* weights, const void* hx, const void* cx, void* dx,
                          void* dhx, void* dcx, void* reserve, void* workspace) override {
    counted();
    inner_.lstm_backward_data(g, y, dy, dhy, dcy, weights, hx, cx, dx, dhx, dcx, reserve, workspace);
  }
  void lstm_backward_weights(const RnnGeometry& g, const void* x, const void* hx, const void* y,
                             float* dweights, void* reserve, void* workspace) override {
    counted();
    inner_.lstm_backward_weights(g, x, hx, y, dweights, reserve, workspace);
  }
  size_t lstm_workspace_bytes(const RnnGeometry& g) override {
    return inner_.lstm_workspace_bytes(g);
  }
  size_t lstm_reserve_bytes(const RnnGeometry& g) override {
    return inner_.lstm_reserve_bytes(g);
  }
  void lstm_cell_forward(DataType type, int batch, int hidden, void* gates, const void* bias_input,
                         const void* bias_recurrent, const void* c_prev, void* c, void* h) override {
    counted();
    inner_.lstm_cell_forward(type, batch, hidden, gates, bias_input, bias_recurrent, c_prev, c, h);
  }
  void lstm_cell_backward(DataType type, int batch, int hidden, const void* gates, const void* c_prev,
                          const void* c, const void* dh, const void* dc, void* dgates,
                          void* dc_prev) override {
    counted();
    inner_.lstm_cell_backward(type, batch, hidden, gates, c_prev, c, dh, dc, dgates, dc_prev);
  }
  void sgd_update(float* params, const float* grads, size_t n, float learning_rate,
                  const UpdateExtras& extras) override {
    counted();
    inner_.sgd_update(params, grads, n, learning_rate, extras);
  }
  void momentum_update(float* params, const float* grads, float* velocity, size_t n, float learning_rate,
                       float momentum, const UpdateExtras& extras) override {
    counted();
    inner_.momentum_update(params, grads, velocity, n, learning_rate, momentum, extras);
  }
  void adam_update(float* params, const float* grads, float* m, float* v, size_t n, float learning_rate,
                   float beta1, float beta2, float epsilon, int64_t step,
                   const UpdateExtras& extras) override {
    counted();
    inner_.adam_update(params, grads, m, v, n, learning_rate, beta1, beta2, epsilon, step, extras);
  }
  void find_non_finite(const float* x, size_t n, LossScaleState* state) override {
    counted();
    inner_.find_non_finite(x, n, state);
  }
  void update_loss_scale(LossScaleState* state, int increase_every) override {
    counted();
    inner_.update_loss_scale(state, increase_every);
  }
  void fill_uniform_by_index(float* x, size_t n, uint64_t seed, uint64_t stream, uint64_t first_index,
                             float lo, float hi) override {
    counted();
    inner_.fill_uniform_by_index(x, n, seed, stream, first_index, lo, hi);
  }
  void fill_labels_by_index(int32_t* labels, size_t n, uint64_t seed, uint64_t stream, uint64_t first_index,
                            int classes) override {
    counted();
    inner_.fill_labels_by_index(labels, n, seed, stream, first_index, classes);
  }
  void conv2d_forward(const ConvGeometry& g, const void* x, const void* w, void* y, void* workspace,
                      size_t workspace_bytes) override {
    counted();
    inner_.conv2d_forward(g, x, w, y, workspace, workspace_bytes);
  }
  void conv2d_backward_data(const ConvGeometry& g, const void* dy, const void* w, void* dx, void* workspace,
                            size_t workspace_bytes, bool accumulate) override {
    counted();
    inner_.conv2d_backward_data(g, dy, w, dx, workspace, workspace_bytes, accumulate);
  }
  void conv2d_backward_filter(const ConvGeometry& g, const void* x, const void* dy, void* dw, void* workspace,
                              size_t workspace_bytes) override {
    counted();
    inner_.conv2d_backward_filter(g, x, dy, dw, workspace, workspace_bytes);
  }
  size_t conv2d_workspace_bytes(const ConvGeometry& g) override {
    return inner_.conv2d_workspace_bytes(g);
  }
  void conv2d_forward_bias(const ConvGeometry& g, const void* x, const void* w, const float* bias, bool relu,
                           void* y, void* workspace, size_t workspace_bytes) override {
    counted();
    if (!inner_.conv2d_forward_bias_fused(g, relu)) counted();  // the convolution, then the bias pass
    inner_.conv2d_forward_bias(g, x, w, bias, relu, y, workspace, workspace_bytes);
  }
  size_t conv2d_bias_workspace_bytes(const ConvGeometry& g, bool relu) override {
    return inner_.conv2d_bias_workspace_bytes(g, relu);
  }
  bool conv2d_forward_bias_fused(const ConvGeometry& g, bool relu) override {
    return inner_.conv2d_forward_bias_fused(g, relu);
  }
  size_t conv2d_statistics_workspace_bytes(const ConvGeometry& g) override {
    return inner_.conv2d_statistics_workspace_bytes(g);
  }
  bool conv2d_forward_statistics_fused(const ConvGeometry& g) override {
    return inner_.conv2d_forward_statistics_fused(g);
  }
  void conv2d_forward_statistics(const ConvGeometry& g, const void* x, const void* w, void* y, float* statistics,
                                 void* workspace, size_t workspace_bytes) override {
    counted();
    inner_.conv2d_forward_statistics(g, x, w, y, statistics, workspace, workspace_bytes);
  }
  void add_channel_bias(const Tensor4& shape, void* y, const float* bias, bool relu) override {
    counted();
    inner_.add_channel_bias(shape, y, bias, relu);
  }
  void channel_bias_gradient(const Tensor4& shape, const void* y, void* dy, float* dbias, bool relu,
                             void* workspace) override {
    counted();
    inner_.channel_bias_gradient(shape, y, dy, dbias, relu, workspace);
  }
  size_t channel_bias_workspace_bytes(const Tensor4& shape) override {
    return inner_.channel_bias_workspace_bytes(shape);
  }
  void batch_norm_forward_training(const Tensor4& shape, const void* x, const float* gamma, const float* beta,
                                   float epsilon, bool relu, void* y, float* saved_mean, float* saved_inv_std,
                                   void* workspace, const void* residual,
                                   const float* x_statistics = nullptr) override {
    counted();
    inner_.batch_norm_forward_training(shape, x, gamma, beta, epsilon, relu, y, saved_mean, saved_inv_std,
                                       workspace, residual, x_statistics);
  }
  void batch_norm_backward(const Tensor4& shape, const void* x, const void* y, const void* dy,
                           const float* gamma, const float* saved_mean, const float* saved_inv_std,
                           float epsilon, bool relu, void* dx, float* dgamma, float* dbeta,
                           void* workspace, void* d_residual) override {
    counted();
    inner_.batch_norm_backward(shape, x, y, dy, gamma, saved_mean, saved_inv_std, epsilon, relu, dx, dgamma,
                               dbeta, workspace, d_residual);
  }
  size_t batch_norm_workspace_bytes(const Tensor4& shape) override {
    return inner_.batch_norm_workspace_bytes(shape);
  }
  void batch_norm_pair_forward_training(const Tensor4& shape, const void* x, const float* gamma, const float* beta,
                                        float* saved_mean, float* saved_inv_std, const void* z, const float* z_gamma,
                                        const float* z_beta, float* z_saved_mean, float* z_saved_inv_std,
                                        float epsilon, bool relu, void* y, void* workspace,
                                        const float* x_statistics = nullptr,
                                        const float* z_statistics = nullptr) override {
    counted();
    inner_.batch_norm_pair_forward_training(shape, x, gamma, beta, saved_mean, saved_inv_std, z, z_gamma, z_beta,
                                            z_saved_mean, z_saved_inv_std, epsilon, relu, y, workspace,
                                            x_statistics, z_statistics);
  }
  void batch_norm_inference(const Tensor4& shape, const void* x, const InferenceNorm& norm, const void* z,
                            const InferenceNorm* z_norm, bool relu, void* y) override {
    counted();
    inner_.batch_norm_inference(shape, x, norm, z, z_norm, relu, y);
  }
  void pool_forward(const PoolGeometry& g, const void* x, void* y) override {
    counted();
    inner_.pool_forward(g, x, y);
  }
  void pool_backward(const PoolGeometry& g, const void* x, const void* y, const void* dy, void* dx) override {
    counted();
    inner_.pool_backward(g, x, y, dy, dx);
  }
  void add_row_bias(DataType type, void* y, const float* bias, int rows, int cols,
                    const RowBiasEpilogue& then) override {
    counted();
    inner_.add_row_bias(type, y, bias, rows, cols, then);
  }
  void relu_dropout_backward(DataType type, const void* y, const void* dy, void* dx, size_t n,
                             float rate) override {
    counted();
    inner_.relu_dropout_backward(type, y, dy, dx, n, rate);
  }
  void layer_norm_forward(DataType type, const void* x, const float* gamma, const float* beta, int rows,
                          int cols, float epsilon, void* y, float* saved_mean, float* saved_inv_std) override {
    counted();
    inner_.layer_norm_forward(type, x, gamma, beta, rows, cols, epsilon, y, saved_mean, saved_inv_std);
  }
  void layer_norm_backward(DataType type, const void* x, const void* dy, const float* gamma,
                           const float* saved_mean, const float* saved_inv_std, int rows, int cols, void* dx,
                           float* dgamma, float* dbeta, void* workspace) override {
    counted();
    inner_.layer_norm_backward(type, x, dy, gamma, saved_mean, saved_inv_std, rows, cols, dx, dgamma, dbeta,
                               workspace);
  }
  size_t layer_norm_workspace_bytes(int rows, int cols) override {
    return inner_.layer_norm_workspace_bytes(rows, cols);
  }
  void add_positional_encoding(DataType type, const void* x, void* y, int seq_len, int batch, int dim,
                               float scale) override {
    counted();
    inner_.add_positional_encoding(type, x, y, seq_len, batch, dim, scale);
  }
  void attention_forward(const AttentionGeometry& g, const void* q, const void* k, const void* v,
                         const int32_t* key_lengths, const int32_t* step, void* o, float* lse,
                         void* workspace) override {
    counted();
    inner_.attention_forward(g, q, k, v, key_lengths, step, o, lse, workspace);
  }
  void attention_backward(const AttentionGeometry& g, const void* q, const void* k, const void* v, const void* o,
                          const void* d_o, const float* lse, const int32_t* key_lengths, const int32_t* step,
                          void* dq, void* dk, void* dv, void* workspace) override {
    counted();
    inner_.attention_backward(g, q, k, v, o, d_o, lse, key_lengths, step, dq, dk, dv, workspace);
  }
  size_t attention_workspace_bytes(const AttentionGeometry& g) override {
    return inner_.attention_workspace_bytes(g);
  }
  void dropout_forward(DataType type, const void* x, void* y, size_t n, float rate, uint64_t seed,
                       uint64_t first_index, const int32_t* step) override {
    counted();
    inner_.dropout_forward(type, x, y, n, rate, seed, first_index, step);
  }
  void dropout_backward(DataType type, const void* dy, void* dx, size_t n, float rate, uint64_t seed,
                        uint64_t first_index, const int32_t* step) override {
    counted();
    inner_.dropout_backward(type, dy, dx, n, rate, seed, first_index, step);
  }
  void copy_into_channels(const Tensor4& src_shape, const void* src, const Tensor4& dst_shape, void* dst,
                          int channel_offset) override {
    counted();
    inner_.copy_into_channels(src_shape, src, dst_shape, dst, channel_offset);
  }
  void copy_from_channels(const Tensor4& src_shape, const void* src, int channel_offset,
                          const Tensor4& dst_shape, void* dst) override {
    counted();
    inner_.copy_from_channels(src_shape, src, channel_offset, dst_shape, dst);
  }
  void append_scalar(const float* value, float* history, int32_t* cursor) override {
    counted();
    inner_.append_scalar(value, history, cursor);
  }
  void write_timestamp(int64_t* slot) override {
    counted();
    inner_.write_timestamp(slot);
  }
  void add_elapsed_since(const int64_t* start, int64_t* total) override {
    counted();
    inner_.add_elapsed_since(start, total);
  }
  void lap(int64_t* clock, int64_t* total) override {
    counted();
    inner_.lap(clock, total);
  }
  double sum_squares(const float* x, size_t n, void* scratch) override {
    counted();
    return inner_.sum_squares(x, n, scratch);
  }
  size_t sum_squares_scratch_bytes() const override {
    return inner_.sum_squares_scratch_bytes();
  }

 private:
  void counted() { device_.count_enqueued(stream_); }

  Backend& inner_;
  Device& device_;
  StreamKind stream_;
};

}  // namespace dpbench
