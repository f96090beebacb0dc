// ReferenceBackend: the host oracle. Plain, synchronous C++ for every Backend op, accumulating in
// double where order matters, so [gpu] tests and the CI end-to-end runs have a trustworthy baseline.
#pragma once

#include "engine/backend.h"

namespace dpbench {

// Stateless: one instance can serve every stream of a reference device, and since each reference
// device is driven by a single runner thread, "enqueue on a stream" simply means "run now".
class ReferenceBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::reference; }

  void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const float* a,
            int lda, const float* b, int ldb, float beta, float* c, int ldc) override;
  void add_bias(float* y, const float* bias, int rows, int cols) override;
  void bias_gradient(const float* dy, float* dbias, int rows, int cols) override;

  void relu_forward(const float* x, float* y, size_t n) override;
  void relu_backward(const float* y, const float* dy, float* dx, size_t n) override;
  void fill(float* x, size_t n, float value) override;
  void scale(float* x, size_t n, float alpha) override;
  void axpy(float alpha, const float* x, float* y, size_t n) override;

  void softmax_cross_entropy(const float* logits, const int32_t* labels, int rows, int classes,
                             float* row_losses, float* loss_out, float* dlogits) override;

  void sgd_update(float* params, const float* grads, size_t n, float learning_rate) override;
  void momentum_update(float* params, const float* grads, float* velocity, size_t n,
                       float learning_rate, float momentum) override;
  void adam_update(float* params, const float* grads, float* m, float* v, size_t n,
                   float learning_rate, float beta1, float beta2, float epsilon,
                   int64_t step) override;

  void fill_uniform_by_index(float* x, size_t n, uint64_t seed, uint64_t stream,
                             uint64_t first_index, float lo, float hi) override;
  void fill_labels_by_index(int32_t* labels, size_t n, uint64_t seed, uint64_t stream,
                            uint64_t first_index, int classes) override;

  void append_scalar(const float* value, float* history, int32_t* cursor) override;
  double sum_squares(const float* x, size_t n, void* scratch) override;
  size_t sum_squares_scratch_bytes() const override { return 0; }
};

}  // namespace dpbench
