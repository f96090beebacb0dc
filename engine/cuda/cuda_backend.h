// CudaBackend: the Backend ops on one CUDA stream. GEMM goes to cuBLAS and convolution and pooling
// to cuDNN, in pure fp32 unless TF32 is asked for (so results compare with the reference backend),
// or on 16-bit data (fp16, bf16) with fp32 arithmetic on tensor cores; 16-bit attention to cuDNN's
// fused flash attention where it times faster; everything else, batch norm included, is dpbench's
// own kernels.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/backend/backend.h"
#include "engine/cuda/cuda_controls.h"
#include "engine/machine/memory_ledger.h"

namespace dpbench {

struct CudnnPlans;  // cuDNN descriptors and algorithm choices cached per shape (cudnn_plans.h)
struct ConvPlan;
struct PoolPlan;
struct RnnPlans;  // the fused LSTM's descriptors and buffers, per geometry (cudnn_rnn_plans.h)
struct RnnPlan;
class DeviceMemory;
class CudnnGraphConvolutions;  // convolutions through cuDNN's graph API (cudnn_graph_conv.h)
class CublasLtLinear;          // linear layers with cuBLASLt's epilogues (cublaslt_linear.h)
enum class LinearPass : int;   // its fused passes
class CudnnAttention;          // attention through cuDNN's graph API (cudnn_attention.h)
struct AttentionPlans;         // its plans and the path chosen per attention geometry
struct AttentionTensors;

// Owns neither the stream nor the handles (the CudaDevice does). The device that owns them must be
// current on the calling thread (Device::make_current). One thread drives a backend at a time: the
// per-shape caches are not locked.
class CudaBackend final : public Backend {
 public:
  // Binds `cublas` and `cudnn` to `stream` and sets cuBLAS's math mode; the handles must serve
  // this backend only. What the backend allocates itself (plans, workspaces, timing scratch) is
  // recorded in `memory`, its device's ledger.
  CudaBackend(cudaStream_t stream, cublasHandle_t cublas, cudnnHandle_t cudnn, MemoryLedger& memory);
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
  // Which attention the workspace query prepares for a new geometry (AttentionPath; Note
  // [attention paths] in cuda_attention_ops.cpp). Geometries already prepared keep their path.
  void set_attention_path(AttentionPath path) { attention_path_ = path; }
  // Which passes of linear_forward and linear_backward run cuBLASLt's fused epilogues (LinearPath;
  // Note [linear paths] in cuda_linear_ops.cpp). Passes already decided keep their path.
  void set_linear_path(LinearPath path) { linear_path_ = path; }
  // What attention_workspace_bytes chose for `g`, or nothing where it never saw g.
  std::optional<AttentionChoice> attention_choice(const AttentionGeometry& g) const;

  // Every Backend op (engine/backend/backend_ops.h). Defined in cuda_backend.cu (dense, element-wise,
  // loss, optimizer, bookkeeping and timing ops), cuda_conv_ops.cpp (convolutions),
  // cuda_cnn_ops.cpp (the other image ops), cuda_sequence_ops.cpp (sequence ops),
  // cuda_rnn_ops.cpp (the fused LSTM), cuda_transformer_ops.cpp (Transformer ops) and
  // cuda_attention_ops.cpp (attention).
#include "engine/backend/backend_overrides.h"

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
  // The linear layers' cuBLASLt plans, made on first use (which must not be inside a stream
  // capture: it allocates cuBLASLt's workspace; step 0 runs eagerly before any).
  CublasLtLinear& linear_epilogues();
  // Whether cuBLASLt's fused `pass` runs this shape (Note [linear paths]); decides it on the first
  // ask outside a capture, which synchronises the stream.
  bool linear_pass_fused(LinearPass pass, DataType type, int rows, int in, int out);
  // The fused LSTM's plan for `g` with its math type (the current fp32 one, or tensor ops for
  // 16-bit data), built on first use (which must not be inside a stream capture: building
  // allocates device memory).
  RnnPlan& rnn_plan(const RnnGeometry& g);
  // One training pass of dpbench's persistent LSTM on scratch buffers, timed as cuDNN's plans
  // are (time_lstm_pass); for the fastest choice. Synchronises the stream.
  std::optional<double> time_own_persistent_lstm(const RnnGeometry& g);
  // The cuDNN attention plans of this stream, made on first use.
  CudnnAttention& cudnn_attention();
  // Once per geometry, by attention_workspace_bytes (Note [attention paths]). Synchronises the
  // stream.
  AttentionChoice choose_attention_path(const AttentionGeometry& g);
  // The choice of g where this call runs cuDNN's graphs, else nullptr (dpbench's kernels).
  AttentionChoice* cudnn_attention_call(const AttentionGeometry& g, const int32_t* key_lengths,
                                        const AttentionTensors& t);

  cudaStream_t stream_;
  cublasHandle_t cublas_;
  cudnnHandle_t cudnn_;
  MemoryLedger& memory_;
  bool cudnn_benchmark_ = true;
  bool deterministic_ = false;
  bool tf32_gemm_ = false;  // set_tf32's choice, for the cuBLASLt plans made later
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
  std::unique_ptr<CublasLtLinear> linear_epilogues_;
  LinearPath linear_path_ = LinearPath::fastest;
  AttentionPath attention_path_ = AttentionPath::fastest;
  std::unique_ptr<AttentionPlans> attention_plans_;
};

}  // namespace dpbench
