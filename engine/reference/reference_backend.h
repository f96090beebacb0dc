// ReferenceBackend: the host oracle. Plain, synchronous C++ for every Backend op, accumulating in
// double where order matters, so [gpu] tests and the CI end-to-end runs have a trustworthy baseline.
// 16-bit buffers (fp16, bf16) are read as floats and every result is rounded once to the storage
// type, which is what the GPU's fp32-inside kernels store. The 16-bit GEMMs, losses and LSTMs are
// the fp32 op on the widened inputs with its outputs rounded (reference_storage.h's Widened).
#pragma once

#include "engine/backend.h"

namespace dpbench {

// Stateless: one instance can serve every stream of a reference device, and since each reference
// device is driven by a single runner thread, "enqueue on a stream" simply means "run now".
class ReferenceBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::reference; }

  // The typed overrides below would otherwise hide Backend's fp32 conveniences.
  using Backend::add_tensors;
  using Backend::add_tensors_backward;
  using Backend::bias_gradient;
  using Backend::embedding_backward;
  using Backend::embedding_forward;
  using Backend::fill;
  using Backend::gemm;
  using Backend::lstm_cell_backward;
  using Backend::lstm_cell_forward;
  using Backend::relu_backward;
  using Backend::relu_forward;
  using Backend::softmax_cross_entropy_rows;

  void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, DataType ab_type,
            const void* a, int lda, const void* b, int ldb, float beta, DataType c_type, void* c,
            int ldc) override;
  void add_bias(float* y, const float* bias, int rows, int cols) override;
  void bias_gradient(DataType dy_type, const void* dy, float* dbias, int rows, int cols) override;

  void relu_forward(DataType type, const void* x, void* y, size_t n) override;
  void relu_backward(DataType type, const void* y, const void* dy, void* dx, size_t n) override;
  void fill(DataType type, void* x, size_t n, float value) override;
  void scale(float* x, size_t n, float alpha) override;
  void axpy(float alpha, const float* x, float* y, size_t n) override;
  void add_tensors(DataType type, const void* a, const void* b, void* y, size_t n,
                   bool relu) override;
  void add_tensors_backward(DataType type, const void* y, const void* dy, bool relu, void* da,
                            void* db, size_t n) override;
  void convert(DataType src_type, const void* src, DataType dst_type, void* dst, size_t n,
               float scale = 1.0f) override;

  void softmax_cross_entropy(const float* logits, const int32_t* labels, int rows, int classes,
                             float* row_losses, float* loss_out, float* dlogits,
                             const float* loss_scale = nullptr) override;

  void sgd_update(float* params, const float* grads, size_t n, float learning_rate,
                  const UpdateExtras& extras = {}) override;
  void momentum_update(float* params, const float* grads, float* velocity, size_t n,
                       float learning_rate, float momentum,
                       const UpdateExtras& extras = {}) override;
  void adam_update(float* params, const float* grads, float* m, float* v, size_t n,
                   float learning_rate, float beta1, float beta2, float epsilon, int64_t step,
                   const UpdateExtras& extras = {}) override;

  void find_non_finite(const float* x, size_t n, LossScaleState* state) override;
  void update_loss_scale(LossScaleState* state, int increase_every) override;

  void fill_uniform_by_index(float* x, size_t n, uint64_t seed, uint64_t stream,
                             uint64_t first_index, float lo, float hi) override;
  void fill_labels_by_index(int32_t* labels, size_t n, uint64_t seed, uint64_t stream,
                            uint64_t first_index, int classes) override;

  // Image ops: engine/{reference,cuda}/..._cnn_ops
  void conv2d_forward(const ConvGeometry& g, const void* x, const void* w, void* y,
                      void* workspace, size_t workspace_bytes) override;
  void conv2d_backward_data(const ConvGeometry& g, const void* dy, const void* w, void* dx,
                            void* workspace, size_t workspace_bytes,
                            bool accumulate = false) override;
  void conv2d_backward_filter(const ConvGeometry& g, const void* x, const void* dy, void* dw,
                              void* workspace, size_t workspace_bytes) override;
  size_t conv2d_workspace_bytes(const ConvGeometry& g) override;
  void conv2d_forward_bias(const ConvGeometry& g, const void* x, const void* w, const float* bias,
                           bool relu, void* y, void* workspace, size_t workspace_bytes) override;
  size_t conv2d_bias_workspace_bytes(const ConvGeometry& g, bool relu) override;
  bool conv2d_forward_bias_fused(const ConvGeometry& g, bool relu) override;
  size_t conv2d_statistics_workspace_bytes(const ConvGeometry& g) override;
  void add_channel_bias(const Tensor4& shape, void* y, const float* bias, bool relu) override;
  void channel_bias_gradient(const Tensor4& shape, const void* y, void* dy, float* dbias,
                             bool relu, void* workspace) override;
  size_t channel_bias_workspace_bytes(const Tensor4& shape) override;
  // Tests only: makes conv2d_forward_statistics_fused true, so a network hands its batch norms
  // the convolutions' sums as it would on a GPU whose cuDNN fuses them (off by default).
  void set_fuse_convolution_statistics(bool fuse) { fuse_convolution_statistics_ = fuse; }
  bool conv2d_forward_statistics_fused(const ConvGeometry&) override { return fuse_convolution_statistics_; }
  // conv2d_forward, then the sums of the stored y in double, rounded to fp32.
  void conv2d_forward_statistics(const ConvGeometry& g, const void* x, const void* w, void* y, float* statistics,
                                 void* workspace, size_t workspace_bytes) override;
  void batch_norm_forward_training(const Tensor4& shape, const void* x, const float* gamma,
                                   const float* beta, float epsilon, bool relu, void* y,
                                   float* saved_mean, float* saved_inv_std,
                                   void* workspace, const void* residual,
                                   const float* x_statistics = nullptr) override;
  void batch_norm_backward(const Tensor4& shape, const void* x, const void* y, const void* dy,
                           const float* gamma, const float* saved_mean, const float* saved_inv_std,
                           float epsilon, bool relu, void* dx, float* dgamma, float* dbeta,
                           void* workspace, void* d_residual) override;
  size_t batch_norm_workspace_bytes(const Tensor4&) override { return 0; }
  void batch_norm_pair_forward_training(const Tensor4& shape, const void* x, const float* gamma, const float* beta,
                                        float* saved_mean, float* saved_inv_std, const void* z, const float* z_gamma,
                                        const float* z_beta, float* z_saved_mean, float* z_saved_inv_std,
                                        float epsilon, bool relu, void* y, void* workspace,
                                        const float* x_statistics = nullptr,
                                        const float* z_statistics = nullptr) override;
  void batch_norm_inference(const Tensor4& shape, const void* x, const InferenceNorm& norm, const void* z,
                            const InferenceNorm* z_norm, bool relu, void* y) override;
  void pool_forward(const PoolGeometry& g, const void* x, void* y) override;
  void pool_backward(const PoolGeometry& g, const void* x, const void* y, const void* dy,
                     void* dx) override;
  void dropout_forward(DataType type, const void* x, void* y, size_t n, float rate, uint64_t seed,
                       uint64_t first_index, const int32_t* step) override;
  void dropout_backward(DataType type, const void* dy, void* dx, size_t n, float rate,
                        uint64_t seed, uint64_t first_index, const int32_t* step) override;
  // Transformer ops: engine/{reference,cuda}/..._transformer_ops
  void add_row_bias(DataType type, void* y, const float* bias, int rows, int cols,
                    const RowBiasEpilogue& then) override;
  void relu_dropout_backward(DataType type, const void* y, const void* dy, void* dx, size_t n,
                             float rate) override;
  void layer_norm_forward(DataType type, const void* x, const float* gamma, const float* beta, int rows,
                          int cols, float epsilon, void* y, float* saved_mean, float* saved_inv_std) override;
  void layer_norm_backward(DataType type, const void* x, const void* dy, const float* gamma,
                           const float* saved_mean, const float* saved_inv_std, int rows, int cols, void* dx,
                           float* dgamma, float* dbeta, void* workspace) override;
  size_t layer_norm_workspace_bytes(int rows, int cols) override;
  void add_positional_encoding(DataType type, const void* x, void* y, int seq_len, int batch, int dim,
                               float scale) override;
  void attention_forward(const AttentionGeometry& g, const void* q, const void* k, const void* v,
                         const int32_t* key_lengths, const int32_t* step, void* o, float* lse,
                         void* workspace) override;
  void attention_backward(const AttentionGeometry& g, const void* q, const void* k, const void* v, const void* o,
                          const void* d_o, const float* lse, const int32_t* key_lengths, const int32_t* step,
                          void* dq, void* dk, void* dv, void* workspace) override;
  size_t attention_workspace_bytes(const AttentionGeometry& g) override;
  void copy_into_channels(const Tensor4& src_shape, const void* src, const Tensor4& dst_shape,
                          void* dst, int channel_offset) override;
  void copy_from_channels(const Tensor4& src_shape, const void* src, int channel_offset,
                          const Tensor4& dst_shape, void* dst) override;

  // Sequence ops: engine/{reference,cuda}/..._sequence_ops
  void softmax_cross_entropy_rows(DataType logits_type, const void* logits, const int32_t* labels,
                                  int rows, int classes, float gradient_scale, float* row_losses,
                                  void* dlogits, const float* loss_scale = nullptr,
                                  const float* row_weights = nullptr, int row_stride = 0) override;
  void sum_scaled(const float* x, size_t n, float scale, float* out) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void embedding_forward(DataType type, const void* table, const int32_t* ids, size_t n, int dim,
                         void* y) override;
  void embedding_backward(const int32_t* ids, DataType dy_type, const void* dy, size_t n, int dim,
                          float* dtable) override;
  void embedding_touched_rows(const int32_t* ids, size_t n, int vocab, int32_t* rows,
                              int32_t* count, void* workspace) override;
  size_t embedding_touched_rows_workspace_bytes(size_t n, int vocab) override;
  void gather_rows(const float* table, int dim, const int32_t* rows, const int32_t* count,
                   size_t capacity, int32_t* rows_out, float* values_out) override;
  void lstm_forward(const RnnGeometry& g, const void* x, const void* hx, const void* cx,
                    const void* weights, void* y, void* hy, void* cy, void* reserve,
                    void* workspace) override;
  void lstm_backward_data(const RnnGeometry& g, const void* y, const void* dy, const void* dhy,
                          const void* dcy, const void* weights, const void* hx, const void* cx,
                          void* dx, void* dhx, void* dcx, void* reserve, void* workspace) override;
  void lstm_backward_weights(const RnnGeometry& g, const void* x, const void* hx, const void* y,
                             float* dweights, void* reserve, void* workspace) override;
  size_t lstm_workspace_bytes(const RnnGeometry& g) override;
  size_t lstm_reserve_bytes(const RnnGeometry& g) override;
  void lstm_cell_forward(DataType type, int batch, int hidden, void* gates, const void* bias_input,
                         const void* bias_recurrent, const void* c_prev, void* c, void* h) override;
  void lstm_cell_backward(DataType type, int batch, int hidden, const void* gates, const void* c_prev,
                          const void* c, const void* dh, const void* dc, void* dgates,
                          void* dc_prev) override;

  void append_scalar(const float* value, float* history, int32_t* cursor) override;
  void write_timestamp(int64_t* slot) override;
  void lap(int64_t* clock, int64_t* total) override;
  void add_elapsed_since(const int64_t* start, int64_t* total) override;
  double sum_squares(const float* x, size_t n, void* scratch) override;
  size_t sum_squares_scratch_bytes() const override { return 0; }

 private:
  bool fuse_convolution_statistics_ = false;
  // The fp32 ops; a 16-bit op widens its inputs, runs one of these and rounds its outputs once.
  void gemm_f32(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
                const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
  void lstm_forward_f32(const RnnGeometry& g, const float* x, const float* hx, const float* cx,
                        const float* weights, float* y, float* hy, float* cy, void* reserve);
  void lstm_backward_data_f32(const RnnGeometry& g, const float* dy, const float* dhy,
                              const float* dcy, const float* weights, const float* cx, float* dx,
                              float* dhx, float* dcx, void* reserve, void* workspace);
  void lstm_backward_weights_f32(const RnnGeometry& g, const float* x, const float* hx,
                                 const float* y, float* dweights, void* reserve);
};

}  // namespace dpbench
