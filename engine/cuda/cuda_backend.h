// CudaBackend: the Backend ops on one CUDA stream. GEMM goes to cuBLAS and convolution and pooling
// to cuDNN, in pure fp32 unless TF32 is asked for (so results compare with the reference backend),
// or on 16-bit data (fp16, bf16) with fp32 arithmetic on tensor cores; everything else, batch
// norm included, is dpbench's own kernels.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/backend.h"

namespace dpbench {

struct CudnnPlans;  // cuDNN descriptors and algorithm choices cached per shape (cudnn_plans.h)
struct ConvPlan;
struct PoolPlan;
struct RnnPlans;  // the fused LSTM's descriptors and buffers, per geometry (cudnn_rnn_plans.h)
struct RnnPlan;
class DeviceMemory;
class CudnnGraphConvolutions;  // convolutions through cuDNN's graph API (cudnn_graph_conv.h)

// Owns neither the stream nor the handles (the CudaDevice does). The device that owns them must be
// current on the calling thread (Device::make_current). One thread drives a backend at a time: the
// per-shape caches are not locked.
class CudaBackend final : public Backend {
 public:
  // Binds `cublas` and `cudnn` to `stream` and sets cuBLAS's math mode; the handles must serve
  // this backend only.
  CudaBackend(cudaStream_t stream, cublasHandle_t cublas, cudnnHandle_t cudnn);
  ~CudaBackend() override;

  BackendKind kind() const override { return BackendKind::cuda; }
  cudaStream_t stream() const { return stream_; }

  // On (the default): conv2d_workspace_bytes times every candidate algorithm on scratch buffers
  // and keeps the fastest; off: cuDNN's heuristics pick without running anything. Geometries
  // already prepared keep their algorithms.
  void set_cudnn_benchmark(bool benchmark) { cudnn_benchmark_ = benchmark; }
  // TF32 tensor cores for fp32 GEMMs and convolutions (--precision=tf32): inputs rounded to a
  // 10-bit mantissa, fp32 accumulation. Set before the first convolution is prepared: cached
  // plans keep the math they were made with. 16-bit convolutions use tensor cores either way.
  void set_tf32(bool enabled);
  bool tf32() const { return conv_math_type_ != CUDNN_FMA_MATH; }
  bool cudnn_benchmark() const { return cudnn_benchmark_; }
  // Every op gives the same bits on every run and in every process (--deterministic): each
  // convolution takes cuDNN's heuristically first algorithm among the deterministic ones (no
  // timing, which could choose differently from run to run), and the embedding scatter-add sums in
  // a fixed order instead of by atomics. Set before the first convolution is prepared.
  void set_deterministic(bool deterministic);
  bool deterministic() const { return deterministic_; }
  // How many geometries have had their convolution algorithms chosen (searched or looked up):
  // the cache's witness that a geometry is prepared once, not per call.
  size_t conv_algorithm_searches() const { return conv_algorithm_searches_; }
  // How many fused-LSTM plans (geometry, data type included, and math type) have been built: the
  // cache's witness that a geometry is prepared once, not per call.
  size_t lstm_plans_created() const;
  // Whether cuDNN's weight space for `g` is the canonical layout itself, so the ops hand the
  // caller's weights and gradients to cuDNN as they are (otherwise they are repacked through a
  // copy the plan owns; 16-bit gradients always are, Note [16-bit fused LSTM] in
  // cudnn_rnn_plans.h). Prepares the plan if needed.
  bool lstm_weights_zero_copy(const RnnGeometry& g);
  // Tests only: plans built while this is on take the repacking path even where cuDNN's layout
  // is the canonical one, so that path can be checked on a cuDNN that never needs it.
  void set_lstm_always_repack(bool always) { lstm_always_repack_ = always; }
  // The algorithm of `g`'s plan (rnn_algorithm_name; prepares the plan if needed), and, for
  // tests, one to build later plans with (a cudnnRNNAlgo_t; kChooseLstmAlgorithm: the fastest,
  // kOwnPersistentLstmAlgorithm: dpbench's kernels; Note [LSTM algorithm] in cudnn_rnn_plans.h).
  std::string lstm_algorithm(const RnnGeometry& g);
  // What the prepared plans run (math_paths in cuda_controls.h says the shape of it).
  nlohmann::json math_paths() const;
  void set_lstm_algorithm(int algorithm) { lstm_algorithm_ = algorithm; }

  // The float* conveniences of Backend, which overriding the typed ops would otherwise hide.
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

  // fp32: cublasSgemm (TF32 under set_tf32); 16-bit A and B: cublasGemmEx on tensor cores with
  // fp32 accumulation, C fp32 or of the inputs' type.
  void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
            DataType ab_type, const void* a, int lda, const void* b, int ldb, float beta,
            DataType c_type, void* c, int ldc) override;
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

  // Image ops: cuda_conv_ops.cpp (convolutions), cuda_cnn_ops.cpp (the rest)
  void conv2d_forward(const ConvGeometry& g, const void* x, const void* w, void* y,
                      void* workspace, size_t workspace_bytes) override;
  void conv2d_backward_data(const ConvGeometry& g, const void* dy, const void* w, void* dx,
                            void* workspace, size_t workspace_bytes,
                            bool accumulate = false) override;
  // In 16-bit, dw has the filter's type: cuDNN's convolution API takes x, dy and dw of one type.
  void conv2d_backward_filter(const ConvGeometry& g, const void* x, const void* dy, void* dw,
                              void* workspace, size_t workspace_bytes) override;
  size_t conv2d_workspace_bytes(const ConvGeometry& g) override;
  void conv2d_forward_bias(const ConvGeometry& g, const void* x, const void* w, const float* bias,
                           bool relu, void* y, void* workspace, size_t workspace_bytes) override;
  size_t conv2d_bias_workspace_bytes(const ConvGeometry& g, bool relu) override;
  bool conv2d_forward_bias_fused(const ConvGeometry& g, bool relu) override;
  // Fused where cuDNN's graph API has an engine for the convolution with batch norm's sums in its
  // epilogue (16-bit NHWC with channels in eights on sm_90) and it times faster than the chosen
  // forward plus the statistics pass it saves; never in deterministic runs (the fused sums'
  // order is cuDNN's) or with --cudnn_benchmark=false.
  size_t conv2d_statistics_workspace_bytes(const ConvGeometry& g) override;
  bool conv2d_forward_statistics_fused(const ConvGeometry& g) override;
  void conv2d_forward_statistics(const ConvGeometry& g, const void* x, const void* w, void* y, float* statistics,
                                 void* workspace, size_t workspace_bytes) override;
  void add_channel_bias(const Tensor4& shape, void* y, const float* bias, bool relu) override;
  void channel_bias_gradient(const Tensor4& shape, const void* y, void* dy, float* dbias,
                             bool relu, void* workspace) override;
  size_t channel_bias_workspace_bytes(const Tensor4& shape) override;
  void batch_norm_forward_training(const Tensor4& shape, const void* x, const float* gamma,
                                   const float* beta, float epsilon, bool relu, void* y,
                                   float* saved_mean, float* saved_inv_std,
                                   void* workspace, const void* residual,
                                   const float* x_statistics = nullptr) override;
  void batch_norm_backward(const Tensor4& shape, const void* x, const void* y, const void* dy,
                           const float* gamma, const float* saved_mean, const float* saved_inv_std,
                           float epsilon, bool relu, void* dx, float* dgamma, float* dbeta,
                           void* workspace, void* d_residual) override;
  size_t batch_norm_workspace_bytes(const Tensor4& shape) override;
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

  // Sequence ops: engine/{reference,cuda}/..._sequence_ops; the fused LSTM in cuda_rnn_ops.cpp
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
  // In 16-bit cuDNN writes 16-bit weight gradients: into the plan's scratch, whose values are then
  // widened and added to the fp32 dweights.
  void lstm_backward_weights(const RnnGeometry& g, const void* x, const void* hx, const void* y,
                             float* dweights, void* reserve, void* workspace) override;
  size_t lstm_workspace_bytes(const RnnGeometry& g) override;
  size_t lstm_reserve_bytes(const RnnGeometry& g) override;
  void lstm_cell_forward(DataType type, int batch, int hidden, void* gates, const void* bias_input,
                         const void* bias_recurrent, const void* c_prev, void* c, void* h) override;
  void lstm_cell_backward(DataType type, int batch, int hidden, const void* gates,
                          const void* c_prev, const void* c, const void* dh, const void* dc,
                          void* dgates, void* dc_prev) override;

  void append_scalar(const float* value, float* history, int32_t* cursor) override;
  void write_timestamp(int64_t* slot) override;
  void add_elapsed_since(const int64_t* start, int64_t* total) override;
  void lap(int64_t* clock, int64_t* total) override;
  double sum_squares(const float* x, size_t n, void* scratch) override;
  size_t sum_squares_scratch_bytes() const override;

 private:
  // Cached per shape; built on first use (conv2d_workspace_bytes for convolutions). `benchmark`
  // only matters when the geometry is new.
  ConvPlan& conv_plan(const ConvGeometry& g, bool benchmark);
  void choose_conv_algorithms(const ConvGeometry& g, ConvPlan& plan, bool benchmark);
  // Once per geometry, at its first accumulating backward-data call outside a capture: whether
  // the graph API's accumulating plan, within `workspace_bytes`, beats the classic beta = 1
  // (Note [convolution paths] in cuda_conv_ops.cpp). Synchronises the stream.
  void decide_graph_accumulate(const ConvGeometry& g, ConvPlan& plan, size_t workspace_bytes);
  // The graph-API convolutions of this stream, made on first use with the current TF32 choice.
  CudnnGraphConvolutions& graph_convolutions();
  PoolPlan& pool_plan(const PoolGeometry& g);
  // The fused LSTM's plan for `g` with its math type (the current fp32 one, or tensor ops for
  // 16-bit data), built on first use (which must not be inside a stream capture: building
  // allocates device memory).
  RnnPlan& rnn_plan(const RnnGeometry& g);
  // One training pass of dpbench's persistent LSTM on scratch buffers, timed as cuDNN's plans
  // are (time_lstm_pass); for the fastest choice. Synchronises the stream.
  std::optional<double> time_own_persistent_lstm(const RnnGeometry& g);

  cudaStream_t stream_;
  cublasHandle_t cublas_;
  cudnnHandle_t cudnn_;
  bool cudnn_benchmark_ = true;
  bool deterministic_ = false;
  // The bias gradient's partial sums (cuda_kernels::bias_gradient_scratch_floats, a fixed amount
  // whatever the shape): allocated here, so captured steps find it ready.
  std::unique_ptr<DeviceMemory> bias_gradient_scratch_;
  // The ordered embedding scatter-add's workspace, grown in an eager step (step 0 runs eagerly
  // before any capture) and reused by captured ones.
  std::unique_ptr<DeviceMemory> embedding_scratch_;
  // Of fp32 convolutions: FMA_MATH keeps them off TF32 tensor cores; DEFAULT_MATH lets cuDNN use
  // TF32. 16-bit convolutions always get TENSOR_OP_MATH (describe_convolution).
  cudnnMathType_t conv_math_type_ = CUDNN_FMA_MATH;
  size_t conv_algorithm_searches_ = 0;
  std::unique_ptr<CudnnPlans> plans_;
  std::unique_ptr<CudnnGraphConvolutions> graph_convolutions_;
  // Of the fused LSTM on fp32 data: FMA_MATH (exact fp32) or DEFAULT_MATH (TF32 allowed), with
  // set_tf32 (16-bit data always gets TENSOR_OP_MATH). Part of the plan's key, so a change takes
  // effect for geometries prepared after it.
  cudnnMathType_t rnn_math_type_ = CUDNN_FMA_MATH;
  bool lstm_always_repack_ = false;  // part of the plan key too
  int lstm_algorithm_ = -1;          // kChooseLstmAlgorithm; part of the plan key too
  std::unique_ptr<RnnPlans> rnn_plans_;
};

}  // namespace dpbench
