// CublasLtLinear: a linear layer's GEMMs with what follows them fused into cuBLASLt's epilogues
// (Backend::linear_forward and linear_backward on the cuda backend). Forward: the bias, a
// residual (as C with beta = 1) or GELU keeping its pre-activation (GELU_AUX_BIAS). Backward: the
// bias gradient in the weight gradient's GEMM (BGRADB), and GELU's backward with the bias
// gradient of the layer below in the input gradient's GEMM (DGELU_BGRAD). Note [linear epilogues]
// in the .cpp says how the row-major operands map onto cuBLASLt's column-major ones.
//
// Plans (descriptors, layouts, the heuristic's algorithm) are made once per shape and kept; a
// shape for which cuBLASLt offers no algorithm is remembered as unfused, and the caller runs the
// plain ops instead. Running a plan enqueues one kernel (two where cuBLASLt splits K) and
// allocates nothing, so it can be captured in a CUDA graph.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <tuple>

#include "engine/backend/backend.h"

namespace dpbench {

class DeviceMemory;

class CublasLtLinear {
 public:
  CublasLtLinear();
  ~CublasLtLinear();
  CublasLtLinear(const CublasLtLinear&) = delete;
  CublasLtLinear& operator=(const CublasLtLinear&) = delete;

  // fp32 products on TF32 tensor cores (--precision=tf32); plans made before keep their math.
  void set_tf32(bool enabled) { tf32_ = enabled; }

  // Whether forward(type, rows, in, out, then) runs fused: the epilogue is one cuBLASLt has (no
  // ReLU, no dropout) and cuBLASLt has an algorithm for the shape. Makes the plan.
  bool forward_fused(DataType type, int rows, int in, int out, const RowBiasEpilogue& then);
  // bias (out) of `type`: the weight copy's (Note [linear epilogues]).
  void forward(cudaStream_t stream, DataType type, const void* x, const void* weights, const void* bias, int rows,
               int in, int out, void* y, const RowBiasEpilogue& then);

  // dweights (out, in, fp32) = dy^T x with dbias (out, fp32) = dy's column sums in its epilogue.
  bool weight_gradient_fused(DataType type, int rows, int in, int out);
  void weight_gradient(cudaStream_t stream, DataType type, const void* x, const void* dy, int rows, int in, int out,
                       float* dweights, float* dbias);

  // du (rows, in) = (dy W) * GELU'(u), and u_bias_gradient (in, of `type`: the caller converts it
  // to the fp32 gradient) = du's column sums, into u_bias_gradient_scratch(type, in).
  bool gelu_input_gradient_fused(DataType type, int rows, int in, int out);
  void gelu_input_gradient(cudaStream_t stream, DataType type, const void* dy, const void* weights, const void* u,
                           int rows, int in, int out, void* du);
  void* u_bias_gradient_scratch() const;

  // Shapes planned, and how many of them run fused, for summary.math_paths.
  int shapes() const { return static_cast<int>(plans_.size()); }
  int fused_shapes() const;

 private:
  enum class Kind { bias, bias_residual, gelu_aux_bias, weight_gradient_bgradb, input_gradient_dgelu_bgrad };
  struct Plan;
  using Key = std::tuple<Kind, DataType, int, int, int, bool>;

  // The plan of `key`, made on first use; nullptr where cuBLASLt has no algorithm for it.
  Plan* plan(const Key& key);
  void run(cudaStream_t stream, Plan& plan, const void* a, const void* b, const void* c, void* d, float beta,
           const void* bias, const void* aux);

  cublasLtHandle_t handle_ = nullptr;
  bool tf32_ = false;
  std::map<Key, std::unique_ptr<Plan>> plans_;  // null entries: shapes cuBLASLt does not fuse
  std::unique_ptr<DeviceMemory> workspace_;
  // u's bias gradient as DGELU_BGRAD writes it (of dx's type), grown when a plan is made.
  std::unique_ptr<DeviceMemory> u_bias_gradient_;
};

}  // namespace dpbench
