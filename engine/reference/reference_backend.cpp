// ReferenceBackend: every op as the textbook loop, in double where a sum is formed, so that it is
// obviously right. Speed matters only enough to keep tiny-shape end-to-end tests quick.
#include "engine/reference/reference_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "engine/backend/counter_random.h"
#include "engine/errors.h"
#include "engine/reference/reference_storage.h"

namespace dpbench {

using reference_detail::WidenedInput;
using reference_detail::WidenedOutput;
using reference_detail::with_type;

namespace {

// Elements a row-major (rows, cols) matrix with leading dimension ld spans.
size_t matrix_span(int rows, int cols, int ld) {
  if (rows <= 0 || cols <= 0) return 0;
  return static_cast<size_t>(rows - 1) * static_cast<size_t>(ld) + static_cast<size_t>(cols);
}

}  // namespace

void ReferenceBackend::gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
                            DataType ab_type, const void* a, int lda, const void* b, int ldb,
                            float beta, DataType c_type, void* c, int ldc) {
  if (c_type != DataType::f32 && c_type != ab_type)
    throw RuntimeError(std::string("gemm: C of ") + data_type_name(c_type) + " with A and B of " +
                       data_type_name(ab_type) + " (C is fp32 or the inputs' type)");
  const WidenedInput a_values(ab_type, a,
                              trans_a == Transpose::no ? matrix_span(m, k, lda) : matrix_span(k, m, lda));
  const WidenedInput b_values(ab_type, b,
                              trans_b == Transpose::no ? matrix_span(k, n, ldb) : matrix_span(n, k, ldb));
  const WidenedOutput c_values(c_type, c, matrix_span(m, n, ldc));
  gemm_f32(trans_a, trans_b, m, n, k, alpha, a_values.get(), lda, b_values.get(), ldb, beta,
           c_values.get(), ldc);
  c_values.store();
}

void ReferenceBackend::gemm_f32(Transpose trans_a, Transpose trans_b, int m, int n, int k,
                                float alpha, const float* a, int lda, const float* b, int ldb,
                                float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  // thread_local: one scratch per runner thread, so the reference devices never share state.
  thread_local std::vector<double> a_row;       // (k): row i of op(A)
  thread_local std::vector<double> row_result;  // (n): row i of op(A) op(B)
  a_row.assign(static_cast<size_t>(std::max(k, 0)), 0.0);
  row_result.assign(static_cast<size_t>(n), 0.0);

  for (int i = 0; i < m; ++i) {
    for (int p = 0; p < k; ++p) {
      a_row[p] = trans_a == Transpose::no ? a[static_cast<size_t>(i) * lda + p]
                                          : a[static_cast<size_t>(p) * lda + i];
    }
    if (trans_b == Transpose::no) {
      // Rank-1 updates along a contiguous row of B: the inner loop vectorises.
      std::fill(row_result.begin(), row_result.end(), 0.0);
      for (int p = 0; p < k; ++p) {
        const double a_ip = a_row[p];
        const float* b_row = b + static_cast<size_t>(p) * ldb;  // (n)
        for (int j = 0; j < n; ++j) row_result[j] += a_ip * b_row[j];
      }
    } else {
      // op(B) column j is row j of the stored B: a contiguous dot product.
      for (int j = 0; j < n; ++j) {
        const float* b_row = b + static_cast<size_t>(j) * ldb;  // (k)
        double sum = 0.0;
        for (int p = 0; p < k; ++p) sum += a_row[p] * b_row[p];
        row_result[j] = sum;
      }
    }
    float* c_row = c + static_cast<size_t>(i) * ldc;
    for (int j = 0; j < n; ++j) {
      // beta == 0 overwrites without reading, as BLAS does: C may hold garbage (even NaN).
      const double scaled = static_cast<double>(alpha) * row_result[j];
      c_row[j] = beta == 0.0f ? static_cast<float>(scaled)
                              : static_cast<float>(scaled + static_cast<double>(beta) * c_row[j]);
    }
  }
}

void ReferenceBackend::add_bias(float* y, const float* bias, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    float* y_row = y + static_cast<size_t>(r) * cols;
    for (int j = 0; j < cols; ++j) y_row[j] += bias[j];
  }
}

void ReferenceBackend::bias_gradient(DataType dy_type, const void* dy_data, float* dbias, int rows,
                                     int cols) {
  const WidenedInput dy_values(dy_type, dy_data, matrix_span(rows, cols, cols));
  const float* dy = dy_values.get();
  std::vector<double> sums(static_cast<size_t>(std::max(cols, 0)), 0.0);
  for (int r = 0; r < rows; ++r) {
    const float* dy_row = dy + static_cast<size_t>(r) * cols;
    for (int j = 0; j < cols; ++j) sums[j] += dy_row[j];
  }
  for (int j = 0; j < cols; ++j) dbias[j] = static_cast<float>(sums[j]);
}

void ReferenceBackend::relu_forward(DataType type, const void* x, void* y, size_t n) {
  with_type(type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t i = 0; i < n; ++i) {
      const float value = load_as_float(T, x, i);
      store_from_float(T, y, i, value > 0.0f ? value : 0.0f);
    }
  });
}

void ReferenceBackend::relu_backward(DataType type, const void* y, const void* dy, void* dx,
                                     size_t n) {
  with_type(type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t i = 0; i < n; ++i) {
      store_from_float(T, dx, i, load_as_float(T, y, i) > 0.0f ? load_as_float(T, dy, i) : 0.0f);
    }
  });
}

void ReferenceBackend::fill(DataType type, void* x, size_t n, float value) {
  with_type(type, [&](auto tag) {
    for (size_t i = 0; i < n; ++i) store_from_float(decltype(tag)::value, x, i, value);
  });
}

void ReferenceBackend::scale(float* x, size_t n, float alpha) {
  for (size_t i = 0; i < n; ++i) x[i] *= alpha;
}

void ReferenceBackend::axpy(float alpha, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void ReferenceBackend::add_tensors(DataType type, const void* a, const void* b, void* y, size_t n,
                                   bool relu) {
  with_type(type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t i = 0; i < n; ++i) {
      const float sum = load_as_float(T, a, i) + load_as_float(T, b, i);
      store_from_float(T, y, i, relu && !(sum > 0.0f) ? 0.0f : sum);
    }
  });
}

void ReferenceBackend::add_tensors_backward(DataType type, const void* y, const void* dy,
                                            bool relu, void* da, void* db, size_t n) {
  with_type(type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t i = 0; i < n; ++i) {
      const float g = relu && !(load_as_float(T, y, i) > 0.0f) ? 0.0f : load_as_float(T, dy, i);
      if (da != nullptr) store_from_float(T, da, i, g);
      if (db != nullptr) store_from_float(T, db, i, g);
    }
  });
}

void ReferenceBackend::convert(DataType src_type, const void* src, DataType dst_type, void* dst,
                               size_t n, float scale) {
  with_type(src_type, [&](auto src_tag) {
    with_type(dst_type, [&](auto dst_tag) {
      constexpr DataType S = decltype(src_tag)::value;
      constexpr DataType D = decltype(dst_tag)::value;
      // One float multiply, one rounding: what the GPU's convert kernel does.
      for (size_t i = 0; i < n; ++i) store_from_float(D, dst, i, load_as_float(S, src, i) * scale);
    });
  });
}

void ReferenceBackend::softmax_cross_entropy(const float* logits, const int32_t* labels, int rows,
                                             int classes, float* row_losses, float* loss_out,
                                             float* dlogits, const float* loss_scale) {
  // Applied in double before the one rounding to float: a power-of-two scale (all the loss scaler
  // produces) then gives exactly scale times the unscaled gradient.
  const double gradient_scale = loss_scale != nullptr ? *loss_scale : 1.0;
  double loss_sum = 0.0;
  for (int r = 0; r < rows; ++r) {
    const float* x = logits + static_cast<size_t>(r) * classes;  // (classes)
    float* dx = dlogits + static_cast<size_t>(r) * classes;      // (classes), may alias x
    const int label = labels[r];
    if (label < 0 || label >= classes) {
      throw RuntimeError("softmax_cross_entropy: label " + std::to_string(label) + " of row " +
                         std::to_string(r) + " is outside [0, " + std::to_string(classes) + ")");
    }
    // Subtracting the row maximum keeps exp() from overflowing; the softmax is unchanged.
    double row_max = x[0];
    for (int j = 1; j < classes; ++j) row_max = std::max(row_max, static_cast<double>(x[j]));
    double exp_sum = 0.0;
    for (int j = 0; j < classes; ++j) exp_sum += std::exp(x[j] - row_max);
    const double row_loss = std::log(exp_sum) - (x[label] - row_max);
    row_losses[r] = static_cast<float>(row_loss);
    loss_sum += row_loss;
    // Every read of x is done above, so writing dx in place is safe when it aliases x.
    for (int j = 0; j < classes; ++j) {
      const double probability = std::exp(x[j] - row_max) / exp_sum;
      dx[j] = static_cast<float>((probability - (j == label ? 1.0 : 0.0)) / rows * gradient_scale);
    }
  }
  *loss_out = rows > 0 ? static_cast<float>(loss_sum / rows) : 0.0f;
}

namespace {

// The parts of UpdateExtras every update rule shares.
struct ExtrasAccess {
  const UpdateExtras& extras;
  bool skipped() const { return extras.skip != nullptr && *extras.skip != 0; }
  // The gradient the rule sees, unscaled by one float multiply (as a fused GPU update does it).
  float gradient(const float* grads, size_t i) const {
    return extras.inverse_loss_scale != nullptr ? grads[i] * *extras.inverse_loss_scale : grads[i];
  }
  void refresh_half(size_t i, float param) const {
    if (extras.half_params != nullptr) {
      store_from_float(extras.half_type, extras.half_params, i, param);
    }
  }
};

}  // namespace

void ReferenceBackend::sgd_update(float* params, const float* grads, size_t n,
                                  float learning_rate, const UpdateExtras& extras) {
  const ExtrasAccess access{extras};
  if (access.skipped()) return;
  for (size_t i = 0; i < n; ++i) {
    params[i] -= learning_rate * access.gradient(grads, i);
    access.refresh_half(i, params[i]);
  }
}

void ReferenceBackend::momentum_update(float* params, const float* grads, float* velocity,
                                       size_t n, float learning_rate, float momentum,
                                       const UpdateExtras& extras) {
  const ExtrasAccess access{extras};
  if (access.skipped()) return;
  for (size_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(momentum) * velocity[i] + access.gradient(grads, i);
    velocity[i] = static_cast<float>(v);
    params[i] = static_cast<float>(params[i] - static_cast<double>(learning_rate) * v);
    access.refresh_half(i, params[i]);
  }
}

void ReferenceBackend::adam_update(float* params, const float* grads, float* m, float* v,
                                   size_t n, float learning_rate, float beta1, float beta2,
                                   float epsilon, int64_t step, float weight_decay,
                                   const UpdateExtras& extras) {
  const ExtrasAccess access{extras};
  if (access.skipped()) return;
  // A captured graph cannot take a new `step` argument each replay, so it reads the step counter
  // instead (host memory here); both give the same 1-based step.
  const int64_t t = extras.step_from_zero != nullptr
                        ? static_cast<int64_t>(*extras.step_from_zero) + 1
                        : step;
  const double b1 = beta1, b2 = beta2;
  const double first_moment_correction = 1.0 - std::pow(b1, static_cast<double>(t));
  const double second_moment_correction = 1.0 - std::pow(b2, static_cast<double>(t));
  // AdamW's decay shrinks the parameter before the Adam step reads it; exactly 1 without decay,
  // so plain Adam keeps its bits.
  const double decay = 1.0 - static_cast<double>(learning_rate) * weight_decay;
  for (size_t i = 0; i < n; ++i) {
    const double g = access.gradient(grads, i);
    const double m_new = b1 * m[i] + (1.0 - b1) * g;
    const double v_new = b2 * v[i] + (1.0 - b2) * g * g;
    m[i] = static_cast<float>(m_new);
    v[i] = static_cast<float>(v_new);
    const double m_hat = m_new / first_moment_correction;
    const double v_hat = v_new / second_moment_correction;
    params[i] = static_cast<float>(params[i] * decay - learning_rate * m_hat / (std::sqrt(v_hat) + epsilon));
    access.refresh_half(i, params[i]);
  }
}

void ReferenceBackend::find_non_finite(const float* x, size_t n, LossScaleState* state) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      state->non_finite = 1;
      return;
    }
  }
}

void ReferenceBackend::update_loss_scale(LossScaleState* state, int increase_every) {
  // Below 1 the scale would push small gradients further into fp16's underflow instead of
  // lifting them out; the 2^24 cap stops a long run of good steps from growing it without end.
  constexpr float kMinScale = 1.0f;
  constexpr float kMaxScale = 16777216.0f;  // 2^24
  if (state->non_finite != 0) {
    state->scale = std::max(kMinScale, state->scale * 0.5f);
    state->good_steps = 0;
  } else if (++state->good_steps >= increase_every) {
    state->scale = std::min(kMaxScale, state->scale * 2.0f);
    state->good_steps = 0;
  }
  state->inverse_scale = 1.0f / state->scale;
  state->non_finite = 0;
}

void ReferenceBackend::fill_uniform_by_index(float* x, size_t n, uint64_t seed, uint64_t stream,
                                             uint64_t first_index, float lo, float hi) {
  const float range = hi - lo;
  for (size_t i = 0; i < n; ++i) {
    // fma is rounded once on every platform and on the GPU, so both sides agree bit for bit
    // (a separate multiply and add could be fused on one side and not the other).
    x[i] = std::fma(range, counter_uniform(seed, stream, first_index + i), lo);
  }
}

void ReferenceBackend::fill_labels_by_index(int32_t* labels, size_t n, uint64_t seed,
                                            uint64_t stream, uint64_t first_index, int classes) {
  const uint32_t num_classes = static_cast<uint32_t>(classes);
  for (size_t i = 0; i < n; ++i) {
    labels[i] = static_cast<int32_t>(counter_uint(seed, stream, first_index + i) % num_classes);
  }
}

void ReferenceBackend::append_scalar(const float* value, float* history, int32_t* cursor) {
  history[*cursor] = *value;
  ++*cursor;
}

namespace {
int64_t steady_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void ReferenceBackend::write_timestamp(int64_t* slot) { *slot = steady_clock_ns(); }

void ReferenceBackend::add_elapsed_since(const int64_t* start, int64_t* total) {
  *total += steady_clock_ns() - *start;
}

void ReferenceBackend::lap(int64_t* clock, int64_t* total) {
  const int64_t now = steady_clock_ns();
  *total += now - *clock;
  *clock = now;
}

double ReferenceBackend::sum_squares(const float* x, size_t n, void* /*scratch*/) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

size_t ReferenceBackend::sum_squares_scratch_bytes() const { return 0; }

}  // namespace dpbench
