// CudaBackend: cuBLAS for GEMM (fp32, or 16-bit inputs with fp32 accumulation), the launchers of
// cuda_kernels.h for everything else. Every op is asynchronous on the bound stream except
// sum_squares, which returns its result to the host.
#include "engine/cuda/cuda_backend.h"

#include <cmath>
#include <string>

#include "engine/cuda/cublaslt_linear.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cudnn_attention.h"
#include "engine/cuda/cudnn_graph_conv.h"
#include "engine/cuda/cudnn_plans.h"
#include "engine/cuda/cudnn_rnn_plans.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

// The handle's math mode: pure fp32 or TF32 for fp32 GEMMs. Reductions stay in the fp32
// accumulator whatever C's type: cuBLAS may otherwise sum split-K partials in a 16-bit C's own
// type, and a 16-bit C would be rounded more than once (no effect on fp32 C).
cublasMath_t cublas_math_mode(bool tf32) {
  return static_cast<cublasMath_t>((tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) |
                                   CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
}

cudaDataType_t cublas_data_type(DataType type) {
  switch (type) {
    case DataType::f16: return CUDA_R_16F;
    case DataType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

}  // namespace

CudaBackend::CudaBackend(cudaStream_t stream, cublasHandle_t cublas, cudnnHandle_t cudnn, MemoryLedger& memory)
    : stream_(stream),
      cublas_(cublas),
      cudnn_(cudnn),
      memory_(memory),
      bias_gradient_scratch_(std::make_unique<DeviceMemory>(
          cuda_kernels::bias_gradient_scratch_floats() * sizeof(float), memory,
          MemoryTag{MemoryCategory::workspaces, "bias gradient partial sums"})),
      plans_(std::make_unique<CudnnPlans>()),
      rnn_plans_(std::make_unique<RnnPlans>()),
      attention_plans_(std::make_unique<AttentionPlans>()) {
  DPB_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // Explicitly pure fp32: TF32 tensor-core math would differ from the reference by ~1e-3.
  DPB_CUBLAS_CHECK(cublasSetMathMode(cublas_, cublas_math_mode(false)));
  DPB_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
}

void CudaBackend::set_tf32(bool enabled) {
  conv_math_type_ = enabled ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  // The fused LSTM likewise: DEFAULT lets cuDNN run its fp32 GEMMs on TF32 tensor cores, FMA
  // keeps them exact fp32 (what the [gpu] tests compare with the reference backend).
  rnn_math_type_ = enabled ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  DPB_CUBLAS_CHECK(cublasSetMathMode(cublas_, cublas_math_mode(enabled)));
  tf32_gemm_ = enabled;
  if (linear_epilogues_) linear_epilogues_->set_tf32(enabled);
}

// Out of line: CudnnPlans, RnnPlans and AttentionPlans are complete only here.
void CudaBackend::set_deterministic(bool deterministic) { deterministic_ = deterministic; }

CudaBackend::~CudaBackend() = default;

// fp32: cublasSgemm (TF32 under set_tf32); 16-bit A and B: cublasGemmEx on tensor cores with
// fp32 accumulation, C fp32 or of the inputs' type.
void CudaBackend::gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
                       DataType ab_type, const void* a, int lda, const void* b, int ldb, float beta,
                       DataType c_type, void* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  // cuBLAS is column-major, and a row-major matrix read column-major is its transpose. So the
  // row-major C = op(A) op(B) is computed as the column-major C^T (n, m) = op(B)^T op(A)^T,
  // which passes B first, A second, with the same transpose flags and dimensions n, m, k.
  const cublasOperation_t op_b = trans_b == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (ab_type == DataType::f32 && c_type == DataType::f32) {
    DPB_CUBLAS_CHECK(cublasSgemm(cublas_, op_b, op_a, n, m, k, &alpha, static_cast<const float*>(b),
                                 ldb, static_cast<const float*>(a), lda, &beta,
                                 static_cast<float*>(c), ldc));
    return;
  }
  if (ab_type == DataType::f32 || (c_type != DataType::f32 && c_type != ab_type)) {
    throw RuntimeError(std::string("CudaBackend::gemm: A and B of ") + data_type_name(ab_type) +
                       " with C of " + data_type_name(c_type) +
                       " (16-bit A and B take C of fp32 or of their own type)");
  }
  // The default algorithm runs 16-bit inputs on tensor cores; alpha and beta are fp32, as the
  // compute type asks.
  DPB_CUBLAS_CHECK(cublasGemmEx(cublas_, op_b, op_a, n, m, k, &alpha, b, cublas_data_type(ab_type),
                                ldb, a, cublas_data_type(ab_type), lda, &beta, c,
                                cublas_data_type(c_type), ldc, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::add_bias(float* y, const float* bias, int rows, int cols) {
  cuda_kernels::launch_add_bias(stream_, y, bias, rows, cols);
}

void CudaBackend::bias_gradient(DataType dy_type, const void* dy, float* dbias, int rows,
                                int cols) {
  cuda_kernels::launch_bias_gradient(stream_, dy_type, dy, dbias, rows, cols,
                                     bias_gradient_scratch_->as<float>());
}

void CudaBackend::relu_forward(DataType type, const void* x, void* y, size_t n) {
  cuda_kernels::launch_relu_forward(stream_, type, x, y, n);
}

void CudaBackend::relu_backward(DataType type, const void* y, const void* dy, void* dx, size_t n) {
  cuda_kernels::launch_relu_backward(stream_, type, y, dy, dx, n, 1.0f);
}

void CudaBackend::fill(DataType type, void* x, size_t n, float value) {
  cuda_kernels::launch_fill(stream_, type, x, n, value);
}

void CudaBackend::scale(float* x, size_t n, float alpha) {
  cuda_kernels::launch_scale(stream_, x, n, alpha);
}

void CudaBackend::axpy(float alpha, const float* x, float* y, size_t n) {
  cuda_kernels::launch_axpy(stream_, alpha, x, y, n);
}

void CudaBackend::add_tensors(DataType type, const void* a, const void* b, void* y, size_t n,
                              bool relu) {
  cuda_kernels::launch_add_tensors(stream_, type, a, b, y, n, relu);
}

void CudaBackend::add_tensors_backward(DataType type, const void* y, const void* dy, bool relu,
                                       void* da, void* db, size_t n) {
  cuda_kernels::launch_add_tensors_backward(stream_, type, y, dy, relu, da, db, n);
}

void CudaBackend::convert(DataType src_type, const void* src, DataType dst_type, void* dst,
                          size_t n, float scale) {
  // Threads write other elements than they read when the element sizes differ.
  if (src == dst && src_type != dst_type && n > 0) {
    throw RuntimeError(std::string("CudaBackend::convert: ") + data_type_name(src_type) + " to " +
                       data_type_name(dst_type) + " cannot be done in place");
  }
  cuda_kernels::launch_convert(stream_, src_type, src, dst_type, dst, n, scale);
}

void CudaBackend::softmax_cross_entropy(const float* logits, const int32_t* labels, int rows,
                                        int classes, float* row_losses, float* loss_out,
                                        float* dlogits, const float* loss_scale) {
  cuda_kernels::launch_softmax_cross_entropy(stream_, logits, labels, rows, classes, row_losses,
                                             loss_out, dlogits, loss_scale);
}

void CudaBackend::sgd_update(float* params, const float* grads, size_t n, float learning_rate,
                             const UpdateExtras& extras) {
  cuda_kernels::launch_sgd_update(stream_, params, grads, n, learning_rate, extras);
}

void CudaBackend::momentum_update(float* params, const float* grads, float* velocity, size_t n,
                                  float learning_rate, float momentum,
                                  const UpdateExtras& extras) {
  cuda_kernels::launch_momentum_update(stream_, params, grads, velocity, n, learning_rate,
                                       momentum, extras);
}

void CudaBackend::adam_update(float* params, const float* grads, float* m, float* v, size_t n,
                              float learning_rate, float beta1, float beta2, float epsilon,
                              int64_t step, float weight_decay, const UpdateExtras& extras) {
  // In double on the host: beta2^t for large t loses digits in float before it reaches 1 - x.
  // With extras.step_from_zero the kernel computes them on the device the same way (from the
  // step it reads there) and ignores these.
  float first_moment_correction = 1.0f, second_moment_correction = 1.0f;
  if (extras.step_from_zero == nullptr) {
    const double t = static_cast<double>(step);
    first_moment_correction = static_cast<float>(1.0 - std::pow(double{beta1}, t));
    second_moment_correction = static_cast<float>(1.0 - std::pow(double{beta2}, t));
  }
  // Rounded once from double, so a decay of 0 gives exactly 1.
  const float decay = static_cast<float>(1.0 - double{learning_rate} * double{weight_decay});
  cuda_kernels::launch_adam_update(stream_, params, grads, m, v, n, learning_rate, beta1, beta2,
                                   epsilon, first_moment_correction, second_moment_correction, decay,
                                   extras);
}

void CudaBackend::find_non_finite(const float* x, size_t n, LossScaleState* state) {
  cuda_kernels::launch_find_non_finite(stream_, x, n, state);
}

void CudaBackend::update_loss_scale(LossScaleState* state, int increase_every) {
  cuda_kernels::launch_update_loss_scale(stream_, state, increase_every);
}

void CudaBackend::fill_uniform_by_index(float* x, size_t n, uint64_t seed, uint64_t stream,
                                        uint64_t first_index, float lo, float hi) {
  cuda_kernels::launch_fill_uniform_by_index(stream_, x, n, seed, stream, first_index, lo, hi);
}

void CudaBackend::fill_labels_by_index(int32_t* labels, size_t n, uint64_t seed, uint64_t stream,
                                       uint64_t first_index, int classes) {
  cuda_kernels::launch_fill_labels_by_index(stream_, labels, n, seed, stream, first_index, classes);
}

void CudaBackend::append_scalar(const float* value, float* history, int32_t* cursor) {
  cuda_kernels::launch_append_scalar(stream_, value, history, cursor);
}

void CudaBackend::write_timestamp(int64_t* slot) { cuda_kernels::launch_write_timestamp(stream_, slot); }

void CudaBackend::lap(int64_t* clock, int64_t* total) { cuda_kernels::launch_lap(stream_, clock, total); }

void CudaBackend::add_elapsed_since(const int64_t* start, int64_t* total) {
  cuda_kernels::launch_add_elapsed_since(stream_, start, total);
}

double CudaBackend::sum_squares(const float* x, size_t n, void* scratch) {
  double* partials = static_cast<double*>(scratch);
  cuda_kernels::launch_sum_squares(stream_, x, n, partials);
  double result = 0.0;
  DPB_CUDA_CHECK(
      cudaMemcpyAsync(&result, partials, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  DPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return result;
}

size_t CudaBackend::sum_squares_scratch_bytes() const {
  return cuda_kernels::kSumSquaresMaxPartials * sizeof(double);
}

}  // namespace dpbench
