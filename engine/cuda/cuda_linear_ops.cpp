// CudaBackend's linear layers: the plain ops in sequence (engine/backend/linear_in_ops.h), or,
// with set_linear_epilogues, the GEMM with its bias, residual or GELU fused into cuBLASLt's
// epilogue where cuBLASLt takes the shape (cublaslt_linear.h). The fused form is off by default:
// on an H200 (CUDA 13, bf16) it made gpt's step slower at every size although it removed the
// epilogue kernels (124m 31.5 -> 32.1 ms, 350m 42.9 -> 45.3, 774m 49.3 -> 51.6; docs/BENCHMARKS.md):
// cuBLASLt runs slower GEMM kernels with these epilogues and sums BGRADB's bias gradient in a
// kernel of its own.
#include <string>

#include "engine/backend/linear_in_ops.h"
#include "engine/cuda/cublaslt_linear.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/stream_timing.h"
#include "engine/errors.h"

namespace dpbench {

CublasLtLinear& CudaBackend::linear_epilogues() {
  if (!linear_epilogues_) {
    if (stream_capturing(stream_))
      throw RuntimeError("CudaBackend: cuBLASLt's linear-layer plans were first asked for inside a graph capture "
                         "(run the step eagerly once first)");
    linear_epilogues_ = std::make_unique<CublasLtLinear>();
    linear_epilogues_->set_tf32(tf32_gemm_);
  }
  return *linear_epilogues_;
}

bool CudaBackend::linear_forward_fused(DataType type, int rows, int in, int out, const RowBiasEpilogue& then) {
  return linear_epilogues_enabled_ && linear_epilogues().forward_fused(type, rows, in, out, then);
}

void CudaBackend::linear_forward(DataType type, const void* x, const void* weights, const float* bias,
                                 const void* bias_copy, int rows, int in, int out, void* y,
                                 const RowBiasEpilogue& then) {
  check_row_bias_epilogue(then, y, "CudaBackend::linear_forward");
  if (!linear_forward_fused(type, rows, in, out, then)) {
    linear_forward_in_two_ops(*this, type, x, weights, bias, rows, in, out, y, then);
    return;
  }
  linear_epilogues().forward(stream_, type, x, weights, bias_copy, rows, in, out, y, then);
}

int CudaBackend::linear_backward_launches(DataType type, int rows, int in, int out, bool bias, bool input_gradient,
                                          bool gelu) {
  const bool fused_weights =
      linear_epilogues_enabled_ && bias && linear_epilogues().weight_gradient_fused(type, rows, in, out);
  const bool fused_gelu = linear_epilogues_enabled_ && input_gradient && gelu &&
                          linear_epilogues().gelu_input_gradient_fused(type, rows, in, out);
  // A fused GELU's product, then u's bias gradient converted to fp32.
  return (fused_weights ? 1 : linear_weight_gradient_in_ops_launches(bias)) +
         (fused_gelu ? 2 : linear_input_gradient_in_ops_launches(input_gradient, gelu));
}

void CudaBackend::linear_backward(DataType type, const void* x, const void* dy, const void* weights, int rows, int in,
                                  int out, float* dweights, float* dbias, void* dx, bool accumulate,
                                  const GeluInputGradient& gelu) {
  check_linear_backward(dx, accumulate, gelu, "CudaBackend::linear_backward");
  if (!linear_epilogues_enabled_) {
    linear_backward_in_ops(*this, type, x, dy, weights, rows, in, out, dweights, dbias, dx, accumulate, gelu);
    return;
  }
  CublasLtLinear& lt = linear_epilogues();
  if (dbias != nullptr && lt.weight_gradient_fused(type, rows, in, out))
    lt.weight_gradient(stream_, type, x, dy, rows, in, out, dweights, dbias);
  else
    linear_weight_gradient_in_ops(*this, type, x, dy, rows, in, out, dweights, dbias);
  if (dx != nullptr && gelu.input != nullptr && lt.gelu_input_gradient_fused(type, rows, in, out)) {
    lt.gelu_input_gradient(stream_, type, dy, weights, gelu.input, rows, in, out, dx);
    convert(type, lt.u_bias_gradient_scratch(), DataType::f32, gelu.bias_gradient, static_cast<size_t>(in));
  } else {
    linear_input_gradient_in_ops(*this, type, dy, weights, rows, in, out, dx, accumulate, gelu);
  }
}

}  // namespace dpbench
