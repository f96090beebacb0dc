// [gpu] Every CUDA backend op against the reference backend on random shapes, plus the CudaDevice
// machinery (streams, events, host-visible memory, out-of-memory reporting).
//
// Comparison: |gpu - ref| <= atol + rtol * |ref| per element. The reference accumulates in double,
// so it is (almost) the exactly rounded answer and the tolerance only has to cover the GPU's fp32
// rounding. Each tolerance below says where it comes from; eps = 2^-23 (fp32 unit roundoff * 2).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/counter_random.h"
#include "engine/device_factory.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "tests/gpu/gpu_test_support.h"

using namespace dpbench;
using namespace dpbench::gpu_test;

TEST_CASE("cuda_device_count sees the GPU and the device describes itself", "[gpu]") {
  std::string why;
  REQUIRE(cuda_device_count(&why) > 0);
  auto gpu = make_gpu();
  CHECK(gpu->kind() == BackendKind::cuda);
  CHECK(gpu->index() == 0);
  CHECK_FALSE(gpu->description().name.empty());
  CHECK(gpu->description().memory_bytes > (1ull << 30));
  CHECK(gpu->description().compute_capability.find('.') != std::string::npos);
  CHECK(gpu->ops().kind() == BackendKind::cuda);
  CHECK(&gpu->ops(StreamKind::compute) != &gpu->ops(StreamKind::communication));
  CHECK(&gpu->ops(StreamKind::communication) != &gpu->ops(StreamKind::copy));
}

TEST_CASE("cuda gemm matches the reference on random shapes and all transposes", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  struct Shape { int m, n, k; };
  const Shape shapes[] = {{1, 1, 1}, {2, 3, 4}, {33, 17, 65}, {100, 37, 129}, {257, 31, 5},
                          {64, 3072, 256}, {128, 10, 3072}};
  uint64_t stream = 10;
  for (const Shape& s : shapes) {
    for (Transpose trans_a : {Transpose::no, Transpose::yes}) {
      for (Transpose trans_b : {Transpose::no, Transpose::yes}) {
        // Stored shapes: A (m, k) or (k, m), B (k, n) or (n, k); rows padded by 3 to exercise
        // leading dimensions larger than the width.
        const int a_rows = trans_a == Transpose::no ? s.m : s.k;
        const int a_cols = trans_a == Transpose::no ? s.k : s.m;
        const int b_rows = trans_b == Transpose::no ? s.k : s.n;
        const int b_cols = trans_b == Transpose::no ? s.n : s.k;
        const int lda = a_cols + 3, ldb = b_cols + 3, ldc = s.n + 3;
        const std::vector<float> a = random_vector(static_cast<size_t>(a_rows) * lda, stream++);
        const std::vector<float> b = random_vector(static_cast<size_t>(b_rows) * ldb, stream++);
        std::vector<float> c = random_vector(static_cast<size_t>(s.m) * ldc, stream++);
        const float alpha = 1.5f, beta = 0.5f;

        GpuArray<float> a_gpu(*gpu, a), b_gpu(*gpu, b), c_gpu(*gpu, c);
        gpu->ops().gemm(trans_a, trans_b, s.m, s.n, s.k, alpha, a_gpu.data(), lda, b_gpu.data(),
                        ldb, beta, c_gpu.data(), ldc);
        reference.gemm(trans_a, trans_b, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta,
                       c.data(), ldc);
        // fp32 dot products of k terms |a b| <= 1 (mean 1/4): rounding errors behave like a random
        // walk, so the error is about sqrt(k) * eps * sum|a b| ~ sqrt(k) * eps * k / 4 (Higham &
        // Mary's probabilistic bound), times alpha; we allow 2x that, plus a few eps for beta * C.
        const double atol = 2.0 * alpha * std::sqrt(s.k) * kEps * s.k / 4.0 + 4 * kEps;
        std::ostringstream what;
        what << "gemm m=" << s.m << " n=" << s.n << " k=" << s.k << " trans_a="
             << (trans_a == Transpose::yes) << " trans_b=" << (trans_b == Transpose::yes);
        check_close(c_gpu.download(), c, atol, 4 * kEps, what.str());
      }
    }
  }
}

TEST_CASE("cuda bias add and bias gradient match the reference", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  const std::pair<int, int> shapes[] = {{1, 1}, {7, 33}, {128, 10}, {1000, 257}, {3, 4099}};
  for (auto [rows, cols] : shapes) {
    const size_t count = static_cast<size_t>(rows) * cols;
    std::vector<float> y = random_vector(count, 1);
    const std::vector<float> bias = random_vector(cols, 2);
    GpuArray<float> y_gpu(*gpu, y), bias_gpu(*gpu, bias);
    gpu->ops().add_bias(y_gpu.data(), bias_gpu.data(), rows, cols);
    reference.add_bias(y.data(), bias.data(), rows, cols);
    // One fp32 addition: both round the same exact sum, so the results are identical.
    check_close(y_gpu.download(), y, 0.0, 0.0, "add_bias " + std::to_string(rows) + "x" +
                                                   std::to_string(cols));

    GpuArray<float> dbias_gpu(*gpu, random_vector(cols, 3));  // must be overwritten
    gpu->ops().bias_gradient(y_gpu.data(), dbias_gpu.data(), rows, cols);
    std::vector<float> dbias(cols);
    reference.bias_gradient(y.data(), dbias.data(), rows, cols);
    // fp32 sum of `rows` terms of size <= 2: worst case rows * eps * sum|dy| <= rows^2 * 2 eps;
    // the random-walk estimate sqrt(rows) * eps * 2 rows is what we allow (with margin 2).
    const double atol = 2.0 * std::sqrt(rows) * kEps * 2.0 * rows + kEps;
    check_close(dbias_gpu.download(), dbias, atol, 4 * kEps,
                "bias_gradient " + std::to_string(rows) + "x" + std::to_string(cols));
  }
}

TEST_CASE("cuda element-wise ops match the reference", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  for (size_t n : {size_t{1}, size_t{31}, size_t{1000}, size_t{1} << 20, (size_t{1} << 22) + 7}) {
    const std::string size = " n=" + std::to_string(n);
    std::vector<float> x = random_vector(n, 20);
    std::vector<float> y = random_vector(n, 21);
    GpuArray<float> x_gpu(*gpu, x), y_gpu(*gpu, y), out_gpu(*gpu, n);
    std::vector<float> out(n);

    // ReLU, fill and scale are single exact or correctly rounded operations: bit-identical.
    gpu->ops().relu_forward(x_gpu.data(), out_gpu.data(), n);
    reference.relu_forward(x.data(), out.data(), n);
    check_close(out_gpu.download(), out, 0.0, 0.0, "relu_forward" + size);

    gpu->ops().relu_backward(out_gpu.data(), y_gpu.data(), y_gpu.data(), n);  // in place
    std::vector<float> dx = y;
    reference.relu_backward(out.data(), dx.data(), dx.data(), n);
    check_close(y_gpu.download(), dx, 0.0, 0.0, "relu_backward" + size);

    gpu->ops().fill(out_gpu.data(), n, 0.375f);
    reference.fill(out.data(), n, 0.375f);
    check_close(out_gpu.download(), out, 0.0, 0.0, "fill" + size);

    gpu->ops().scale(x_gpu.data(), n, -1.7f);
    reference.scale(x.data(), n, -1.7f);
    check_close(x_gpu.download(), x, 0.0, 0.0, "scale" + size);

    // The GPU fuses y + alpha*x into one fma, the reference may round the product first: they
    // differ by at most one rounding of |alpha x| + |y| <= 0.75 * 1.7 + 1, i.e. ~2.3 eps / 2.
    std::vector<float> target = random_vector(n, 22);
    GpuArray<float> target_gpu(*gpu, target);
    gpu->ops().axpy(0.75f, x_gpu.data(), target_gpu.data(), n);
    reference.axpy(0.75f, x.data(), target.data(), n);
    check_close(target_gpu.download(), target, 4 * kEps, 2 * kEps, "axpy" + size);

    // One addition (then a comparison): bit-identical, vectorised or not (offset by one float
    // the pointers lose their 16-byte alignment and the kernel takes elements one by one).
    for (const size_t offset : {size_t{0}, size_t{1}}) {
      if (offset >= n) continue;
      const size_t m = n - offset;
      const std::string variant = size + (offset ? " unaligned" : " aligned");
      for (const bool relu : {false, true}) {
        const std::string name = relu ? "add_tensors+relu" : "add_tensors";
        GpuArray<float> a_gpu(*gpu, x), b_gpu(*gpu, y), sum_gpu(*gpu, n), da_gpu(*gpu, n), db_gpu(*gpu, n);
        std::vector<float> sum(n), da(n), db(n);
        gpu->ops().add_tensors(a_gpu.data() + offset, b_gpu.data() + offset, sum_gpu.data() + offset, m, relu);
        reference.add_tensors(x.data() + offset, y.data() + offset, sum.data() + offset, m, relu);
        const std::vector<float> sum_host = sum_gpu.download();
        check_close(std::vector<float>(sum_host.begin() + offset, sum_host.end()),
                    std::vector<float>(sum.begin() + offset, sum.end()), 0.0, 0.0, name + variant);
        // b's values serve as the incoming gradient.
        gpu->ops().add_tensors_backward(sum_gpu.data() + offset, b_gpu.data() + offset, relu,
                                        da_gpu.data() + offset, db_gpu.data() + offset, m);
        reference.add_tensors_backward(sum.data() + offset, y.data() + offset, relu,
                                       da.data() + offset, db.data() + offset, m);
        const std::vector<float> da_host = da_gpu.download(), db_host = db_gpu.download();
        check_close(std::vector<float>(da_host.begin() + offset, da_host.end()),
                    std::vector<float>(da.begin() + offset, da.end()), 0.0, 0.0, name + " backward" + variant);
        check_close(std::vector<float>(db_host.begin() + offset, db_host.end()),
                    std::vector<float>(db.begin() + offset, db.end()), 0.0, 0.0, name + " backward" + variant);
      }
    }
  }
}

TEST_CASE("cuda softmax cross-entropy matches the reference; loss lands in host-visible memory",
          "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  struct Shape { int rows, classes; float offset; };
  // Offsets of 50 check the row-maximum subtraction: exp(50) alone would be 5e21.
  const Shape shapes[] = {{1, 2, 0}, {2, 3, 0}, {64, 10, 0}, {33, 1000, 0}, {7, 50000, 0},
                          {128, 10, 50}, {5, 129, 50}};
  for (const Shape& s : shapes) {
    const size_t count = static_cast<size_t>(s.rows) * s.classes;
    const std::vector<float> logits = random_vector(count, 30, s.offset - 4.0f, s.offset + 4.0f);
    std::vector<int32_t> labels(s.rows);
    reference.fill_labels_by_index(labels.data(), labels.size(), 7, kRandomStreamLabels, 0,
                                   s.classes);

    GpuArray<float> logits_gpu(*gpu, logits), row_losses_gpu(*gpu, s.rows);
    GpuArray<int32_t> labels_gpu(*gpu, labels);
    Buffer loss_host_visible = gpu->allocate_host_visible(sizeof(float));
    float* loss_gpu = loss_host_visible.as<float>();
    *loss_gpu = -1.0f;
    // dlogits written in place over the logits, the aliasing layers use.
    gpu->ops().softmax_cross_entropy(logits_gpu.data(), labels_gpu.data(), s.rows, s.classes,
                                     row_losses_gpu.data(), loss_gpu, logits_gpu.data());
    gpu->synchronize();
    const float loss_seen_by_host = *loss_gpu;  // no copy: the kernel wrote host memory

    std::vector<float> row_losses(s.rows), dlogits(count);
    float loss = 0.0f;
    reference.softmax_cross_entropy(logits.data(), labels.data(), s.rows, s.classes,
                                    row_losses.data(), &loss, dlogits.data());

    // The GPU sums `classes` exponentials (each < 1 after the max shift) in fp32 and uses expf
    // (<= 2 ulp): the sum's relative error is below (classes + 4) eps, which is the absolute
    // error of log(sum), the row loss. Probabilities p carry the same relative error, so
    // dlogits = (p - onehot) / rows is off by at most (classes + 4) eps / rows. Margin 2.
    const double loss_atol = 2.0 * (s.classes + 4) * kEps;
    const std::string what = " " + std::to_string(s.rows) + "x" + std::to_string(s.classes);
    check_close(row_losses_gpu.download(), row_losses, loss_atol, 4 * kEps, "row losses" + what);
    check_close({loss_seen_by_host}, {loss}, loss_atol, 4 * kEps, "mean loss" + what);
    check_close(logits_gpu.download(), dlogits, loss_atol / s.rows, 0.0, "dlogits" + what);
  }
}

TEST_CASE("cuda optimizers match the reference over several steps", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  // The reference keeps intermediates in double, the GPU in fp32 (with fused multiply-adds): a
  // handful of roundings of O(1) values per step, so parameters (|p| <= 1, updates <= lr, the
  // momentum velocity <= 3) differ by a few ulps per step: 1e-6 absolute (8 eps) over 3 steps.
  // Adam's m = 0.9 m + 0.1 g can cancel, leaving an absolute error of one rounding of the terms
  // (~0.2 eps); v sums positive terms only, so its error is purely relative (a few eps).
  const double atol = 1e-6, rtol = 1e-5;
  enum class Optimizer { sgd, momentum, adam };
  for (Optimizer optimizer : {Optimizer::sgd, Optimizer::momentum, Optimizer::adam}) {
    for (size_t n : {size_t{1}, size_t{1000}, (size_t{1} << 20) + 3}) {
      const std::string name = optimizer == Optimizer::sgd        ? "sgd"
                               : optimizer == Optimizer::momentum ? "momentum"
                                                                  : "adam";
      const std::string what = name + " n=" + std::to_string(n);
      std::vector<float> params = random_vector(n, 40), state_a(n, 0.0f), state_b(n, 0.0f);
      GpuArray<float> params_gpu(*gpu, params), state_a_gpu(*gpu, state_a),
          state_b_gpu(*gpu, state_b);
      for (int step = 1; step <= 3; ++step) {
        const std::vector<float> grads = random_vector(n, 40 + step);
        GpuArray<float> grads_gpu(*gpu, grads);
        Backend& ops = gpu->ops();
        switch (optimizer) {
          case Optimizer::sgd:
            ops.sgd_update(params_gpu.data(), grads_gpu.data(), n, 0.1f);
            reference.sgd_update(params.data(), grads.data(), n, 0.1f);
            break;
          case Optimizer::momentum:
            ops.momentum_update(params_gpu.data(), grads_gpu.data(), state_a_gpu.data(), n, 0.1f,
                                0.9f);
            reference.momentum_update(params.data(), grads.data(), state_a.data(), n, 0.1f, 0.9f);
            break;
          case Optimizer::adam:
            ops.adam_update(params_gpu.data(), grads_gpu.data(), state_a_gpu.data(),
                            state_b_gpu.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, step);
            reference.adam_update(params.data(), grads.data(), state_a.data(), state_b.data(), n,
                                  1e-3f, 0.9f, 0.999f, 1e-8f, step);
            break;
        }
      }
      check_close(params_gpu.download(), params, atol, rtol, what + " params");
      if (optimizer == Optimizer::momentum) {
        check_close(state_a_gpu.download(), state_a, atol, rtol, what + " velocity");
      }
      if (optimizer == Optimizer::adam) {
        check_close(state_a_gpu.download(), state_a, 1e-7, rtol, what + " m");
        check_close(state_b_gpu.download(), state_b, 1e-12, rtol, what + " v");
      }
    }
  }
}

TEST_CASE("cuda synthetic fills are bit-identical to the reference", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  const uint64_t first_indices[] = {0, 12345, uint64_t{1} << 40};
  for (size_t n : {size_t{1}, size_t{257}, (size_t{1} << 21) + 5}) {
    for (uint64_t first_index : first_indices) {
      GpuArray<float> values_gpu(*gpu, n);
      gpu->ops().fill_uniform_by_index(values_gpu.data(), n, 1234, kRandomStreamInputs,
                                       first_index, -0.5f, 2.0f);
      std::vector<float> values(n);
      reference.fill_uniform_by_index(values.data(), n, 1234, kRandomStreamInputs, first_index,
                                      -0.5f, 2.0f);
      const std::vector<float> from_gpu = values_gpu.download();
      INFO("uniform n=" << n << " first_index=" << first_index);
      CHECK(std::memcmp(from_gpu.data(), values.data(), n * sizeof(float)) == 0);

      GpuArray<int32_t> labels_gpu(*gpu, n);
      gpu->ops().fill_labels_by_index(labels_gpu.data(), n, 1234, kRandomStreamLabels,
                                      first_index, 1000);
      std::vector<int32_t> labels(n);
      reference.fill_labels_by_index(labels.data(), n, 1234, kRandomStreamLabels, first_index,
                                     1000);
      const std::vector<int32_t> labels_from_gpu = labels_gpu.download();
      size_t different = 0;  // a count, not vector ==, which Catch would print in full
      for (size_t i = 0; i < n; ++i) different += labels_from_gpu[i] != labels[i];
      CHECK(different == 0);
    }
  }
}

TEST_CASE("cuda sum of squares matches the reference and is reproducible", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  Buffer scratch = gpu->allocate(gpu->ops().sum_squares_scratch_bytes());
  for (size_t n : {size_t{0}, size_t{1}, size_t{255}, size_t{100000}, (size_t{1} << 24) + 11}) {
    const std::vector<float> x = random_vector(n, 50);
    GpuArray<float> x_gpu(*gpu, x);
    const double gpu_sum = gpu->ops().sum_squares(x_gpu.data(), n, scratch.data());
    const double again = gpu->ops().sum_squares(x_gpu.data(), n, scratch.data());
    const double ref_sum = reference.sum_squares(x.data(), n, nullptr);
    INFO("n=" << n);
    CHECK(gpu_sum == again);  // fixed reduction order: the same bits every time
    // Both sum exact squares (a float squared fits a double) of positive terms in double, only in
    // different orders; the reference's running sum has the classic bound n * 2^-53 relative.
    CHECK(std::fabs(gpu_sum - ref_sum) <= static_cast<double>(n) * 0x1p-53 * std::fabs(ref_sum));
  }
}

TEST_CASE("cuda events time work, and wait orders one stream after another", "[gpu]") {
  auto gpu = make_gpu();
  const size_t n = size_t{1} << 24;
  GpuArray<float> data(*gpu, n);
  auto start = gpu->create_event(true);
  auto end = gpu->create_event(true);
  auto ordering = gpu->create_event(false);

  start->record(StreamKind::compute);
  for (int i = 0; i < 10; ++i) gpu->ops(StreamKind::compute).fill(data.data(), n, 1.0f);
  end->record(StreamKind::compute);
  ordering->record(StreamKind::compute);
  // The communication stream may only scale once the compute stream's fills are done; without
  // the wait the scale could run first and leave 1.0s behind.
  gpu->wait(StreamKind::communication, *ordering);
  gpu->ops(StreamKind::communication).scale(data.data(), n, 2.0f);
  end->synchronize();
  CHECK(end->elapsed_ms_since(*start) >= 0.0);
  gpu->synchronize();
  const std::vector<float> values = data.download();
  size_t wrong = 0;
  for (float v : values) wrong += v != 2.0f;
  CHECK(wrong == 0);

  // The copy stream works as well, and waiting on an already-complete event is harmless.
  gpu->wait(StreamKind::copy, *end);
  gpu->ops(StreamKind::copy).fill(data.data(), n, 3.0f);
  gpu->synchronize();
  CHECK(data.download()[n - 1] == 3.0f);
}

TEST_CASE("an absurd allocation reports out of GPU memory and leaves the device usable", "[gpu]") {
  auto gpu = make_gpu();
  const size_t one_pebibyte = size_t{1} << 50;
  try {
    Buffer impossible = gpu->allocate(one_pebibyte);
    FAIL("allocating 1 PiB succeeded");
  } catch (const RuntimeError& error) {
    INFO(error.what());
    CHECK(std::string(error.what()).find("out of GPU memory") != std::string::npos);
    CHECK(std::string(error.what()).find("--batch_size") != std::string::npos);
  }
  // The failed cudaMalloc must not linger as a "last error" that a later launch check reports.
  GpuArray<float> small(*gpu, 1000);
  gpu->ops().fill(small.data(), 1000, 5.0f);
  CHECK(small.download()[999] == 5.0f);
}

TEST_CASE("a captured step replays its work, and append_scalar files each replay's value", "[gpu]") {
  auto gpu = make_gpu();
  GpuArray<float> value(*gpu, std::vector<float>{0.0f});
  GpuArray<int32_t> cursor(*gpu, std::vector<int32_t>{0});
  Buffer history = gpu->allocate_host_visible(4 * sizeof(float));
  std::fill_n(history.as<float>(), 4, -1.0f);
  // The captured work adds 1.5 to `value` and files it: replaying it three times must give
  // 1.5, 3.0, 4.5 — capture alone runs nothing.
  const std::vector<float> one_and_a_half{1.5f};
  GpuArray<float> increment(*gpu, one_and_a_half);
  std::unique_ptr<CapturedWork> step = gpu->capture([&] {
    gpu->ops().axpy(1.0f, increment.data(), value.data(), 1);
    gpu->ops().append_scalar(value.data(), history.as<float>(), cursor.data());
  });
  REQUIRE(step != nullptr);
  gpu->synchronize();
  CHECK(value.download()[0] == 0.0f);
  for (int i = 0; i < 3; ++i) step->launch();
  gpu->synchronize();
  CHECK(cursor.download()[0] == 3);
  CHECK(history.as<float>()[0] == 1.5f);
  CHECK(history.as<float>()[1] == 3.0f);
  CHECK(history.as<float>()[2] == 4.5f);
  CHECK(history.as<float>()[3] == -1.0f);
}
