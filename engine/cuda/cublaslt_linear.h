// CublasLtLinear: a linear layer's GEMMs with what follows them fused into cuBLASLt's epilogues
// (Backend::linear_forward and linear_backward on the cuda backend). Forward: the bias, a
// residual (as C with beta = 1) or GELU keeping its pre-activation (GELU_AUX_BIAS). Backward: the
// bias gradient in the weight gradient's GEMM (BGRADB), and GELU's backward with the bias
// gradient of the layer below in the input gradient's GEMM (DGELU_BGRAD). Note [linear epilogues]
// in the .cpp says how the row-major operands map onto cuBLASLt's column-major ones.
//
// Plans (descriptors, layouts, up to kCandidateAlgorithms of the heuristic's algorithms, the
// first of them chosen) are made once per shape and kept; a shape for which cuBLASLt offers no
// algorithm is remembered as unfused, and the caller runs the plain ops instead.
// choose_fastest_algorithm times the candidates and keeps the fastest: the heuristic's first
// pick for these epilogues is often a slower GEMM than cuBLAS's plain one (docs/BENCHMARKS.md).
// Running a plan enqueues one kernel (two where cuBLASLt splits K) and allocates nothing, so it
// can be captured in a CUDA graph.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <tuple>

#include <nlohmann/json.hpp>

#include "engine/backend/backend.h"
#include "engine/machine/memory_ledger.h"

namespace dpbench {

class DeviceMemory;

// The fused passes: a forward with its bias, its bias and a residual, or its bias and GELU; the
// weight gradient with the bias gradient; the input gradient with GELU's backward and the lower
// layer's bias gradient.
enum class LinearPass : int { bias, bias_residual, gelu_aux_bias, weight_gradient_bgradb, input_gradient_dgelu_bgrad };

class CublasLtLinear {
 public:
  // Its workspace and plans' buffers are recorded in `memory`, the device's ledger.
  explicit CublasLtLinear(MemoryLedger& memory);
  ~CublasLtLinear();
  CublasLtLinear(const CublasLtLinear&) = delete;
  CublasLtLinear& operator=(const CublasLtLinear&) = delete;

  using Pass = LinearPass;
  // The forward pass that runs `then`.
  static Pass forward_pass(const RowBiasEpilogue& then);

  // fp32 products on TF32 tensor cores (--precision=tf32); plans made before keep their math.
  void set_tf32(bool enabled) { tf32_ = enabled; }

  // Times `run` (which enqueues the pass of this shape, as forward, weight_gradient or
  // gelu_input_gradient do, on scratch) with each candidate algorithm of the plan and keeps the
  // fastest; its milliseconds, or a negative number where the shape has no plan or no candidate
  // ran. Synchronises the stream; not inside a capture.
  float choose_fastest_algorithm(cudaStream_t stream, Pass pass, DataType type, int rows, int in, int out,
                                 const std::function<void()>& run);

  // What the plans promise cuBLASLt of every operand's address (bias and aux included): a 16-bit
  // parameter copy's tensors start 128 bytes apart (ParameterLayout::kTensorAlignment, 64
  // elements), buffers of their own 256.
  static constexpr uintptr_t kOperandAlignment = 128;
  static bool operands_aligned(std::initializer_list<const void*> pointers) {
    for (const void* pointer : pointers)
      if (reinterpret_cast<uintptr_t>(pointer) % kOperandAlignment != 0) return false;
    return true;
  }
  // Whether `then` is an epilogue cuBLASLt has (no ReLU, no dropout).
  static bool forward_takes(const RowBiasEpilogue& then) { return !then.relu && then.dropout.rate <= 0.0f; }
  // bias (out) of `type`: the weight copy's (Note [linear epilogues]). Every run below needs the
  // pass's plan (choice() not nullptr).
  void forward(cudaStream_t stream, DataType type, const void* x, const void* weights, const void* bias, int rows,
               int in, int out, void* y, const RowBiasEpilogue& then);

  // dweights (out, in, fp32) = dy^T x with dbias (out, fp32) = dy's column sums in its epilogue.
  void weight_gradient(cudaStream_t stream, DataType type, const void* x, const void* dy, int rows, int in, int out,
                       float* dweights, float* dbias);

  // du (rows, in) = (dy W) * GELU'(u), and u_bias_gradient (in, of `type`: the caller converts it
  // to the fp32 gradient) = du's column sums, into u_bias_gradient_scratch(type, in).
  void gelu_input_gradient(cudaStream_t stream, DataType type, const void* dy, const void* weights, const void* u,
                           int rows, int in, int out, void* du);
  void* u_bias_gradient_scratch() const;

  // Whether a planned pass runs fused, as the backend decided it (Note [linear paths] in
  // cuda_linear_ops.cpp), with the timings behind the decision (negative: not timed).
  struct Choice {
    bool decided = false;
    bool fused = false;
    float fused_ms = -1.0f, plain_ms = -1.0f;
  };
  // The choice of the pass's plan (made here if new), or nullptr where cuBLASLt cannot fuse it
  // (no rows, a width not a multiple of 8, or no algorithm).
  Choice* choice(Pass pass, DataType type, int rows, int in, int out);

  // Shapes planned, how many of them cuBLASLt can fuse, and how many run fused, for
  // summary.math_paths; and each pass's timings.
  int shapes() const { return static_cast<int>(plans_.size()); }
  int fused_shapes() const;
  int running_fused_shapes() const;
  nlohmann::json timings() const;

 private:
  struct Plan;
  using Key = std::tuple<Pass, DataType, int, int, int, bool>;

  // The plan of `key`, made on first use; nullptr where cuBLASLt has no algorithm for it.
  Plan* plan(const Key& key);
  void run(cudaStream_t stream, Plan& plan, const void* a, const void* b, const void* c, void* d, float beta,
           const void* bias, const void* aux);

  MemoryLedger& memory_;
  cublasLtHandle_t handle_ = nullptr;
  bool tf32_ = false;
  std::map<Key, std::unique_ptr<Plan>> plans_;  // null entries: shapes cuBLASLt does not fuse
  std::unique_ptr<DeviceMemory> workspace_;
  // u's bias gradient as DGELU_BGRAD writes it (of dx's type), grown when a plan is made.
  std::unique_ptr<DeviceMemory> u_bias_gradient_;
};

}  // namespace dpbench
