// CudaBackend's linear layers: each pass either as the plain ops in sequence
// (engine/backend/linear_in_ops.h: cuBLAS's GEMM, then dpbench's epilogue kernels) or as one
// cuBLASLt matmul with its bias, residual, GELU or bias gradient fused into the epilogue
// (cublaslt_linear.h), whichever timed faster for the shape (Note [linear paths]).
#include <algorithm>
#include <string>
#include <vector>

#include "engine/backend/linear_in_ops.h"
#include "engine/cuda/cublaslt_linear.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/stream_timing.h"
#include "engine/errors.h"

namespace dpbench {

// Note [linear paths]
// A linear layer's passes that cuBLASLt can fuse (LinearPass: the forward with its bias, its bias
// and a residual, or its bias and GELU; the weight gradient with the bias gradient; the input
// gradient with GELU's backward and the lower layer's bias gradient) run either as one cuBLASLt
// matmul or as the plain ops. Under LinearPath::fastest (the default) the first ask for a pass and
// shape outside a capture (step 0 runs eagerly) times both on zeroed scratch of the shape (neither
// time depends on the values): the plain ops, and each of cuBLASLt's candidate algorithms, the
// fastest of them kept (CublasLtLinear::choose_fastest_algorithm); the faster runs from then on.
// The plain ops run, untimed, under --deterministic (a timing may choose otherwise in another run
// or process, and the fused sums go in another order), with --cudnn_benchmark=false (the choice
// is a timing), for GELU's passes in exact fp32 (cuBLASLt's GELU is not the formula's to fp32's
// precision), where the scratch cannot be allocated, and for an ask inside a capture before any
// outside it (decided at the next). Why time: the heuristic's first algorithm for these epilogues
// was a slower GEMM than cuBLAS's plain one at every gpt size on an H200, and the fused epilogues
// then cost more than the epilogue kernels they replace (docs/BENCHMARKS.md).
namespace {

constexpr int kLinearTimedRuns = 5;  // runs of the plain ops, after an untimed one

// Zeroed device buffers of the given sizes, for timing a pass.
class LinearScratch {
 public:
  LinearScratch(cudaStream_t stream, MemoryLedger& memory, std::initializer_list<size_t> sizes) {
    for (size_t bytes : sizes) {
      // Within the device's memory limit, or not at all (Note [search memory] in device_memory.h).
      buffers_.push_back(DeviceMemory::transient(std::max<size_t>(bytes, 1), memory,
                                                 MemoryTag{MemoryCategory::scratch, "linear path timing"}));
      DPB_CUDA_CHECK(cudaMemsetAsync(buffers_.back().data(), 0, buffers_.back().bytes(), stream));
    }
  }
  void* operator[](size_t i) const { return buffers_[i].data(); }
  float* floats(size_t i) const { return buffers_[i].as<float>(); }

 private:
  std::vector<DeviceMemory> buffers_;
};

}  // namespace

CublasLtLinear& CudaBackend::linear_epilogues() {
  if (!linear_epilogues_) {
    if (stream_capturing(stream_))
      throw RuntimeError("CudaBackend: cuBLASLt's linear-layer plans were first asked for inside a graph capture "
                         "(run the step eagerly once first)");
    linear_epilogues_ = std::make_unique<CublasLtLinear>(memory_);
    linear_epilogues_->set_tf32(tf32_gemm_);
  }
  return *linear_epilogues_;
}

bool CudaBackend::linear_pass_fused(LinearPass pass, DataType type, int rows, int in, int out) {
  if (linear_path_ == LinearPath::plain) return false;
  if (linear_path_ == LinearPath::fastest && (deterministic_ || !cudnn_benchmark_)) return false;
  // Exact fp32 keeps GELU to the tanh form's formula: cuBLASLt's GELU and its derivative sit up to
  // 1e-5 of the largest value from it, a thousand times fp32's rounding (TF32's is larger).
  const bool gelu = pass == LinearPass::gelu_aux_bias || pass == LinearPass::input_gradient_dgelu_bgrad;
  if (linear_path_ == LinearPath::fastest && gelu && type == DataType::f32 && !tf32_gemm_) return false;
  if (!linear_epilogues_ && stream_capturing(stream_)) return false;
  CublasLtLinear& lt = linear_epilogues();
  CublasLtLinear::Choice* choice = lt.choice(pass, type, rows, in, out);
  if (choice == nullptr) return false;
  if (linear_path_ == LinearPath::cublaslt) {
    choice->decided = choice->fused = true;
    return true;
  }
  if (choice->decided) return choice->fused;
  if (stream_capturing(stream_)) return false;

  choice->decided = true;
  const size_t element = data_type_bytes(type);
  const size_t x_bytes = static_cast<size_t>(rows) * in * element, y_bytes = static_cast<size_t>(rows) * out * element;
  const size_t w_bytes = static_cast<size_t>(out) * in * element;
  const size_t in_floats = sizeof(float) * in, out_floats = sizeof(float) * out;
  try {
    float plain_ms = -1.0f, fused_ms = -1.0f;
    auto time_both = [&](auto plain, auto fused) {
      plain_ms = timed_on_stream(stream_, plain, kLinearTimedRuns);
      fused_ms = lt.choose_fastest_algorithm(stream_, pass, type, rows, in, out, fused);
    };
    switch (pass) {
      case LinearPass::bias:
      case LinearPass::bias_residual:
      case LinearPass::gelu_aux_bias: {
        // x, W, y, the residual, the sum or GELU's output, the fp32 bias, the weight copy's bias.
        const LinearScratch s(stream_, memory_,
                              {x_bytes, w_bytes, y_bytes, y_bytes, y_bytes, out_floats, out * element});
        RowBiasEpilogue then;
        if (pass == LinearPass::bias_residual) then.residual = s[3], then.out = s[4];
        if (pass == LinearPass::gelu_aux_bias) then.gelu = true, then.activated = s[4];
        time_both([&] { linear_forward_in_two_ops(*this, type, s[0], s[1], s.floats(5), rows, in, out, s[2], then); },
                  [&] { lt.forward(stream_, type, s[0], s[1], s[6], rows, in, out, s[2], then); });
        break;
      }
      case LinearPass::weight_gradient_bgradb: {
        // x, dy, dW (fp32), db (fp32).
        const LinearScratch s(stream_, memory_, {x_bytes, y_bytes, sizeof(float) * out * in, out_floats});
        time_both(
            [&] { linear_weight_gradient_in_ops(*this, type, s[0], s[1], rows, in, out, s.floats(2), s.floats(3)); },
            [&] { lt.weight_gradient(stream_, type, s[0], s[1], rows, in, out, s.floats(2), s.floats(3)); });
        break;
      }
      case LinearPass::input_gradient_dgelu_bgrad: {
        // dy, W, u, du, u's bias gradient (fp32).
        const LinearScratch s(stream_, memory_, {y_bytes, w_bytes, x_bytes, x_bytes, in_floats});
        const GeluInputGradient gelu{s[2], s.floats(4)};
        time_both([&] { linear_input_gradient_in_ops(*this, type, s[0], s[1], rows, in, out, s[3], false, gelu); },
                  [&] {
                    lt.gelu_input_gradient(stream_, type, s[0], s[1], s[2], rows, in, out, s[3]);
                    convert(type, lt.u_bias_gradient_scratch(), DataType::f32, s.floats(4), static_cast<size_t>(in));
                  });
        break;
      }
    }
    choice->plain_ms = plain_ms;
    choice->fused_ms = fused_ms;
    choice->fused = fused_ms >= 0.0f && fused_ms < plain_ms;
  } catch (const RuntimeError&) {
    // A failed allocation of the scratch, mostly: the plain ops need none.
    choice->fused = false;
  }
  return choice->fused;
}

bool CudaBackend::linear_forward_fused(DataType type, int rows, int in, int out, const RowBiasEpilogue& then) {
  return CublasLtLinear::forward_takes(then) &&
         linear_pass_fused(CublasLtLinear::forward_pass(then), type, rows, in, out);
}

void CudaBackend::linear_forward(DataType type, const void* x, const void* weights, const float* bias,
                                 const void* bias_copy, int rows, int in, int out, void* y,
                                 const RowBiasEpilogue& then) {
  check_row_bias_epilogue(then, y, "CudaBackend::linear_forward");
  if (!CublasLtLinear::operands_aligned({x, weights, bias_copy, y, then.residual, then.out, then.activated}) ||
      !linear_forward_fused(type, rows, in, out, then)) {
    linear_forward_in_two_ops(*this, type, x, weights, bias, rows, in, out, y, then);
    return;
  }
  linear_epilogues().forward(stream_, type, x, weights, bias_copy, rows, in, out, y, then);
}

int CudaBackend::linear_backward_launches(DataType type, int rows, int in, int out, bool bias, bool input_gradient,
                                          bool gelu) {
  const bool fused_weights = bias &&
                             linear_pass_fused(LinearPass::weight_gradient_bgradb, type, rows, in, out);
  const bool fused_gelu = input_gradient && gelu &&
                          linear_pass_fused(LinearPass::input_gradient_dgelu_bgrad, type, rows, in, out);
  // A fused GELU's product, then u's bias gradient converted to fp32. (Counted by shape: a call with an
  // operand off CublasLtLinear::kOperandAlignment runs the plain ops whatever the count said.)
  return (fused_weights ? 1 : linear_weight_gradient_in_ops_launches(bias)) +
         (fused_gelu ? 2 : linear_input_gradient_in_ops_launches(input_gradient, gelu));
}

void CudaBackend::linear_backward(DataType type, const void* x, const void* dy, const void* weights, int rows, int in,
                                  int out, float* dweights, float* dbias, void* dx, bool accumulate,
                                  const GeluInputGradient& gelu) {
  check_linear_backward(dx, accumulate, gelu, "CudaBackend::linear_backward");
  if (dbias != nullptr && CublasLtLinear::operands_aligned({x, dy, dweights, dbias}) &&
      linear_pass_fused(LinearPass::weight_gradient_bgradb, type, rows, in, out))
    linear_epilogues().weight_gradient(stream_, type, x, dy, rows, in, out, dweights, dbias);
  else
    linear_weight_gradient_in_ops(*this, type, x, dy, rows, in, out, dweights, dbias);
  if (dx != nullptr && gelu.input != nullptr && CublasLtLinear::operands_aligned({dy, weights, gelu.input, dx}) &&
      linear_pass_fused(LinearPass::input_gradient_dgelu_bgrad, type, rows, in, out)) {
    CublasLtLinear& lt = linear_epilogues();
    lt.gelu_input_gradient(stream_, type, dy, weights, gelu.input, rows, in, out, dx);
    convert(type, lt.u_bias_gradient_scratch(), DataType::f32, gelu.bias_gradient, static_cast<size_t>(in));
  } else {
    linear_input_gradient_in_ops(*this, type, dy, weights, rows, in, out, dx, accumulate, gelu);
  }
}

}  // namespace dpbench
