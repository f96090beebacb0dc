// [gpu] Every CUDA backend op against the reference backend on random shapes, plus the CudaDevice
// machinery (streams, events, host-visible memory, out-of-memory reporting) and the mixed-precision
// pieces: typed element-wise ops and conversions in fp32, fp16 and bf16, loss scaling (scaled
// dlogits, non-finite detection, the scale's update rule) and the optimizers' fused extras.
//
// Comparison: |gpu - ref| <= atol + rtol * |ref| per element. The reference accumulates in double,
// so it is (almost) the exactly rounded answer and the tolerance only has to cover the GPU's fp32
// rounding. Each tolerance below says where it comes from; eps = 2^-23 (fp32 unit roundoff * 2).
// Element-wise ops on 16-bit data compute one fp32 value per element and round it once, as the
// reference does, so they are compared for exact equality.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/counter_random.h"
#include "engine/backends.h"
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

    // Fill and scale are single exact or correctly rounded operations: bit-identical.
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

    // The float* conveniences of the typed ops (fp32, the same kernels as the typed test below).
    gpu->ops().relu_forward(y_gpu.data(), out_gpu.data(), n);
    reference.relu_forward(y.data(), out.data(), n);
    check_close(out_gpu.download(), out, 0.0, 0.0, "relu_forward (float*)" + size);
    gpu->ops().add_tensors(x_gpu.data(), y_gpu.data(), out_gpu.data(), n, true);
    reference.add_tensors(x.data(), y.data(), out.data(), n, true);
    check_close(out_gpu.download(), out, 0.0, 0.0, "add_tensors (float*)" + size);
  }
}

TEST_CASE("cuda typed ReLU and residual joins match the reference bit for bit in every type",
          "[gpu]") {
  // Each element is one comparison, or one fp32 addition of two stored values (then a
  // comparison), rounded once to the storage type. Both backends round the same fp32 value
  // (an fp32 sum of two 16-bit values is the exact sum rounded once, however it is computed),
  // so every type must agree exactly. Offset 1 element misaligns every pointer, which sends the
  // kernels down their element-by-element path; sizes not a multiple of 8 exercise the tail.
  auto gpu = make_gpu();
  ReferenceBackend reference;
  for (DataType type : kAllTypes) {
    for (size_t n : {size_t{1}, size_t{31}, size_t{1000}, size_t{1} << 20, (size_t{1} << 22) + 7}) {
      const std::vector<float> x = rounded(type, random_vector(n, 20));
      const std::vector<float> y = rounded(type, random_vector(n, 21));
      for (const size_t offset : {size_t{0}, size_t{1}}) {
        const std::string variant = " n=" + std::to_string(n) + (offset ? " unaligned" : " aligned") +
                                    type_suffix(type);
        {
          GpuTensor x_gpu(*gpu, type, x, offset), out_gpu(*gpu, type, n, offset),
              dy_gpu(*gpu, type, y, offset);
          HostTensor x_ref(type, x), out_ref(type, n), dy_ref(type, y);
          gpu->ops().relu_forward(type, x_gpu.data(), out_gpu.data(), n);
          reference.relu_forward(type, x_ref.data(), out_ref.data(), n);
          check_same_values(out_gpu.values(), out_ref.values(), "relu_forward" + variant);
          // In place, dx over dy, as layers call it.
          gpu->ops().relu_backward(type, out_gpu.data(), dy_gpu.data(), dy_gpu.data(), n);
          reference.relu_backward(type, out_ref.data(), dy_ref.data(), dy_ref.data(), n);
          check_same_values(dy_gpu.values(), dy_ref.values(), "relu_backward in place" + variant);
        }
        for (const bool relu : {false, true}) {
          const std::string name = relu ? "add_tensors+relu" : "add_tensors";
          GpuTensor a_gpu(*gpu, type, x, offset), b_gpu(*gpu, type, y, offset),
              sum_gpu(*gpu, type, n, offset), da_gpu(*gpu, type, n, offset),
              db_gpu(*gpu, type, n, offset);
          HostTensor a_ref(type, x), b_ref(type, y), sum_ref(type, n), da_ref(type, n),
              db_ref(type, n);
          gpu->ops().add_tensors(type, a_gpu.data(), b_gpu.data(), sum_gpu.data(), n, relu);
          reference.add_tensors(type, a_ref.data(), b_ref.data(), sum_ref.data(), n, relu);
          const std::vector<float> sum = sum_ref.values();
          check_same_values(sum_gpu.values(), sum, name + variant);
          // b's values serve as the incoming gradient.
          gpu->ops().add_tensors_backward(type, sum_gpu.data(), b_gpu.data(), relu, da_gpu.data(),
                                          db_gpu.data(), n);
          reference.add_tensors_backward(type, sum_ref.data(), b_ref.data(), relu, da_ref.data(),
                                         db_ref.data(), n);
          check_same_values(da_gpu.values(), da_ref.values(), name + " backward da" + variant);
          check_same_values(db_gpu.values(), db_ref.values(), name + " backward db" + variant);

          // The output written over an input (y over a, a residual join in place), and the
          // backward's only output over dy with the other not wanted.
          gpu->ops().add_tensors(type, a_gpu.data(), b_gpu.data(), a_gpu.data(), n, relu);
          check_same_values(a_gpu.values(), sum, name + " in place" + variant);
          gpu->ops().add_tensors_backward(type, sum_gpu.data(), b_gpu.data(), relu, nullptr,
                                          b_gpu.data(), n);
          check_same_values(b_gpu.values(), db_ref.values(), name + " backward in place" + variant);
        }
      }
    }
  }
}

TEST_CASE("cuda convert rounds like the host conversions between every pair of types", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;

  // Values chosen to land on the rules (round to nearest, ties to even; overflow to infinity):
  //   1 + 2^-8, 1 + 3 * 2^-8     halfway between bf16 neighbours: to 1 and to 1 + 2^-6 (even)
  //   1 + 2^-11, 1 + 3 * 2^-11   the same for fp16: to 1 and to 1 + 2^-9
  //   65504, 65519.99, 65520     fp16's largest finite value; just below and at the halfway
  //                              point to 2^16, which rounds to infinity
  //   2^-24, 2^-25, 3 * 2^-25    fp16's smallest subnormal; ties at the subnormal spacing
  //   FLT_MAX                    beyond bf16's largest finite value: infinity
  // plus infinities, NaN and signed zeros.
  struct Expected {
    float value, as_f16, as_bf16;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const Expected table[] = {
      {1.0f + 0x1p-8f, 1.0f + 0x1p-8f, 1.0f},
      {1.0f + 3 * 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-6f},
      {1.0f + 0x1p-11f, 1.0f, 1.0f},
      {1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-9f, 1.0f},
      {-(1.0f + 3 * 0x1p-11f), -(1.0f + 0x1p-9f), -1.0f},
      {65504.0f, 65504.0f, 65536.0f},
      {65519.99f, 65504.0f, 65536.0f},
      {65520.0f, inf, 65536.0f},
      {-1e5f, -inf, -99840.0f},
      {0x1p-24f, 0x1p-24f, 0x1p-24f},
      {0x1p-25f, 0.0f, 0x1p-25f},
      {3 * 0x1p-25f, 0x1p-23f, 3 * 0x1p-25f},
      {std::numeric_limits<float>::max(), inf, inf},
      {inf, inf, inf},
      {-inf, -inf, -inf},
      {0.0f, 0.0f, 0.0f},
      {-0.0f, -0.0f, -0.0f},
  };
  std::vector<float> special, want_f16, want_bf16;
  for (const Expected& e : table) {
    special.push_back(e.value);
    want_f16.push_back(e.as_f16);
    want_bf16.push_back(e.as_bf16);
  }
  special.push_back(std::nanf(""));
  want_f16.push_back(std::nanf(""));
  want_bf16.push_back(std::nanf(""));
  GpuTensor special_gpu(*gpu, DataType::f32, special), to_f16(*gpu, DataType::f16, special.size()),
      to_bf16(*gpu, DataType::bf16, special.size());
  gpu->ops().convert(DataType::f32, special_gpu.data(), DataType::f16, to_f16.data(), special.size());
  gpu->ops().convert(DataType::f32, special_gpu.data(), DataType::bf16, to_bf16.data(),
                     special.size());
  check_same_values(to_f16.values(), want_f16, "fp32 to fp16, special values");
  check_same_values(to_bf16.values(), want_bf16, "fp32 to bf16, special values");

  // Random values of several binades (|x| up to 2^17, so fp16 overflows for some), every pair of
  // types, with scales 1, the loss-scaling powers of two and one that is not: the GPU must round
  // src * scale (an fp32 product) exactly as store_from_float does, and as the reference does.
  const size_t n = (size_t{1} << 18) + 5;
  std::vector<float> values = random_vector(n, 60);
  const std::vector<float> exponents = random_vector(n, 61, -20.0f, 17.0f);
  for (size_t i = 0; i < n; ++i) values[i] = std::ldexp(values[i], static_cast<int>(exponents[i]));
  for (DataType from : kAllTypes) {
    const std::vector<float> source = rounded(from, values);
    for (DataType to : kAllTypes) {
      for (const float scale : {1.0f, 0x1p-10f, 1024.0f, 0.3f}) {
        for (const size_t offset : {size_t{0}, size_t{1}}) {
          std::ostringstream what;
          what << "convert " << data_type_name(from) << " to " << data_type_name(to) << " scale "
               << scale << (offset ? " unaligned" : "");
          GpuTensor src_gpu(*gpu, from, source, offset), dst_gpu(*gpu, to, n, offset);
          gpu->ops().convert(from, src_gpu.data(), to, dst_gpu.data(), n, scale);
          std::vector<float> expected(n);
          for (size_t i = 0; i < n; ++i) expected[i] = round_to(to, source[i] * scale);
          const std::vector<float> from_gpu = dst_gpu.values();
          check_same_values(from_gpu, expected, what.str());
          HostTensor src_ref(from, source), dst_ref(to, n);
          reference.convert(from, src_ref.data(), to, dst_ref.data(), n, scale);
          check_same_values(from_gpu, dst_ref.values(), what.str() + " vs reference");
        }
      }
    }
    // In place within one type (the unscaling of a gradient buffer).
    GpuTensor in_place(*gpu, from, source);
    gpu->ops().convert(from, in_place.data(), from, in_place.data(), n, 0x1p-10f);
    std::vector<float> expected(n);
    for (size_t i = 0; i < n; ++i) expected[i] = round_to(from, source[i] * 0x1p-10f);
    check_same_values(in_place.values(), expected,
                      std::string("convert in place ") + data_type_name(from));
  }
  // Between types of different sizes, in place would have threads overwrite what others still
  // have to read: refused.
  GpuTensor buffer(*gpu, DataType::f32, 64);
  CHECK_THROWS_AS(gpu->ops().convert(DataType::f32, buffer.data(), DataType::bf16, buffer.data(), 64),
                  RuntimeError);
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
    Buffer loss_host_visible = gpu->allocate_host_visible(sizeof(float), kTestBuffer);
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

TEST_CASE("cuda softmax cross-entropy scales dlogits by the device-side loss scale", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  const int rows = 33, classes = 1000;
  const size_t count = static_cast<size_t>(rows) * classes;
  const std::vector<float> logits = random_vector(count, 31, -4.0f, 4.0f);
  std::vector<int32_t> labels(rows);
  reference.fill_labels_by_index(labels.data(), labels.size(), 7, kRandomStreamLabels, 0, classes);
  GpuArray<int32_t> labels_gpu(*gpu, labels);
  GpuArray<float> row_losses_gpu(*gpu, rows), loss_gpu(*gpu, 1);

  // Unscaled, then scaled by 2^15 from device memory: a power of two scales exactly, so the
  // scaled gradient is the unscaled one times the scale to the bit, and the loss is unchanged.
  GpuArray<float> plain_gpu(*gpu, logits), scaled_gpu(*gpu, logits);
  gpu->ops().softmax_cross_entropy(plain_gpu.data(), labels_gpu.data(), rows, classes,
                                   row_losses_gpu.data(), loss_gpu.data(), plain_gpu.data());
  const float plain_loss = loss_gpu.download()[0];
  const float scale = 32768.0f;
  GpuArray<float> scale_gpu(*gpu, std::vector<float>{scale});
  gpu->ops().softmax_cross_entropy(scaled_gpu.data(), labels_gpu.data(), rows, classes,
                                   row_losses_gpu.data(), loss_gpu.data(), scaled_gpu.data(),
                                   scale_gpu.data());
  CHECK(loss_gpu.download()[0] == plain_loss);
  std::vector<float> expected = plain_gpu.download();
  for (float& v : expected) v *= scale;
  const std::vector<float> scaled = scaled_gpu.download();
  check_identical(scaled, expected, "dlogits scaled by 2^15");

  // Against the reference with the same scale: the unscaled test's tolerance, times the scale.
  std::vector<float> row_losses(rows), dlogits(count);
  float loss = 0.0f;
  reference.softmax_cross_entropy(logits.data(), labels.data(), rows, classes, row_losses.data(),
                                  &loss, dlogits.data(), &scale);
  const double loss_atol = 2.0 * (classes + 4) * kEps;
  check_close({plain_loss}, {loss}, loss_atol, 4 * kEps, "mean loss with a loss scale");
  check_close(scaled, dlogits, scale * loss_atol / rows, 0.0, "scaled dlogits vs reference");

  // Replayed as a graph, the kernel reads whatever scale the device holds at that moment.
  GpuArray<float> replayed_gpu(*gpu, count);
  std::unique_ptr<CapturedWork> graph = gpu->capture([&] {
    gpu->ops().softmax_cross_entropy(scaled_gpu.data(), labels_gpu.data(), rows, classes,
                                     row_losses_gpu.data(), loss_gpu.data(), replayed_gpu.data(),
                                     scale_gpu.data());
  });
  REQUIRE(graph != nullptr);
  for (const float new_scale : {1.0f, 4.0f}) {
    gpu->copy_from_host(scaled_gpu.data(), logits.data(), count * sizeof(float));
    gpu->copy_from_host(scale_gpu.data(), &new_scale, sizeof(float));
    graph->launch();
    std::vector<float> want = plain_gpu.download();
    for (float& v : want) v *= new_scale;
    check_identical(replayed_gpu.download(), want,
                    "graph replay with scale " + std::to_string(new_scale));
  }
}

namespace {

// adamw: adam_update with a weight decay (0.1: with lr 1e-3, 1e-4 of each parameter per step).
enum class Optimizer { sgd, momentum, adam, adamw };

const Optimizer kOptimizers[] = {Optimizer::sgd, Optimizer::momentum, Optimizer::adam, Optimizer::adamw};

const char* optimizer_name(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::sgd: return "sgd";
    case Optimizer::momentum: return "momentum";
    case Optimizer::adam: return "adam";
    case Optimizer::adamw: return "adamw";
  }
  return "?";
}

float weight_decay_of(Optimizer optimizer) { return optimizer == Optimizer::adamw ? 0.1f : 0.0f; }

// One update on either backend (pointers of that backend's memory).
void update(Backend& ops, Optimizer optimizer, float* params, const float* grads, float* state_a,
            float* state_b, size_t n, int step, const UpdateExtras& extras) {
  switch (optimizer) {
    case Optimizer::sgd: ops.sgd_update(params, grads, n, 0.1f, extras); break;
    case Optimizer::momentum:
      ops.momentum_update(params, grads, state_a, n, 0.1f, 0.9f, extras);
      break;
    case Optimizer::adam:
    case Optimizer::adamw:
      ops.adam_update(params, grads, state_a, state_b, n, 1e-3f, 0.9f, 0.999f, 1e-8f, step,
                      weight_decay_of(optimizer), extras);
      break;
  }
}

}  // namespace

TEST_CASE("cuda optimizers match the reference over several steps", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  // The reference keeps intermediates in double, the GPU in fp32 (with fused multiply-adds): a
  // handful of roundings of O(1) values per step, so parameters (|p| <= 1, updates <= lr, the
  // momentum velocity <= 3) differ by a few ulps per step: 1e-6 absolute (8 eps) over 3 steps.
  // Adam's m = 0.9 m + 0.1 g can cancel, leaving an absolute error of one rounding of the terms
  // (~0.2 eps); v sums positive terms only, so its error is purely relative (a few eps). AdamW's
  // decay adds one rounding of p per step, and takes 1e-4 of p per step: 300 times atol over the
  // 3 steps, so an update that ignored the decay would fail.
  const double atol = 1e-6, rtol = 1e-5;
  for (Optimizer optimizer : kOptimizers) {
    for (size_t n : {size_t{1}, size_t{1000}, (size_t{1} << 20) + 3}) {
      const std::string what = std::string(optimizer_name(optimizer)) + " n=" + std::to_string(n);
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
          case Optimizer::adamw:
            ops.adam_update(params_gpu.data(), grads_gpu.data(), state_a_gpu.data(),
                            state_b_gpu.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, step, weight_decay_of(optimizer));
            reference.adam_update(params.data(), grads.data(), state_a.data(), state_b.data(), n,
                                  1e-3f, 0.9f, 0.999f, 1e-8f, step, weight_decay_of(optimizer));
            break;
        }
      }
      check_close(params_gpu.download(), params, atol, rtol, what + " params");
      if (optimizer == Optimizer::momentum) {
        check_close(state_a_gpu.download(), state_a, atol, rtol, what + " velocity");
      }
      if (optimizer == Optimizer::adam || optimizer == Optimizer::adamw) {
        check_close(state_a_gpu.download(), state_a, 1e-7, rtol, what + " m");
        check_close(state_b_gpu.download(), state_b, 1e-12, rtol, what + " v");
      }
    }
  }
}

TEST_CASE("cuda optimizers give the same bits four elements at a time as one at a time", "[gpu]") {
  // Note [updates four at a time]: arrays on 16-byte boundaries move four elements per load; one
  // element past such a boundary they cannot, and go one at a time. The same values updated both
  // ways (with a scale, and every kind of copy) must agree bit for bit, and the copy must be the
  // parameters rounded.
  auto gpu = make_gpu();
  const size_t n = 1000 + 3;  // whole quads and a tail
  for (Optimizer optimizer : kOptimizers) {
    for (DataType copy_type : {DataType::f32, DataType::f16, DataType::bf16}) {
      for (bool with_copy : {false, true}) {
        if (!with_copy && copy_type != DataType::f32) continue;
        const std::string what = std::string(optimizer_name(optimizer)) +
                                 (with_copy ? std::string(" copy") + type_suffix(copy_type) : std::string(" no copy"));
        // Element 0 of `aligned` sits on the allocation's boundary; element 1 of `shifted` holds
        // the same first value, one float past it.
        const std::vector<float> initial = random_vector(n, 90), grads = random_vector(n, 91);
        std::vector<float> padded = initial, padded_grads = grads, zeros(n + 1, 0.0f);
        padded.insert(padded.begin(), 0.0f);
        padded_grads.insert(padded_grads.begin(), 0.0f);
        GpuArray<float> aligned(*gpu, initial), aligned_grads(*gpu, grads), aligned_a(*gpu, zeros),
            aligned_b(*gpu, zeros);
        GpuArray<float> shifted(*gpu, padded), shifted_grads(*gpu, padded_grads), shifted_a(*gpu, zeros),
            shifted_b(*gpu, zeros);
        GpuTensor aligned_copy(*gpu, copy_type, std::vector<float>(n, -7.0f));
        GpuTensor shifted_copy(*gpu, copy_type, std::vector<float>(n, -7.0f), 1);
        GpuArray<float> inverse_gpu(*gpu, std::vector<float>{0.5f});
        for (int step = 1; step <= 2; ++step) {
          UpdateExtras extras;
          extras.inverse_loss_scale = inverse_gpu.data();
          extras.half_type = copy_type;
          if (with_copy) extras.half_params = aligned_copy.data();
          update(gpu->ops(), optimizer, aligned.data(), aligned_grads.data(), aligned_a.data(), aligned_b.data(), n,
                 step, extras);
          if (with_copy) extras.half_params = shifted_copy.data();
          update(gpu->ops(), optimizer, shifted.data() + 1, shifted_grads.data() + 1, shifted_a.data() + 1,
                 shifted_b.data() + 1, n, step, extras);
        }
        const std::vector<float> by_four = aligned.download();
        std::vector<float> by_one = shifted.download();
        by_one.erase(by_one.begin());
        check_identical(by_four, by_one, what + " params");
        REQUIRE(by_four != initial);
        std::vector<float> a = shifted_a.download(), b = shifted_b.download();
        a.erase(a.begin());
        b.erase(b.begin());
        std::vector<float> a_by_four = aligned_a.download(), b_by_four = aligned_b.download();
        a_by_four.pop_back();
        b_by_four.pop_back();
        check_identical(a_by_four, a, what + " state a");
        check_identical(b_by_four, b, what + " state b");
        if (with_copy) {
          check_same_values(aligned_copy.values(), rounded(copy_type, by_four), what + " copy four at a time");
          check_same_values(shifted_copy.values(), rounded(copy_type, by_one), what + " copy one at a time");
        }
      }
    }
  }
}

TEST_CASE("cuda optimizer extras: unscaling, skipping and the 16-bit copy, fused", "[gpu]") {
  // Three GPU runs of the same three steps: `plain` (no extras), `mixed` (gradients scaled by
  // 2^10 and unscaled by the update through inverse_loss_scale, skip pointing at 0, a 16-bit
  // copy written), and the reference with the same extras (host pointers). Before step 2, `mixed`
  // also gets an update with skip = 1 and NaN gradients, which must change nothing at all.
  //
  // Scaling by a power of two is exact both ways (these values neither overflow nor go
  // subnormal), so `mixed` must match `plain` bit for bit: the extras leave the fp32 rule's
  // arithmetic alone. The copy must be the GPU's own parameters rounded to the 16-bit type,
  // exactly. Against the reference, parameters get the plain test's tolerance, and the copies
  // one unit of the 16-bit type more: both round parameters that differ by that tolerance.
  auto gpu = make_gpu();
  ReferenceBackend reference;
  const float kScale = 1024.0f, kInverse = 1.0f / 1024.0f;
  const double atol = 1e-6, rtol = 1e-5;
  for (Optimizer optimizer : kOptimizers) {
    for (DataType half_type : {DataType::f16, DataType::bf16}) {
      for (size_t n : {size_t{1}, size_t{1000}, (size_t{1} << 20) + 3}) {
        const std::string what = std::string(optimizer_name(optimizer)) + " n=" +
                                 std::to_string(n) + " copy" + type_suffix(half_type);
        const std::vector<float> initial = random_vector(n, 70);
        const std::vector<float> zeros(n, 0.0f);
        GpuArray<float> plain_params(*gpu, initial), plain_a(*gpu, zeros), plain_b(*gpu, zeros);
        GpuArray<float> mixed_params(*gpu, initial), mixed_a(*gpu, zeros), mixed_b(*gpu, zeros);
        GpuTensor copy_gpu(*gpu, half_type, std::vector<float>(n, -7.0f));
        GpuArray<float> inverse_gpu(*gpu, std::vector<float>{kInverse});
        GpuArray<int32_t> no_skip_gpu(*gpu, std::vector<int32_t>{0}), skip_gpu(*gpu, std::vector<int32_t>{1});
        std::vector<float> ref_params = initial, ref_a = zeros, ref_b = zeros;
        HostTensor ref_copy(half_type, n);
        const int32_t ref_no_skip = 0;

        UpdateExtras gpu_extras;
        gpu_extras.inverse_loss_scale = inverse_gpu.data();
        gpu_extras.skip = no_skip_gpu.data();
        gpu_extras.half_params = copy_gpu.data();
        gpu_extras.half_type = half_type;
        UpdateExtras ref_extras;
        ref_extras.inverse_loss_scale = &kInverse;
        ref_extras.skip = &ref_no_skip;
        ref_extras.half_params = ref_copy.data();
        ref_extras.half_type = half_type;

        for (int step = 1; step <= 3; ++step) {
          const std::vector<float> grads = random_vector(n, 70 + step);
          std::vector<float> scaled_grads = grads;
          for (float& g : scaled_grads) g *= kScale;
          GpuArray<float> grads_gpu(*gpu, grads), scaled_grads_gpu(*gpu, scaled_grads);

          if (step == 2) {
            const std::vector<float> params_before = mixed_params.download(),
                                     a_before = mixed_a.download(), b_before = mixed_b.download(),
                                     copy_before = copy_gpu.values();
            GpuArray<float> nan_grads(*gpu, std::vector<float>(n, std::nanf("")));
            UpdateExtras skipping = gpu_extras;
            skipping.skip = skip_gpu.data();
            update(gpu->ops(), optimizer, mixed_params.data(), nan_grads.data(), mixed_a.data(),
                   mixed_b.data(), n, step, skipping);
            check_identical(mixed_params.download(), params_before, what + " skipped params");
            check_identical(mixed_a.download(), a_before, what + " skipped state a");
            check_identical(mixed_b.download(), b_before, what + " skipped state b");
            check_same_values(copy_gpu.values(), copy_before, what + " skipped copy");
          }

          update(gpu->ops(), optimizer, plain_params.data(), grads_gpu.data(), plain_a.data(),
                 plain_b.data(), n, step, UpdateExtras{});
          update(gpu->ops(), optimizer, mixed_params.data(), scaled_grads_gpu.data(),
                 mixed_a.data(), mixed_b.data(), n, step, gpu_extras);
          update(reference, optimizer, ref_params.data(), scaled_grads.data(), ref_a.data(),
                 ref_b.data(), n, step, ref_extras);

          const std::vector<float> params = mixed_params.download();
          const std::string at = what + " step " + std::to_string(step);
          check_identical(params, plain_params.download(), at + " unscaled params vs plain");
          check_identical(mixed_a.download(), plain_a.download(), at + " state a vs plain");
          check_identical(mixed_b.download(), plain_b.download(), at + " state b vs plain");
          check_same_values(copy_gpu.values(), rounded(half_type, params), at + " 16-bit copy");
        }
        check_close(mixed_params.download(), ref_params, atol, rtol, what + " params vs reference");
        check_close(copy_gpu.values(), ref_copy.values(), atol, rtol + unit_in_last_place(half_type),
                    what + " 16-bit copy vs reference");
        if (optimizer == Optimizer::momentum) {
          check_close(mixed_a.download(), ref_a, atol, rtol, what + " velocity vs reference");
        }
        if (optimizer == Optimizer::adam || optimizer == Optimizer::adamw) {
          check_close(mixed_a.download(), ref_a, 1e-7, rtol, what + " m vs reference");
          check_close(mixed_b.download(), ref_b, 1e-12, rtol, what + " v vs reference");
        }
      }
    }
  }
  // An fp32 copy (half_type f32) is allowed too: the parameters themselves, duplicated.
  const std::vector<float> initial = random_vector(100, 80), grads = random_vector(100, 81);
  GpuArray<float> params_gpu(*gpu, initial), grads_gpu(*gpu, grads), copy_gpu(*gpu, 100);
  UpdateExtras extras;
  extras.half_params = copy_gpu.data();
  extras.half_type = DataType::f32;
  gpu->ops().sgd_update(params_gpu.data(), grads_gpu.data(), 100, 0.1f, extras);
  check_identical(copy_gpu.download(), params_gpu.download(), "sgd with an fp32 copy");
}

TEST_CASE("cuda find_non_finite flags any inf or NaN, wherever it lies, and never clears", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  GpuArray<LossScaleState> state_gpu(*gpu, 1);
  auto flag_after = [&](float* x, size_t n, int32_t before) {
    LossScaleState state;
    state.non_finite = before;
    gpu->copy_from_host(state_gpu.data(), &state, sizeof(state));
    gpu->ops().find_non_finite(x, n, state_gpu.data());
    return state_gpu.download()[0].non_finite;
  };
  const float bad_values[] = {std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), std::nanf("")};
  // Offsets 0..3 floats from a 16-byte boundary: the kernel peels up to 3 leading floats, reads
  // the middle as float4 and the rest one by one; each part must see a bad value.
  for (size_t n : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{1000}, (size_t{1} << 20) + 3}) {
    // Finite extremes must not count: the largest float, subnormals, zeros of both signs.
    std::vector<float> x = random_vector(n, 90, -1e30f, 1e30f);
    x[0] = std::numeric_limits<float>::max();
    if (n > 1) x[1] = -std::numeric_limits<float>::denorm_min();
    if (n > 2) x[n - 1] = -0.0f;
    for (size_t offset = 0; offset < 4; ++offset) {
      std::vector<float> padded(offset, 0.0f);
      padded.insert(padded.end(), x.begin(), x.end());
      GpuArray<float> x_gpu(*gpu, padded);
      float* data = x_gpu.data() + offset;
      const std::string what = "n=" + std::to_string(n) + " offset " + std::to_string(offset);
      INFO(what);
      CHECK(flag_after(data, n, 0) == 0);
      CHECK(flag_after(data, n, 1) == 1);  // set earlier in the step: stays set
      std::vector<size_t> positions = {0, n / 2, n - 1};
      if (n > 6) positions.insert(positions.end(), {size_t{1}, size_t{2}, size_t{3}, size_t{4}, n - 2});
      for (size_t position : positions) {
        for (float bad : bad_values) {
          gpu->copy_from_host(data + position, &bad, sizeof(float));
          INFO("bad value " << bad << " at " << position);
          CHECK(flag_after(data, n, 0) == 1);
          gpu->copy_from_host(data + position, &x[position], sizeof(float));
        }
      }
    }
    // The reference agrees on the same data.
    LossScaleState state;
    reference.find_non_finite(x.data(), n, &state);
    CHECK(state.non_finite == 0);
    x[n / 2] = std::nanf("");
    reference.find_non_finite(x.data(), n, &state);
    CHECK(state.non_finite == 1);
  }
}

TEST_CASE("cuda update_loss_scale follows the rule step by step, as the reference", "[gpu]") {
  auto gpu = make_gpu();
  ReferenceBackend reference;
  // The rule written out independently of both backends.
  auto next = [](LossScaleState s, int increase_every) {
    if (s.non_finite != 0) {
      s.scale = std::max(1.0f, s.scale / 2);
      s.good_steps = 0;
    } else if (++s.good_steps >= increase_every) {
      s.scale = std::min(16777216.0f, s.scale * 2);
      s.good_steps = 0;
    }
    s.inverse_scale = 1.0f / s.scale;
    s.non_finite = 0;
    return s;
  };
  auto same = [](const LossScaleState& a, const LossScaleState& b) {
    return a.scale == b.scale && a.inverse_scale == b.inverse_scale &&
           a.good_steps == b.good_steps && a.non_finite == b.non_finite;
  };
  struct Run {
    float start_scale;
    int increase_every;
    std::vector<int> non_finite;  // per step
  };
  const Run runs[] = {
      // growth every 3 good steps, interrupted by overflows that halve and restart the count
      {32768.0f, 3, {0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0}},
      // halving stops at 1
      {4.0f, 2, {1, 1, 1, 1, 0, 0, 0}},
      // doubling stops at 2^24
      {8388608.0f, 1, {0, 0, 0, 1, 0}},
  };
  GpuArray<LossScaleState> state_gpu(*gpu, 1);
  for (const Run& run : runs) {
    LossScaleState model;
    model.scale = run.start_scale;
    model.inverse_scale = 1.0f / run.start_scale;
    LossScaleState ref_state = model;
    gpu->copy_from_host(state_gpu.data(), &model, sizeof(model));
    for (size_t step = 0; step < run.non_finite.size(); ++step) {
      model.non_finite = run.non_finite[step];
      ref_state.non_finite = run.non_finite[step];
      gpu->copy_from_host(state_gpu.data(), &model, sizeof(model));
      gpu->ops().update_loss_scale(state_gpu.data(), run.increase_every);
      reference.update_loss_scale(&ref_state, run.increase_every);
      model = next(model, run.increase_every);
      const LossScaleState from_gpu = state_gpu.download()[0];
      INFO("start " << run.start_scale << " every " << run.increase_every << " step " << step
                    << ": gpu scale " << from_gpu.scale << " good " << from_gpu.good_steps
                    << ", expected " << model.scale << " good " << model.good_steps);
      CHECK(same(from_gpu, model));
      CHECK(same(ref_state, model));
    }
  }
  // Spot checks of the model itself, so that a wrong model cannot vouch for both backends.
  LossScaleState s;
  s.scale = 32768.0f;
  for (int i = 0; i < 3; ++i) s = next(s, 3);
  CHECK(s.scale == 65536.0f);
  CHECK(s.inverse_scale == 1.0f / 65536.0f);
  CHECK(s.good_steps == 0);
  s.non_finite = 1;
  s = next(s, 3);
  CHECK(s.scale == 32768.0f);
  s.scale = 1.0f;
  s.non_finite = 1;
  CHECK(next(s, 3).scale == 1.0f);
  s.scale = 16777216.0f;
  s.good_steps = 2;
  s.non_finite = 0;
  CHECK(next(s, 3).scale == 16777216.0f);
}

TEST_CASE("a captured mixed-precision step skips, unscales and rescales from device state alone",
          "[gpu]") {
  // find_non_finite -> momentum update (unscaling by, and skipping on, the state) ->
  // update_loss_scale, captured once and replayed: each replay must act on the gradients and the
  // state of that moment, as a graph replayed by the runner would.
  auto gpu = make_gpu();
  const size_t n = 4099;
  const int increase_every = 2;
  LossScaleState start;
  start.scale = 256.0f;
  start.inverse_scale = 1.0f / 256.0f;
  GpuArray<LossScaleState> state_gpu(*gpu, std::vector<LossScaleState>{start});
  const std::vector<float> initial = random_vector(n, 95);
  GpuArray<float> params_gpu(*gpu, initial), velocity_gpu(*gpu, n), grads_gpu(*gpu, n);
  GpuTensor copy_gpu(*gpu, DataType::bf16, n);
  LossScaleState* state = state_gpu.data();
  UpdateExtras extras;
  extras.inverse_loss_scale = &state->inverse_scale;
  extras.skip = &state->non_finite;
  extras.half_params = copy_gpu.data();
  extras.half_type = DataType::bf16;
  std::unique_ptr<CapturedWork> step = gpu->capture([&] {
    gpu->ops().find_non_finite(grads_gpu.data(), n, state);
    gpu->ops().momentum_update(params_gpu.data(), grads_gpu.data(), velocity_gpu.data(), n, 0.1f,
                               0.9f, extras);
    gpu->ops().update_loss_scale(state, increase_every);
  });
  REQUIRE(step != nullptr);

  // The same steps eagerly on a host model of the parameters (exact: the gradients are the
  // unscaled ones times the scale, a power of two, so unscaling recovers them to the bit, and
  // the eager GPU update on unscaled gradients is the reference for the replayed one).
  GpuArray<float> eager_params(*gpu, initial), eager_velocity(*gpu, n);
  float scale = start.scale;
  int good_steps = 0;
  const bool overflow[] = {false, false, true, false, false, false};
  for (size_t i = 0; i < std::size(overflow); ++i) {
    std::vector<float> grads = random_vector(n, 96 + i);
    std::vector<float> scaled = grads;
    for (float& g : scaled) g *= scale;
    if (overflow[i]) scaled[n / 3] = std::numeric_limits<float>::infinity();
    gpu->copy_from_host(grads_gpu.data(), scaled.data(), n * sizeof(float));
    step->launch();
    if (!overflow[i]) {
      GpuArray<float> unscaled_gpu(*gpu, grads);
      gpu->ops().momentum_update(eager_params.data(), unscaled_gpu.data(), eager_velocity.data(),
                                 n, 0.1f, 0.9f);
    }
    if (overflow[i]) {
      scale = std::max(1.0f, scale / 2);
      good_steps = 0;
    } else if (++good_steps >= increase_every) {
      scale *= 2;
      good_steps = 0;
    }
    const std::string what = "replay " + std::to_string(i) + (overflow[i] ? " (overflow)" : "");
    const std::vector<float> params = params_gpu.download();
    check_identical(params, eager_params.download(), what + " params");
    check_identical(velocity_gpu.download(), eager_velocity.download(), what + " velocity");
    const LossScaleState now = state_gpu.download()[0];
    INFO(what << ": scale " << now.scale << ", expected " << scale);
    CHECK(now.scale == scale);
    CHECK(now.inverse_scale == 1.0f / scale);
    CHECK(now.good_steps == good_steps);
    CHECK(now.non_finite == 0);
    // After a skipped step the copy still holds the unchanged parameters, rounded.
    check_same_values(copy_gpu.values(), rounded(DataType::bf16, params), what + " bf16 copy");
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
  Buffer scratch = gpu->allocate(gpu->ops().sum_squares_scratch_bytes(), kTestBuffer);
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
    Buffer impossible = gpu->allocate(one_pebibyte, kTestBuffer);
    FAIL("allocating 1 PiB succeeded");
  } catch (const RuntimeError& error) {
    INFO(error.what());
    // The device's memory limit (the GPU's size by default) refuses it before cudaMalloc is asked;
    // either way the line names the device and the fix.
    const std::string message = error.what();
    CHECK((message.find("out of GPU memory on device") != std::string::npos ||
           message.find("too little memory on device") != std::string::npos));
    CHECK(message.find("--batch_size") != std::string::npos);
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
  Buffer history = gpu->allocate_host_visible(4 * sizeof(float), kTestBuffer);
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
