// [gpu] The CUDA backend's sequence ops against the reference backend: row-wise softmax
// cross-entropy, the reproducible scaled sum, device copies, embeddings (gather, scatter-add with
// repeated ids, touched rows and their packing by gather_rows), the LSTM cell, and cuDNN's fused
// LSTM (forward, backward data, backward weights; uni- and bidirectional, with and without
// initial states and output gradients). Also: the fused LSTM's plans are built once per
// geometry and take the canonical weights without a copy, the ops replay from a captured CUDA
// graph, and Adam reading its step on the device equals Adam given the step by the host.
// Then the same ops on 16-bit data (fp16, bf16), GEMM, bias gradient and fill included, against
// the reference's typed ops on the same rounded inputs.
//
// Comparison: |gpu - ref| <= atol + rtol * |ref| per element, TF32 off (exact fp32 on the GPU).
// The reference accumulates in double, so the tolerances cover the GPU's fp32 rounding (and a
// 16-bit result's own rounding); each one says where it comes from. eps = 2^-23.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/backend/rnn_geometry.h"
#include "engine/cuda/cuda_controls.h"
#include "engine/cuda/cuda_rnn_controls.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "tests/gpu/gpu_test_support.h"

using namespace dpbench;
using namespace dpbench::gpu_test;

namespace {

// n ids in [0, distinct) spread over the vocabulary (id * stride mod vocab, stride coprime with
// it), so rows repeat about n / distinct times and are not sorted.
std::vector<int32_t> repeated_ids(size_t n, int distinct, int vocab, uint64_t stream) {
  const std::vector<float> u = random_vector(n, stream, 0.0f, 1.0f);
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t pick = std::min<int64_t>(static_cast<int64_t>(u[i] * distinct), distinct - 1);
    ids[i] = static_cast<int32_t>(pick * 7919 % vocab);
  }
  return ids;
}

std::vector<float> slice(const std::vector<float>& values, size_t count) {
  return std::vector<float>(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(count));
}

constexpr DataType kHalfTypes[] = {DataType::f16, DataType::bf16};

double max_magnitude(const std::vector<float>& values) {
  double largest = 0.0;
  for (float v : values) largest = std::max(largest, std::fabs(static_cast<double>(v)));
  return largest;
}

std::vector<float> difference(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> result(a.size());
  for (size_t i = 0; i < a.size(); ++i) result[i] = a[i] - b[i];
  return result;
}

// random_vector's values as `type` holds them.
std::vector<float> random_of(DataType type, size_t n, uint64_t stream, float lo = -1.0f,
                             float hi = 1.0f) {
  return rounded(type, random_vector(n, stream, lo, hi));
}

std::string describe(const RnnGeometry& g) {
  return "T" + std::to_string(g.seq_len) + " B" + std::to_string(g.batch) + " in" +
         std::to_string(g.input_size) + " H" + std::to_string(g.hidden_size) + " L" +
         std::to_string(g.num_layers) + (g.bidirectional ? " bi" : " uni");
}

// The [gpu] tests' small LSTM: T 6, B 4, in 10, H 8, two layers.
RnnGeometry lstm_geometry(bool bidirectional) {
  RnnGeometry g;
  g.seq_len = 6;
  g.batch = 4;
  g.input_size = 10;
  g.hidden_size = 8;
  g.num_layers = 2;
  g.bidirectional = bidirectional;
  return g;
}

// A shape of dpbench's persistent LSTM (32, 64 or 128 units): two layers, a batch of 37 (the
// last block of 16 rows part-filled), 20 input features.
RnnGeometry persistent_lstm_geometry(int hidden) {
  RnnGeometry g;
  g.seq_len = 7;
  g.batch = 37;
  g.input_size = 20;
  g.hidden_size = hidden;
  g.num_layers = 2;
  return g;
}

}  // namespace

namespace {

// Softmax cross-entropy over rows of `type` (fp32 or 16-bit) against the reference's op on the
// same (rounded) logits, on the benchmark's vocabulary sizes and short rows, in place and not,
// aligned and not, with and without loss scale and row weights, rows apart by their length or
// by a padded stride (Note [padded logits rows]).
void compare_softmax_rows(Device& gpu, ReferenceBackend& reference, DataType type,
                          uint64_t stream) {
  struct Shape { int rows, classes; float offset; int stride = 0; };
  // 50000 and 10001: the benchmark's vocabularies (10001 leaves every row differently aligned);
  // 50304 gpt's, 50257 GPT-2's own in rows padded to 50304 (one element past the last pack).
  // Rows up to the device's shared memory per block (an H200's 227 KiB: 58000 fp32 classes,
  // 116000 of 16 bits) are held on chip (Note [held softmax rows]); 120000 are too long in every
  // type and stream. An offset of 100 checks the max subtraction: exp(100) overflows fp32, so
  // only a max-shifted sum gives a finite loss.
  const Shape shapes[] = {{7, 50000, 0.0f},  {7, 10001, 0.0f},       {7, 10001, 100.0f},
                          {3, 129, 0.0f},    {7, 5, 0.0f},           {7, 10001, 0.0f, 10016},
                          {3, 129, 0.0f, 144}, {3, 50304, 0.0f},     {3, 50257, 0.0f, 50304},
                          {2, 120000, 0.0f}};
  // Variants: where logits and dlogits live. Offsets (in elements) misalign a buffer for
  // 16-byte packs; 1 and 0, or 0 and 3, leave logits and dlogits differently aligned, which
  // turns the packs off.
  struct Variant { bool in_place; size_t logits_offset, dlogits_offset; bool scaled, weighted; };
  const Variant variants[] = {{true, 0, 0, false, false}, {false, 0, 0, true, true},
                              {true, 1, 1, true, false},  {false, 1, 0, false, true},
                              {true, 3, 3, true, true},   {false, 0, 3, true, false}};
  for (const Shape& s : shapes) {
    for (const Variant& v : variants) {
      const int stride = s.stride > 0 ? s.stride : s.classes;
      const size_t count = static_cast<size_t>(s.rows) * stride;
      const std::vector<float> logits =
          random_of(type, count, stream++, s.offset - 6.0f, s.offset + 6.0f);
      std::vector<int32_t> labels(s.rows);
      reference.fill_labels_by_index(labels.data(), labels.size(), 7, kRandomStreamLabels,
                                     stream, s.classes);
      // Row weights in [0, 2], row 1 masked out (a padded token).
      std::vector<float> weights = random_vector(s.rows, stream++, 0.0f, 2.0f);
      if (s.rows > 1) weights[1] = 0.0f;
      // Per-token gradients of a loss summed over rows * 3 tokens and scaled by 2^10 (fp16 loss
      // scaling), or plain ones.
      const float gradient_scale = v.scaled ? 1.0f / (3.0f * s.rows) : 1.0f;
      const float loss_scale = 1024.0f;
      const float* loss_scale_host = v.scaled ? &loss_scale : nullptr;
      const float* weights_host = v.weighted ? weights.data() : nullptr;

      GpuTensor logits_gpu(gpu, type, logits, v.logits_offset);
      GpuTensor separate_gpu(gpu, type, count, v.dlogits_offset);
      GpuArray<int32_t> labels_gpu(gpu, labels);
      GpuArray<float> row_losses_gpu(gpu, s.rows), weights_gpu(gpu, weights),
          loss_scale_gpu(gpu, std::vector<float>{loss_scale});
      gpu.ops().softmax_cross_entropy_rows(
          type, logits_gpu.data(), labels_gpu.data(), s.rows, s.classes, gradient_scale,
          row_losses_gpu.data(), v.in_place ? logits_gpu.data() : separate_gpu.data(),
          v.scaled ? loss_scale_gpu.data() : nullptr, v.weighted ? weights_gpu.data() : nullptr, s.stride);

      HostTensor logits_host(type, logits), separate_host(type, count);
      std::vector<float> row_losses(s.rows);
      reference.softmax_cross_entropy_rows(
          type, logits_host.data(), labels.data(), s.rows, s.classes, gradient_scale,
          row_losses.data(), v.in_place ? logits_host.data() : separate_host.data(),
          loss_scale_host, weights_host, s.stride);

      // The GPU sums the row's exponentials in fp32 (each thread its share in order, rescaling
      // its running sum when the maximum grows, then a tree), with expf (<= 2 ulp), or, a row
      // held on chip, after the maximum, with exp2f of a rounded (x - max) log2(e) (<= 2 ulp,
      // plus |x - max| <= 12 ulp over these rows' span of 12): the sum's relative
      // error stays below ~3 (classes + 16) eps even if every term were rescaled, and that is the
      // absolute error of log(sum), the row loss. Probabilities carry the same
      // relative error, so dlogits are off by at most that much times the gradient's scale (row
      // weights <= 2 included). Margin 2 on the bound, as the mean softmax test has. Both read
      // the same widened logits; 16-bit dlogits then round once to the type.
      const double bound = 2.0 * 3.0 * (s.classes + 16) * kEps;
      const double weight_factor = v.weighted ? 2.0 : 1.0;
      const double gradient_factor =
          gradient_scale * (v.scaled ? loss_scale : 1.0f) * weight_factor;
      const std::string what = type_suffix(type) + " " + std::to_string(s.rows) + "x" +
                               std::to_string(s.classes) + " stride " + std::to_string(stride) + " offset " +
                               std::to_string(static_cast<int>(s.offset)) +
                               (v.in_place ? " in place" : " separate") + " logits+" +
                               std::to_string(v.logits_offset) + " dlogits+" +
                               std::to_string(v.dlogits_offset) + (v.scaled ? " scaled" : "") +
                               (v.weighted ? " weighted" : "");
      check_close(row_losses_gpu.download(), row_losses, bound * weight_factor, 4 * kEps,
                  "row losses" + what);
      // The rows' classes only: the padding between rows is not the op's.
      auto classes_of = [&](const std::vector<float>& values) {
        std::vector<float> kept;
        for (int r = 0; r < s.rows; ++r)
          kept.insert(kept.end(), values.begin() + static_cast<long>(r) * stride,
                      values.begin() + static_cast<long>(r) * stride + s.classes);
        return kept;
      };
      const std::vector<float> dlogits_seen =
          classes_of(v.in_place ? logits_gpu.values() : separate_gpu.values());
      const std::vector<float> dlogits =
          classes_of(v.in_place ? logits_host.values() : separate_host.values());
      check_close(dlogits_seen, dlogits, bound * gradient_factor + storage_atol(type),
                  bound + storage_rtol(type), "dlogits" + what);
    }
  }
}

}  // namespace

TEST_CASE("cuda softmax_cross_entropy_rows matches the reference on vocabulary-sized rows, scaled "
          "and in place",
          "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  compare_softmax_rows(*gpu, reference, DataType::f32, 200);
}

TEST_CASE("cuda softmax_cross_entropy_rows gives the same bits on every run and in place", "[gpu]") {
  auto gpu = make_exact_gpu();
  // 50304 classes: held on chip in every type (gpt's vocabulary); 120000: streamed.
  struct Shape { int rows, classes; };
  for (const Shape s : {Shape{64, 50304}, Shape{4, 120000}}) {
    for (DataType type : kAllTypes) {
      const std::string what = " " + std::to_string(s.rows) + "x" + std::to_string(s.classes) + type_suffix(type);
      const size_t count = static_cast<size_t>(s.rows) * s.classes;
      const std::vector<float> logits = random_of(type, count, 1400, -8.0f, 8.0f);
      std::vector<int32_t> labels(s.rows);
      for (int r = 0; r < s.rows; ++r) labels[r] = static_cast<int32_t>((r * 7919) % s.classes);
      labels[1] = s.classes;  // out of range: that row's loss is NaN
      GpuTensor logits_gpu(*gpu, type, logits), dlogits_gpu(*gpu, type, count);
      GpuArray<int32_t> labels_gpu(*gpu, labels);
      GpuArray<float> losses_gpu(*gpu, s.rows), weights_gpu(*gpu, random_vector(s.rows, 1401, 0.0f, 2.0f)),
          loss_scale_gpu(*gpu, std::vector<float>{1024.0f});
      auto run = [&](void* dlogits) {
        gpu->ops().softmax_cross_entropy_rows(type, logits_gpu.data(), labels_gpu.data(), s.rows, s.classes,
                                              1.0f / s.rows, losses_gpu.data(), dlogits, loss_scale_gpu.data(),
                                              weights_gpu.data(), 0);
      };
      run(dlogits_gpu.data());
      const std::vector<float> losses = losses_gpu.download(), dlogits = dlogits_gpu.values();
      CHECK(std::isnan(losses[1]));
      INFO("losses finite but for the row of the bad label" + what);
      CHECK(std::count_if(losses.begin(), losses.end(), [](float v) { return std::isfinite(v); }) == s.rows - 1);
      run(dlogits_gpu.data());
      check_same_values(losses_gpu.download(), losses, "row losses, second run" + what);
      check_same_values(dlogits_gpu.values(), dlogits, "dlogits, second run" + what);
      run(logits_gpu.data());
      check_same_values(losses_gpu.download(), losses, "row losses in place" + what);
      check_same_values(logits_gpu.values(), dlogits, "dlogits in place" + what);
    }
  }
}

TEST_CASE("cuda sum_scaled matches the reference and is reproducible", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  for (size_t n : {size_t{1}, size_t{1000}, size_t{38403}, size_t{1} << 20}) {
    // Row losses look like this: positive, around log(vocabulary).
    const std::vector<float> x = random_vector(n, 300, 0.0f, 12.0f);
    const float scale = 1.0f / static_cast<float>(n);
    GpuArray<float> x_gpu(*gpu, x), out_gpu(*gpu, 2);
    gpu->ops().sum_scaled(x_gpu.data(), n, scale, out_gpu.data());
    gpu->ops().sum_scaled(x_gpu.data(), n, scale, out_gpu.data() + 1);
    float out = 0.0f;
    reference.sum_scaled(x.data(), n, scale, &out);
    const std::vector<float> both = out_gpu.download();
    // The GPU sums in double and rounds once: within an ulp or two of the exact value. The
    // contract promises only a fixed order, so a reference summing in fp32 is allowed too: its
    // error grows like sqrt(n) eps for terms of one sign and similar size (random walk); 4x that.
    const double rtol = 4.0 * (std::sqrt(static_cast<double>(n)) + 2.0) * kEps;
    check_close({both[0]}, {out}, 0.0, rtol, "sum_scaled n=" + std::to_string(n));
    check_identical({both[1]}, {both[0]}, "sum_scaled twice, n=" + std::to_string(n));
  }
}

TEST_CASE("cuda copy moves bytes on the stream, like the reference", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  const std::vector<float> source = random_vector(1001, 310);
  GpuArray<float> source_gpu(*gpu, source), target_gpu(*gpu, std::vector<float>(1001, -7.0f));
  // 4001 bytes: not a whole number of floats, so the last float is partly overwritten.
  const size_t bytes = 4001;
  gpu->ops().copy(target_gpu.data(), source_gpu.data(), bytes);
  std::vector<float> target(1001, -7.0f);
  reference.copy(target.data(), source.data(), bytes);
  check_identical(target_gpu.download(), target, "copy of 4001 bytes");
}

TEST_CASE("cuda embedding forward and backward match the reference with repeated ids", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  const int vocab = 1000;
  const size_t n = 300;
  const std::vector<int32_t> ids = repeated_ids(n, 40, vocab, 320);  // ~7.5 uses per row
  std::map<int32_t, int> uses;
  for (int32_t id : ids) ++uses[id];
  int most_uses = 0;
  for (const auto& entry : uses) most_uses = std::max(most_uses, entry.second);
  REQUIRE(most_uses >= 2);
  GpuArray<int32_t> ids_gpu(*gpu, ids);

  // dim 512 moves float4s when aligned; offset 1 misaligns everything (element by element);
  // dim 33 has rows no float4 can cover.
  for (const int dim : {512, 33}) {
    for (const size_t offset : {size_t{0}, size_t{1}}) {
      const std::string what = " dim " + std::to_string(dim) + (offset ? " unaligned" : " aligned");
      const size_t table_count = static_cast<size_t>(vocab) * dim;
      const std::vector<float> table = random_vector(table_count, 321);
      GpuTensor table_gpu(*gpu, DataType::f32, table, offset);
      GpuTensor y_gpu(*gpu, DataType::f32, n * dim, offset);
      gpu->ops().embedding_forward(static_cast<const float*>(table_gpu.data()), ids_gpu.data(), n,
                                   dim, static_cast<float*>(y_gpu.data()));
      std::vector<float> y(n * dim);
      reference.embedding_forward(table.data(), ids.data(), n, dim, y.data());
      check_identical(y_gpu.values(), y, "embedding_forward" + what);  // a gather: exact

      const std::vector<float> dy = random_vector(n * dim, 322);
      GpuTensor dy_gpu(*gpu, DataType::f32, dy, offset);
      GpuTensor dtable_gpu(*gpu, DataType::f32, table_count, offset);  // zeros, as callers do
      gpu->ops().embedding_backward(ids_gpu.data(), static_cast<const float*>(dy_gpu.data()), n,
                                    dim, static_cast<float*>(dtable_gpu.data()));
      std::vector<float> dtable(table_count, 0.0f);
      reference.embedding_backward(ids.data(), dy.data(), n, dim, dtable.data());
      // Atomic adds sum a row's k <= most_uses terms (|dy| <= 1) in any order, in fp32: at most
      // (k - 1) eps * sum|terms| <= k^2 eps from the exact sum.
      const double atol = static_cast<double>(most_uses) * most_uses * kEps;
      check_close(dtable_gpu.values(), dtable, atol, 0.0, "embedding_backward" + what);
    }
  }
}

TEST_CASE("cuda embedding_touched_rows lists the distinct ids in ascending order", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  struct Case { size_t n; int distinct, vocab; };
  // The benchmark's shape last: 20000 ids over a 50000-word vocabulary.
  const Case cases[] = {{1, 1, 10}, {300, 40, 1000}, {5000, 1000, 1000}, {20000, 50000, 50000}};
  uint64_t stream = 330;
  for (const Case& c : cases) {
    const std::vector<int32_t> ids = repeated_ids(c.n, c.distinct, c.vocab, stream++);
    const std::set<int32_t> distinct(ids.begin(), ids.end());
    const std::string what = " n=" + std::to_string(c.n) + " vocab=" + std::to_string(c.vocab);

    GpuArray<int32_t> ids_gpu(*gpu, ids), rows_gpu(*gpu, std::vector<int32_t>(c.n, -1)),
        count_gpu(*gpu, std::vector<int32_t>{-1});
    Buffer workspace = gpu->allocate(
        std::max<size_t>(gpu->ops().embedding_touched_rows_workspace_bytes(c.n, c.vocab), 1), kTestWorkspace);
    // Twice: the second call must not see the first one's flags.
    for (int round = 0; round < 2; ++round) {
      gpu->ops().embedding_touched_rows(ids_gpu.data(), c.n, c.vocab, rows_gpu.data(),
                                        count_gpu.data(), workspace.data());
    }
    std::vector<int32_t> rows(c.n, -1);
    int32_t count = -1;
    std::vector<unsigned char> reference_workspace(
        std::max<size_t>(reference.embedding_touched_rows_workspace_bytes(c.n, c.vocab), 1));
    reference.embedding_touched_rows(ids.data(), c.n, c.vocab, rows.data(), &count,
                                     reference_workspace.data());

    const int32_t gpu_count = count_gpu.download()[0];
    INFO("touched rows" << what << ": gpu count " << gpu_count << ", reference " << count
                        << ", distinct " << distinct.size());
    REQUIRE(gpu_count == count);
    REQUIRE(static_cast<size_t>(count) == distinct.size());
    const std::vector<int32_t> gpu_rows = rows_gpu.download();
    CHECK(std::equal(gpu_rows.begin(), gpu_rows.begin() + count, rows.begin()));
    CHECK(std::equal(gpu_rows.begin(), gpu_rows.begin() + count, distinct.begin()));
  }
}

TEST_CASE("cuda gather_rows packs the touched rows and zero padding as the reference does", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  const int vocab = 1000;
  const size_t n = 300;
  const std::vector<int32_t> ids = repeated_ids(n, 40, vocab, 340);  // ~40 distinct rows
  // The count comes from embedding_touched_rows on the device, as in the sparse exchange; the
  // capacity is what that exchange uses (min(ids, rows)), far more than the count.
  GpuArray<int32_t> ids_gpu(*gpu, ids), rows_gpu(*gpu, std::vector<int32_t>(n, -1)),
      count_gpu(*gpu, std::vector<int32_t>{-1});
  Buffer workspace =
      gpu->allocate(std::max<size_t>(gpu->ops().embedding_touched_rows_workspace_bytes(n, vocab), 1), kTestWorkspace);
  gpu->ops().embedding_touched_rows(ids_gpu.data(), n, vocab, rows_gpu.data(), count_gpu.data(),
                                    workspace.data());
  std::vector<int32_t> rows(n, -1);
  int32_t count = -1;
  reference.embedding_touched_rows(ids.data(), n, vocab, rows.data(), &count, nullptr);
  REQUIRE(count_gpu.download()[0] == count);
  const size_t capacity = std::min<size_t>(n, vocab);
  const float nan = std::nanf("");

  // dim 512 moves float4s when aligned; offset 1 misaligns the table (element by element);
  // dim 33 has rows no float4 can cover. Outputs start as NaN: every element must be written.
  for (const int dim : {512, 33}) {
    for (const size_t offset : {size_t{0}, size_t{1}}) {
      const std::string what = " dim " + std::to_string(dim) + (offset ? " unaligned" : " aligned");
      const std::vector<float> table = random_vector(static_cast<size_t>(vocab) * dim, 341);
      GpuTensor table_gpu(*gpu, DataType::f32, table, offset);
      GpuTensor values_gpu(*gpu, DataType::f32, std::vector<float>(capacity * dim, nan));
      GpuArray<int32_t> rows_out_gpu(*gpu, std::vector<int32_t>(capacity, -1));
      gpu->ops().gather_rows(static_cast<const float*>(table_gpu.data()), dim, rows_gpu.data(),
                             count_gpu.data(), capacity, rows_out_gpu.data(),
                             static_cast<float*>(values_gpu.data()));
      std::vector<int32_t> rows_out(capacity, -1);
      std::vector<float> values(capacity * dim, nan);
      reference.gather_rows(table.data(), dim, rows.data(), &count, capacity, rows_out.data(),
                            values.data());
      CHECK(rows_out_gpu.download() == rows_out);
      check_identical(values_gpu.values(), values, "gather_rows" + what);  // copies: exact
    }
  }

  // A count equal to the capacity (no padding) and a count of 0 (all padding).
  const int dim = 8;
  const std::vector<float> table = random_vector(static_cast<size_t>(vocab) * dim, 342);
  GpuTensor table_gpu(*gpu, DataType::f32, table);
  for (const int32_t edge : {count, 0}) {
    const size_t edge_capacity = static_cast<size_t>(count);
    GpuArray<int32_t> edge_count_gpu(*gpu, std::vector<int32_t>{edge});
    GpuTensor values_gpu(*gpu, DataType::f32, std::vector<float>(edge_capacity * dim, nan));
    GpuArray<int32_t> rows_out_gpu(*gpu, std::vector<int32_t>(edge_capacity, -1));
    gpu->ops().gather_rows(static_cast<const float*>(table_gpu.data()), dim, rows_gpu.data(),
                           edge_count_gpu.data(), edge_capacity, rows_out_gpu.data(),
                           static_cast<float*>(values_gpu.data()));
    std::vector<int32_t> rows_out(edge_capacity, -1);
    std::vector<float> values(edge_capacity * dim, nan);
    reference.gather_rows(table.data(), dim, rows.data(), &edge, edge_capacity, rows_out.data(),
                          values.data());
    INFO("count " << edge << " of capacity " << edge_capacity);
    CHECK(rows_out_gpu.download() == rows_out);
    check_identical(values_gpu.values(), values, "gather_rows, count " + std::to_string(edge));
  }
}

namespace {

// One LSTM step forward and backward on buffers of `type` against the reference's typed op on the
// same (rounded) inputs, at the first, a middle and the last step (c_prev and dc nullptr or not).
void compare_lstm_cell(Device& gpu, ReferenceBackend& reference, DataType type, uint64_t stream) {
  struct Shape { int batch, hidden; };
  // 16-byte packs need H to be a multiple of 4 (fp32) or 8 (16-bit): H 16 has them in every type,
  // H 12 in fp32 only, H 7 in none.
  const Shape shapes[] = {{5, 16}, {2, 12}, {3, 7}};
  for (const Shape& s : shapes) {
    const size_t gate_count = static_cast<size_t>(s.batch) * 4 * s.hidden;
    const size_t state_count = static_cast<size_t>(s.batch) * s.hidden;
    for (const bool first_step : {false, true}) {  // c_prev == nullptr; dc == nullptr
      const std::string what = type_suffix(type) + " B" + std::to_string(s.batch) + " H" +
                               std::to_string(s.hidden) +
                               (first_step ? " first/last step" : " middle step");
      const std::vector<float> pre = random_of(type, gate_count, stream++, -3.0f, 3.0f);
      const std::vector<float> bias_input = random_of(type, 4 * s.hidden, stream++);
      const std::vector<float> bias_recurrent = random_of(type, 4 * s.hidden, stream++);
      const std::vector<float> c_prev = random_of(type, state_count, stream++, -2.0f, 2.0f);

      GpuTensor gates_gpu(gpu, type, pre), bias_input_gpu(gpu, type, bias_input),
          bias_recurrent_gpu(gpu, type, bias_recurrent), c_prev_gpu(gpu, type, c_prev),
          c_gpu(gpu, type, state_count), h_gpu(gpu, type, state_count);
      gpu.ops().lstm_cell_forward(type, s.batch, s.hidden, gates_gpu.data(), bias_input_gpu.data(),
                                  bias_recurrent_gpu.data(),
                                  first_step ? nullptr : c_prev_gpu.data(), c_gpu.data(),
                                  h_gpu.data());
      HostTensor gates_host(type, pre), c_host(type, state_count), h_host(type, state_count);
      const HostTensor bias_input_host(type, bias_input),
          bias_recurrent_host(type, bias_recurrent), c_prev_host(type, c_prev);
      reference.lstm_cell_forward(type, s.batch, s.hidden, gates_host.data(),
                                  bias_input_host.data(), bias_recurrent_host.data(),
                                  first_step ? nullptr : c_prev_host.data(), c_host.data(),
                                  h_host.data());
      // Each output is a handful of fp32 operations on values below 4 in magnitude: two bias
      // additions, expf or tanhf (<= 2 ulp), a division, then c = f c_prev + i g and
      // h = o tanh(c): under 16 roundings of values <= 4, so 64 eps absolute, 16 eps relative;
      // then, in 16-bit, one rounding to the type.
      const double atol = 64 * kEps + storage_atol(type), rtol = 16 * kEps + storage_rtol(type);
      check_close(gates_gpu.values(), gates_host.values(), atol, rtol, "cell activations" + what);
      check_close(c_gpu.values(), c_host.values(), atol, rtol, "cell c" + what);
      check_close(h_gpu.values(), h_host.values(), atol, rtol, "cell h" + what);

      // Backward from the reference's activations and c, dgates over the gates and dc_prev over
      // dc (the aliases the unrolled layer uses).
      const std::vector<float> dh = random_of(type, state_count, stream++);
      const std::vector<float> dc = random_of(type, state_count, stream++);
      GpuTensor activations_gpu(gpu, type, gates_host.values()),
          c_out_gpu(gpu, type, c_host.values()), dh_gpu(gpu, type, dh), dc_gpu(gpu, type, dc);
      gpu.ops().lstm_cell_backward(type, s.batch, s.hidden, activations_gpu.data(),
                                   first_step ? nullptr : c_prev_gpu.data(), c_out_gpu.data(),
                                   dh_gpu.data(), first_step ? nullptr : dc_gpu.data(),
                                   activations_gpu.data(), first_step ? nullptr : dc_gpu.data());
      const HostTensor dh_host(type, dh);
      HostTensor dgates_host(type, gates_host.values()), dc_prev_host(type, dc);
      reference.lstm_cell_backward(type, s.batch, s.hidden, dgates_host.data(),
                                   first_step ? nullptr : c_prev_host.data(), c_host.data(),
                                   dh_host.data(), first_step ? nullptr : dc_prev_host.data(),
                                   dgates_host.data(),
                                   first_step ? nullptr : dc_prev_host.data());
      // Products of up to five factors (each <= 2 in magnitude) and one tanhf: 128 eps absolute
      // (the small factors 1 - t^2 and s (1 - s) cancel, which a relative bound would not cover).
      const double datol = 128 * kEps + storage_atol(type);
      check_close(activations_gpu.values(), dgates_host.values(), datol, rtol,
                  "cell dgates" + what);
      if (!first_step) {
        check_close(dc_gpu.values(), dc_prev_host.values(), datol, rtol, "cell dc_prev" + what);
      }
    }
  }
}

}  // namespace

TEST_CASE("cuda lstm cell forward and backward match the reference", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  compare_lstm_cell(*gpu, reference, DataType::f32, 340);
}

namespace {

// One fused-LSTM comparison: the geometry, what is passed and what is asked for.
struct LstmCase {
  RnnGeometry g;
  bool initial_state = true;     // hx, cx given (else nullptr: zeros)
  bool output_gradient = true;   // dy given (else nullptr: the outputs feed nothing)
  bool state_gradients = true;   // dhy, dcy given
  bool input_gradients = true;   // dx, dhx, dcx wanted
  size_t weight_offset = 0;      // elements between an aligned allocation and the weights
  bool repack = false;           // force the plan's repacking path
  std::string name() const {
    return describe(g) + (initial_state ? ", hx/cx" : ", no hx/cx") +
           (output_gradient ? ", dy" : ", dy=null") + (state_gradients ? ", dhy/dcy" : ", no dhy/dcy") +
           (input_gradients ? ", dx/dhx/dcx" : ", no dx/dhx/dcx") +
           (weight_offset ? ", weights+" + std::to_string(weight_offset) : "") +
           (repack ? ", repacked weights" : "");
  }
};

// bf16 LSTMs need cuDNN 9.13 or later. An older cuDNN must refuse them by name (checked here);
// the bf16 cases are then skipped with a warning.
bool lstm_runs(Backend& ops, const RnnGeometry& g) {
  try {
    (void)ops.lstm_workspace_bytes(g);
    return true;
  } catch (const RuntimeError& error) {
    if (g.type != DataType::bf16) throw;
    const std::string message = error.what();
    INFO(message);
    CHECK(message.find("has no bf16 LSTM (needs 9.13 or later)") != std::string::npos);
    WARN("skipped: " << message);
    return false;
  }
}

// What cuDNN's 16-bit LSTM may differ from an fp32 LSTM on the same rounded inputs by, relative to
// a tensor's largest magnitude. cuDNN keeps each step's h in the type (y: the next layer's input;
// the next step reads it too) and may keep gate activations and c so as well: a rounding of half
// a unit each, which the chain over T * layers * directions steps carries and mostly cancels, a
// few units in all. Four units, plus 1e-3 for what fp32 alone leaves (the fp32 test's 2e-4, with
// margin): bf16 ~3.2e-2, fp16 ~4.9e-3. A wrong gate order, layout or offset moves results by
// tens of percent.
double fused_lstm_tolerance(DataType type) { return 4.0 * unit_in_last_place(type) + 1e-3; }

void check_close_to_scale(const std::vector<float>& gpu, const std::vector<float>& ref,
                          double relative, const std::string& what) {
  check_close(gpu, ref, relative * std::max(max_magnitude(ref), 1e-6), 0.0, what);
}

// The fused LSTM against the reference: forward, backward data and backward weights, in g.type.
// In 16-bit the reference is an fp32 LSTM on the same rounded inputs, its outputs rounded once.
void compare_fused_lstm(Device& gpu, ReferenceBackend& reference, const LstmCase& c,
                        uint64_t stream) {
  const RnnGeometry& g = c.g;
  const DataType type = g.type;
  const std::string what = type_suffix(type) + " (" + c.name() + ")";
  Backend& ops = gpu.ops();
  // The setting is part of the plan's key: it stays on for every call of this comparison.
  set_lstm_always_repack(ops, c.repack);
  if (!lstm_runs(ops, g)) {
    set_lstm_always_repack(ops, false);
    return;
  }
  if (c.repack) CHECK_FALSE(lstm_weights_zero_copy(ops, g));
  // Weights of the size PyTorch initialises with (U(-1/sqrt(H), 1/sqrt(H))), inputs in [-1, 1].
  const float bound = 1.0f / std::sqrt(static_cast<float>(g.hidden_size));
  const std::vector<float> w = random_of(type, g.weight_count(), stream + 0, -bound, bound);
  const std::vector<float> x = random_of(type, g.input_count(), stream + 1);
  const std::vector<float> hx = random_of(type, g.state_count(), stream + 2, -0.5f, 0.5f);
  const std::vector<float> cx = random_of(type, g.state_count(), stream + 3, -0.5f, 0.5f);
  const std::vector<float> dy = random_of(type, g.output_count(), stream + 4);
  const std::vector<float> dhy = random_of(type, g.state_count(), stream + 5);
  const std::vector<float> dcy = random_of(type, g.state_count(), stream + 6);
  // The weight gradient is fp32 in every type; the op adds onto this.
  const std::vector<float> dw_start = random_vector(g.weight_count(), stream + 7);

  // ---- GPU
  Buffer workspace = gpu.allocate(std::max<size_t>(ops.lstm_workspace_bytes(g), 1), kTestWorkspace);
  Buffer reserve = gpu.allocate(std::max<size_t>(ops.lstm_reserve_bytes(g), 1), kTestWorkspace);
  GpuTensor w_gpu(gpu, type, w, c.weight_offset);
  GpuTensor dw_gpu(gpu, DataType::f32, dw_start, c.weight_offset);
  GpuTensor x_gpu(gpu, type, x), hx_gpu(gpu, type, hx), cx_gpu(gpu, type, cx),
      dy_gpu(gpu, type, dy), dhy_gpu(gpu, type, dhy), dcy_gpu(gpu, type, dcy);
  GpuTensor y_gpu(gpu, type, g.output_count()), hy_gpu(gpu, type, g.state_count()),
      cy_gpu(gpu, type, g.state_count()), dx_gpu(gpu, type, g.input_count()),
      dhx_gpu(gpu, type, g.state_count()), dcx_gpu(gpu, type, g.state_count());
  const void* hx_p = c.initial_state ? hx_gpu.data() : nullptr;
  const void* cx_p = c.initial_state ? cx_gpu.data() : nullptr;
  ops.lstm_forward(g, x_gpu.data(), hx_p, cx_p, w_gpu.data(), y_gpu.data(), hy_gpu.data(),
                   cy_gpu.data(), reserve.data(), workspace.data());
  ops.lstm_backward_data(g, y_gpu.data(), c.output_gradient ? dy_gpu.data() : nullptr,
                         c.state_gradients ? dhy_gpu.data() : nullptr,
                         c.state_gradients ? dcy_gpu.data() : nullptr, w_gpu.data(), hx_p, cx_p,
                         c.input_gradients ? dx_gpu.data() : nullptr,
                         c.input_gradients ? dhx_gpu.data() : nullptr,
                         c.input_gradients ? dcx_gpu.data() : nullptr, reserve.data(),
                         workspace.data());
  ops.lstm_backward_weights(g, x_gpu.data(), hx_p, y_gpu.data(),
                            static_cast<float*>(dw_gpu.data()), reserve.data(), workspace.data());

  // ---- reference, on the same values
  std::vector<unsigned char> ref_workspace(std::max<size_t>(reference.lstm_workspace_bytes(g), 1));
  std::vector<unsigned char> ref_reserve(std::max<size_t>(reference.lstm_reserve_bytes(g), 1));
  const HostTensor w_host(type, w), x_host(type, x), hx_host(type, hx), cx_host(type, cx),
      dy_host(type, dy), dhy_host(type, dhy), dcy_host(type, dcy);
  HostTensor y_host(type, g.output_count()), hy_host(type, g.state_count()),
      cy_host(type, g.state_count()), dx_host(type, g.input_count()),
      dhx_host(type, g.state_count()), dcx_host(type, g.state_count());
  std::vector<float> dw = dw_start;
  const void* ref_hx = c.initial_state ? hx_host.data() : nullptr;
  const void* ref_cx = c.initial_state ? cx_host.data() : nullptr;
  reference.lstm_forward(g, x_host.data(), ref_hx, ref_cx, w_host.data(), y_host.data(),
                         hy_host.data(), cy_host.data(), ref_reserve.data(), ref_workspace.data());
  reference.lstm_backward_data(g, y_host.data(), c.output_gradient ? dy_host.data() : nullptr,
                               c.state_gradients ? dhy_host.data() : nullptr,
                               c.state_gradients ? dcy_host.data() : nullptr, w_host.data(),
                               ref_hx, ref_cx, c.input_gradients ? dx_host.data() : nullptr,
                               c.input_gradients ? dhx_host.data() : nullptr,
                               c.input_gradients ? dcx_host.data() : nullptr, ref_reserve.data(),
                               ref_workspace.data());
  reference.lstm_backward_weights(g, x_host.data(), ref_hx, y_host.data(), dw.data(),
                                  ref_reserve.data(), ref_workspace.data());

  // fp32: every value is the end of a chain of at most T * layers * directions = 24 cell steps
  // (18 for the odd geometry), each a dot product of <= in + 2H ~ 30-50 terms of O(1) plus
  // expf/tanhf (<= 2 ulp), errors mostly cancelling: ~1e-4 relative to O(1) values at worst;
  // weight gradients add T * B = 24 such terms. Typical fp32 errors are ~1e-6; a wrong gate
  // order, bias or direction moves results by 1e-2 or more. 16-bit: fused_lstm_tolerance, of
  // each tensor's scale.
  auto compare = [&](const std::vector<float>& gpu_values, const std::vector<float>& ref_values,
                     const std::string& name) {
    if (type == DataType::f32) {
      check_close(gpu_values, ref_values, 2e-4, 2e-4, name + what);
    } else {
      check_close_to_scale(gpu_values, ref_values, fused_lstm_tolerance(type), name + what);
    }
  };
  compare(y_gpu.values(), y_host.values(), "lstm y");
  compare(hy_gpu.values(), hy_host.values(), "lstm hy");
  compare(cy_gpu.values(), cy_host.values(), "lstm cy");
  if (c.input_gradients) {
    compare(dx_gpu.values(), dx_host.values(), "lstm dx");
    compare(dhx_gpu.values(), dhx_host.values(), "lstm dhx");
    compare(dcx_gpu.values(), dcx_host.values(), "lstm dcx");
  }
  if (type == DataType::f32) {
    check_close(dw_gpu.values(), dw, 2e-4, 2e-4, "lstm dweights (added onto prefilled)" + what);
  } else {
    // What was added, relative to its own scale (not the prefill's); comparing the sums checks
    // that it was added onto the prefill, not written over it.
    const double gradient_scale = std::max(max_magnitude(difference(dw, dw_start)), 1e-6);
    check_close(dw_gpu.values(), dw, fused_lstm_tolerance(type) * gradient_scale + 4 * kEps,
                4 * kEps, "lstm dweights (added onto prefilled)" + what);
  }
  // The weights themselves are read only.
  check_same_values(w_gpu.values(), w, "lstm weights unchanged" + what);
  set_lstm_always_repack(ops, false);
}

// The fused-LSTM comparisons, all in `type`: uni- and bidirectional with every optional
// argument given or not, weights off an aligned address (16-bit ones then take the packed copy),
// the repacking path forced, and odd sizes.
std::vector<LstmCase> fused_lstm_cases(DataType type) {
  std::vector<LstmCase> cases;
  for (const bool bidirectional : {false, true}) {
    LstmCase full;
    full.g = lstm_geometry(bidirectional);
    full.g.type = type;
    cases.push_back(full);  // everything given and wanted
    LstmCase zero_state = full;
    zero_state.initial_state = false;
    zero_state.state_gradients = false;
    cases.push_back(zero_state);  // hx, cx, dhy, dcy all nullptr
    LstmCase no_outputs = full;
    no_outputs.output_gradient = false;
    cases.push_back(no_outputs);  // dy nullptr: only the final state feeds the loss
    LstmCase weights_only = full;
    weights_only.input_gradients = false;
    weights_only.initial_state = false;
    cases.push_back(weights_only);  // dx, dhx, dcx not wanted
  }
  // The weights one element past an aligned address: a parameter tensor can start anywhere.
  LstmCase unaligned;
  unaligned.g = lstm_geometry(false);
  unaligned.g.type = type;
  unaligned.weight_offset = 1;
  cases.push_back(unaligned);
  // The repacking path (taken where cuDNN's layout is not the canonical one), forced: weights
  // packed before forward and backward data, gradients added back after backward weights.
  for (const bool bidirectional : {false, true}) {
    LstmCase repacked;
    repacked.g = lstm_geometry(bidirectional);
    repacked.g.type = type;
    repacked.repack = true;
    repacked.weight_offset = bidirectional ? 1 : 0;
    cases.push_back(repacked);
  }
  // Sizes with no power-of-two alignment, three layers: whichever path cuDNN's layout allows.
  LstmCase odd;
  odd.g.seq_len = 3;
  odd.g.batch = 5;
  odd.g.input_size = 33;
  odd.g.hidden_size = 7;
  odd.g.num_layers = 3;
  odd.g.bidirectional = true;
  odd.g.type = type;
  cases.push_back(odd);
  return cases;
}

}  // namespace

TEST_CASE("cuda fused lstm matches the reference: forward, backward data and backward weights",
          "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  uint64_t stream = 400;
  for (const LstmCase& c : fused_lstm_cases(DataType::f32)) {
    compare_fused_lstm(*gpu, reference, c, stream);
    stream += 10;
  }
}

TEST_CASE("cuda fused lstm plans: prepared once per geometry, canonical weights passed zero-copy",
          "[gpu]") {
  auto gpu = make_exact_gpu();
  Backend& ops = gpu->ops();
  set_lstm_always_repack(ops, false);
  const size_t before = lstm_plans_created(ops);
  const RnnGeometry uni = lstm_geometry(false), bi = lstm_geometry(true);
  const size_t workspace = ops.lstm_workspace_bytes(uni);
  CHECK(lstm_plans_created(ops) == before + 1);
  CHECK(ops.lstm_workspace_bytes(uni) == workspace);
  (void)ops.lstm_reserve_bytes(uni);
  CHECK(lstm_plans_created(ops) == before + 1);  // the same geometry: the cached plan
  (void)ops.lstm_reserve_bytes(bi);
  CHECK(lstm_plans_created(ops) == before + 2);  // another geometry: a plan of its own
  CHECK(ops.lstm_reserve_bytes(uni) > 0);

  // cuDNN's weight space is expected to be the canonical layout (the order cuDNN and PyTorch
  // use), so the caller's weights go to cuDNN without a copy. The repacking path exists for a
  // cuDNN that pads or reorders; if this fails, that path is what every step pays for.
  RnnGeometry benchmark;  // the benchmark's language-model shapes
  benchmark.seq_len = 100;
  benchmark.batch = 384;
  benchmark.input_size = 512;
  benchmark.hidden_size = 512;
  benchmark.num_layers = 2;
  RnnGeometry small = benchmark;
  small.seq_len = 35;
  small.batch = 512;
  small.input_size = 128;
  small.hidden_size = 128;
  for (const RnnGeometry& g : {uni, bi, benchmark, small}) {
    INFO(describe(g));
    CHECK(lstm_weights_zero_copy(ops, g));
  }
  // Sizes with no power-of-two alignment: reported, not required (cuDNN may pad such a layout;
  // the fused-LSTM comparison test covers whichever path it takes).
  RnnGeometry odd;
  odd.seq_len = 3;
  odd.batch = 5;
  odd.input_size = 33;
  odd.hidden_size = 7;
  odd.num_layers = 3;
  odd.bidirectional = true;
  if (!lstm_weights_zero_copy(ops, odd)) WARN("cuDNN's weight layout differs for " << describe(odd));
}

TEST_CASE("cuda sequence ops replay from a captured CUDA graph", "[gpu]") {
  // Embedding gather, the fused LSTM's three passes, softmax rows, the scaled sum, the touched
  // rows (CUB) and their packing (gather_rows, its count on the device), captured once after an
  // eager step and replayed: a replay must give what the eager step gave, so none of them hides a
  // host synchronisation, an allocation or a host-side value.
  auto gpu = make_exact_gpu();
  Backend& ops = gpu->ops();
  const RnnGeometry g = lstm_geometry(true);
  const int vocab = 50;
  const size_t tokens = static_cast<size_t>(g.seq_len) * g.batch;
  const std::vector<int32_t> ids = repeated_ids(tokens, 20, vocab, 500);
  std::vector<int32_t> labels(tokens);
  for (size_t i = 0; i < tokens; ++i) labels[i] = static_cast<int32_t>((i * 5) % g.output_size());

  GpuArray<int32_t> ids_gpu(*gpu, ids), labels_gpu(*gpu, labels), rows_gpu(*gpu, tokens),
      count_gpu(*gpu, 1);
  GpuArray<float> table_gpu(*gpu, random_vector(static_cast<size_t>(vocab) * g.input_size, 501)),
      x_gpu(*gpu, g.input_count()), weights_gpu(*gpu, random_vector(g.weight_count(), 502, -0.3f, 0.3f)),
      y_gpu(*gpu, g.output_count()), dy_gpu(*gpu, g.output_count()), dx_gpu(*gpu, g.input_count()),
      dweights_gpu(*gpu, g.weight_count()), losses_gpu(*gpu, tokens), loss_gpu(*gpu, 1);
  Buffer workspace = gpu->allocate(std::max<size_t>(ops.lstm_workspace_bytes(g), 1), kTestWorkspace);
  Buffer reserve = gpu->allocate(std::max<size_t>(ops.lstm_reserve_bytes(g), 1), kTestWorkspace);
  Buffer touched_workspace =
      gpu->allocate(std::max<size_t>(ops.embedding_touched_rows_workspace_bytes(tokens, vocab), 1), kTestWorkspace);
  const size_t capacity = std::min<size_t>(tokens, vocab);
  GpuArray<int32_t> packed_rows_gpu(*gpu, capacity);
  GpuArray<float> packed_values_gpu(*gpu, capacity * g.input_size);

  auto step = [&] {
    ops.embedding_forward(table_gpu.data(), ids_gpu.data(), tokens, g.input_size, x_gpu.data());
    ops.lstm_forward(g, x_gpu.data(), nullptr, nullptr, weights_gpu.data(), y_gpu.data(), nullptr,
                     nullptr, reserve.data(), workspace.data());
    // The LSTM's outputs serve as logits over output_size classes, one row per token.
    ops.softmax_cross_entropy_rows(y_gpu.data(), labels_gpu.data(), static_cast<int>(tokens),
                                   g.output_size(), 1.0f / tokens, losses_gpu.data(), dy_gpu.data());
    ops.sum_scaled(losses_gpu.data(), tokens, 1.0f / tokens, loss_gpu.data());
    ops.lstm_backward_data(g, y_gpu.data(), dy_gpu.data(), nullptr, nullptr, weights_gpu.data(),
                           nullptr, nullptr, dx_gpu.data(), nullptr, nullptr, reserve.data(),
                           workspace.data());
    ops.fill(dweights_gpu.data(), g.weight_count(), 0.0f);
    ops.lstm_backward_weights(g, x_gpu.data(), nullptr, y_gpu.data(), dweights_gpu.data(),
                              reserve.data(), workspace.data());
    ops.embedding_touched_rows(ids_gpu.data(), tokens, vocab, rows_gpu.data(), count_gpu.data(),
                               touched_workspace.data());
    ops.gather_rows(table_gpu.data(), g.input_size, rows_gpu.data(), count_gpu.data(), capacity,
                    packed_rows_gpu.data(), packed_values_gpu.data());
  };
  step();
  const std::vector<float> eager_loss = loss_gpu.download(), eager_dx = dx_gpu.download(),
                           eager_dweights = dweights_gpu.download();
  const std::vector<int32_t> eager_rows = rows_gpu.download(), eager_count = count_gpu.download();
  const std::vector<int32_t> eager_packed_rows = packed_rows_gpu.download();
  const std::vector<float> eager_packed_values = packed_values_gpu.download();

  std::unique_ptr<CapturedWork> graph = gpu->capture(step);
  REQUIRE(graph != nullptr);
  // Outputs cleared, so the replay has to write them again.
  ops.fill(loss_gpu.data(), 1, -1.0f);
  ops.fill(dx_gpu.data(), g.input_count(), -1.0f);
  ops.fill(dweights_gpu.data(), g.weight_count(), -1.0f);
  gpu->copy_from_host(count_gpu.data(), std::vector<int32_t>{-1}.data(), sizeof(int32_t));
  ops.fill(packed_values_gpu.data(), capacity * g.input_size, -1.0f);
  graph->launch();
  gpu->synchronize();
  // cuDNN may pick other kernels (and so other summation orders) in a graph; same tolerance as
  // the reference comparison. Everything else is deterministic.
  check_close(dx_gpu.download(), eager_dx, 2e-4, 2e-4, "replayed dx");
  check_close(dweights_gpu.download(), eager_dweights, 2e-4, 2e-4, "replayed dweights");
  check_close(loss_gpu.download(), eager_loss, 1e-6, 1e-5, "replayed loss");
  CHECK(count_gpu.download() == eager_count);
  CHECK(rows_gpu.download() == eager_rows);
  CHECK(packed_rows_gpu.download() == eager_packed_rows);
  CHECK(packed_values_gpu.download() == eager_packed_values);
}

TEST_CASE("cuda adam reading its step on the device equals adam given the step", "[gpu]") {
  auto gpu = make_exact_gpu();
  Backend& ops = gpu->ops();
  const size_t n = 4099;
  const std::vector<float> initial = random_vector(n, 600);
  // Eager with host steps; eager with the step read from device memory; and one captured update
  // reading the device step, replayed once per step while the step counter advances.
  GpuArray<float> host_params(*gpu, initial), host_m(*gpu, n), host_v(*gpu, n);
  GpuArray<float> device_params(*gpu, initial), device_m(*gpu, n), device_v(*gpu, n);
  GpuArray<float> graph_params(*gpu, initial), graph_m(*gpu, n), graph_v(*gpu, n);
  GpuArray<int32_t> step_gpu(*gpu, std::vector<int32_t>{0});
  GpuArray<float> grads_gpu(*gpu, n);
  UpdateExtras on_device;
  on_device.step_from_zero = step_gpu.data();
  std::unique_ptr<CapturedWork> graph = gpu->capture([&] {
    ops.adam_update(graph_params.data(), grads_gpu.data(), graph_m.data(), graph_v.data(), n,
                    1e-3f, 0.9f, 0.999f, 1e-8f, /*step ignored*/ 0, 0.0f, on_device);
  });
  REQUIRE(graph != nullptr);
  for (int32_t step_from_zero = 0; step_from_zero < 4; ++step_from_zero) {
    gpu->copy_from_host(grads_gpu.data(), random_vector(n, 601 + step_from_zero).data(),
                        n * sizeof(float));
    gpu->copy_from_host(step_gpu.data(), &step_from_zero, sizeof(int32_t));
    ops.adam_update(host_params.data(), grads_gpu.data(), host_m.data(), host_v.data(), n, 1e-3f,
                    0.9f, 0.999f, 1e-8f, step_from_zero + 1, 0.0f);
    // A wrong host step proves it is ignored.
    ops.adam_update(device_params.data(), grads_gpu.data(), device_m.data(), device_v.data(), n,
                    1e-3f, 0.9f, 0.999f, 1e-8f, 1000, 0.0f, on_device);
    graph->launch();
  }
  gpu->synchronize();
  // Both compute 1 - beta^t in double and round it to float once; the device's pow may differ
  // from the host's by an ulp of a double, which changes the rounded float only in a tie-near
  // case, and then by one float ulp of the correction: the update (<= lr ~ 1e-3 per step) moves
  // by 2 eps of itself, under 8 lr eps absolute over the steps, plus an ulp of the parameter.
  const std::vector<float> params = host_params.download();
  const double atol = 8 * 1e-3 * kEps;
  check_close(device_params.download(), params, atol, 2 * kEps, "adam params, device step");
  check_close(graph_params.download(), params, atol, 2 * kEps, "adam params, replayed graph");
  check_identical(device_m.download(), host_m.download(), "adam m, device step");
  check_identical(device_v.download(), host_v.download(), "adam v, device step");
  check_identical(graph_m.download(), host_m.download(), "adam m, replayed graph");
}

// ---- 16-bit data (fp16, bf16) ------------------------------------------------------------------
// Each op against the reference's typed op on the same rounded inputs: both compute in fp32 (the
// reference in double) and round each result to the type once, so a result may differ by the
// fp32 bound of the fp32 test plus one unit in the last place of the type (storage_rtol), and in
// fp16 by one subnormal step (storage_atol).

TEST_CASE("cuda 16-bit gemm matches the reference with fp32 or 16-bit C", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  struct Shape { int m, n, k; Transpose trans_a, trans_b; };
  const Transpose no = Transpose::no, yes = Transpose::yes;
  // The models' three products, at the small LSTM's sizes (rows T * B = 24, gates 4H = 32, inputs
  // 10) and larger and odd ones: x W^T (no, yes), dgates W (no, no), dgates^T x (yes, no).
  const Shape shapes[] = {{24, 32, 10, no, yes},    {24, 10, 32, no, no},
                          {32, 10, 24, yes, no},    {256, 512, 384, no, yes},
                          {256, 384, 512, no, no},  {512, 384, 256, yes, no},
                          {33, 17, 65, no, yes},    {33, 17, 65, no, no},
                          {33, 17, 65, yes, no}};
  uint64_t stream = 700;
  for (const DataType type : kHalfTypes) {
    for (const Shape& s : shapes) {
      for (const DataType c_type : {DataType::f32, type}) {
        // beta 0 writes C, beta 1 adds to it (the unrolled LSTM's accumulating products). Rows
        // padded by 3: leading dimensions wider than the rows, 16-bit rows off 16-byte boundaries.
        for (const auto& [beta, pad] : {std::pair{0.0f, 0}, std::pair{1.0f, 0},
                                        std::pair{0.0f, 3}, std::pair{1.0f, 3}}) {
          const int a_rows = s.trans_a == no ? s.m : s.k, a_cols = s.trans_a == no ? s.k : s.m;
          const int b_rows = s.trans_b == no ? s.k : s.n, b_cols = s.trans_b == no ? s.n : s.k;
          const int lda = a_cols + pad, ldb = b_cols + pad, ldc = s.n + pad;
          const std::vector<float> a = random_of(type, size_t{1} * a_rows * lda, stream++);
          const std::vector<float> b = random_of(type, size_t{1} * b_rows * ldb, stream++);
          const std::vector<float> c = random_of(c_type, size_t{1} * s.m * ldc, stream++);

          GpuTensor a_gpu(*gpu, type, a), b_gpu(*gpu, type, b), c_gpu(*gpu, c_type, c);
          gpu->ops().gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, type, a_gpu.data(), lda,
                          b_gpu.data(), ldb, beta, c_type, c_gpu.data(), ldc);
          HostTensor a_host(type, a), b_host(type, b), c_host(c_type, c);
          reference.gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, type, a_host.data(), lda,
                         b_host.data(), ldb, beta, c_type, c_host.data(), ldc);
          // Products of 16-bit values are exact in fp32; the k of them (|a b| <= 1, ~k/4 in sum)
          // are summed in fp32 on tensor cores, whose adders may truncate: a linear bound,
          // k eps times the sum, with margin 2. A 16-bit C adds its own rounding.
          const double atol = 2.0 * s.k * kEps * s.k / 4.0 + 4 * kEps + storage_atol(c_type);
          const std::string what = "gemm" + type_suffix(type) + " C" + type_suffix(c_type) +
                                   " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                                   " k=" + std::to_string(s.k) + " trans_a=" +
                                   std::to_string(s.trans_a == yes) + " trans_b=" +
                                   std::to_string(s.trans_b == yes) + " beta=" +
                                   std::to_string(static_cast<int>(beta)) + " pad=" +
                                   std::to_string(pad);
          check_close(c_gpu.values(), c_host.values(), atol, 4 * kEps + storage_rtol(c_type), what);
        }
      }
    }
  }
}

TEST_CASE("cuda 16-bit bias_gradient sums in fp32 as the reference does", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  // 512 columns go two to a thread; 129 and 33 one; offset 1 puts the rows off 4-byte boundaries.
  const std::pair<int, int> shapes[] = {{300, 512}, {300, 129}, {7, 33}, {1000, 256}};
  for (const DataType type : kHalfTypes) {
    for (auto [rows, cols] : shapes) {
      for (const size_t offset : {size_t{0}, size_t{1}}) {
        const size_t count = static_cast<size_t>(rows) * cols;
        const std::vector<float> dy = random_of(type, count, 720 + offset);
        GpuTensor dy_gpu(*gpu, type, dy, offset);
        GpuArray<float> dbias_gpu(*gpu, random_vector(cols, 721));  // must be overwritten
        gpu->ops().bias_gradient(type, dy_gpu.data(), dbias_gpu.data(), rows, cols);
        const HostTensor dy_host(type, dy);
        std::vector<float> dbias(cols);
        reference.bias_gradient(type, dy_host.data(), dbias.data(), rows, cols);
        // The fp32 test's bound: fp32 sums of `rows` terms |dy| <= 1 against double ones.
        const double atol = 2.0 * std::sqrt(rows) * kEps * rows + kEps;
        check_close(dbias_gpu.download(), dbias, atol, 4 * kEps,
                    "bias_gradient" + type_suffix(type) + " " + std::to_string(rows) + "x" +
                        std::to_string(cols) + " offset " + std::to_string(offset));
      }
    }
  }
}

TEST_CASE("cuda bias_gradient split over rows matches the reference and repeats its bits", "[gpu]") {
  // The Transformer's shapes (12800 token rows of d_model 512, the packed QKV's 1536 and the
  // feed-forward's 2048: rows split into parts, the parts added by a second kernel) and odd ones:
  // one part (1 and 7 rows), many parts of a few columns (50000 rows), widths that no pack
  // divides (1, 3) and 1000 (pairs, not 16-byte packs, in 16 bits).
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  const std::pair<int, int> shapes[] = {{12800, 512}, {12800, 1536}, {12800, 2048}, {1, 1},   {1, 3},
                                        {1, 1000},    {7, 1},        {7, 3},        {7, 1000}, {50000, 1},
                                        {50000, 3},   {50000, 1000}};
  uint64_t stream = 730;
  for (const DataType type : kAllTypes) {
    for (auto [rows, cols] : shapes) {
      const size_t count = static_cast<size_t>(rows) * cols;
      const std::vector<float> dy = random_of(type, count, stream++);
      const HostTensor dy_host(type, dy);
      std::vector<float> dbias(cols);
      reference.bias_gradient(type, dy_host.data(), dbias.data(), rows, cols);
      const std::string what = "bias_gradient" + type_suffix(type) + " " + std::to_string(rows) + "x" +
                               std::to_string(cols);
      std::vector<float> first_bits;
      // Offset 1 takes narrower packs (or none): the parts and the order of the additions are
      // the shape's alone, so the bits must not change with it.
      for (const size_t offset : {size_t{0}, size_t{1}}) {
        GpuTensor dy_gpu(*gpu, type, dy, offset);
        GpuArray<float> dbias_gpu(*gpu, random_vector(cols, 731));  // must be overwritten
        gpu->ops().bias_gradient(type, dy_gpu.data(), dbias_gpu.data(), rows, cols);
        const std::vector<float> result = dbias_gpu.download();
        // The fp32 test's bound: fp32 sums of `rows` terms |dy| <= 1 against double ones.
        const double atol = 2.0 * std::sqrt(rows) * kEps * rows + kEps;
        check_close(result, dbias, atol, 4 * kEps, what + " offset " + std::to_string(offset));
        gpu->ops().bias_gradient(type, dy_gpu.data(), dbias_gpu.data(), rows, cols);
        check_identical(dbias_gpu.download(), result, what + ", second call");
        if (offset == 0) {
          first_bits = result;
        } else {
          check_identical(result, first_bits, what + ", misaligned against aligned");
        }
      }
    }
  }
}

TEST_CASE("cuda typed fill rounds the value as the reference does", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  // Values that round (0.1, -1/3), one fp16 cannot hold (1e5: infinity) and an fp16 subnormal.
  const float values[] = {0.1f, -1.0f / 3.0f, 1e5f, 1e-6f};
  for (const DataType type : kAllTypes) {
    for (const size_t n : {size_t{1}, size_t{1001}, size_t{4099}}) {
      for (const size_t offset : {size_t{0}, size_t{1}}) {
        for (const float value : values) {
          // One element more than filled: the fill must stop at n.
          const std::vector<float> before(n + 1, 7.0f);
          GpuTensor x_gpu(*gpu, type, before, offset);
          gpu->ops().fill(type, x_gpu.data(), n, value);
          HostTensor x_host(type, before);
          reference.fill(type, x_host.data(), n, value);
          check_same_values(x_gpu.values(), x_host.values(),
                            "fill" + type_suffix(type) + " n=" + std::to_string(n) + " offset " +
                                std::to_string(offset) + " value " + std::to_string(value));
        }
      }
    }
  }
}

TEST_CASE("cuda 16-bit softmax_cross_entropy_rows matches the reference in place and with row "
          "weights and loss scale",
          "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  compare_softmax_rows(*gpu, reference, DataType::f16, 740);
  compare_softmax_rows(*gpu, reference, DataType::bf16, 770);
}

TEST_CASE("cuda 16-bit embedding forward copies rows and backward adds them into the fp32 table",
          "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  const int vocab = 1000;
  const size_t n = 300;
  const std::vector<int32_t> ids = repeated_ids(n, 40, vocab, 760);
  std::map<int32_t, int> uses;
  for (int32_t id : ids) ++uses[id];
  int most_uses = 0;
  for (const auto& entry : uses) most_uses = std::max(most_uses, entry.second);
  GpuArray<int32_t> ids_gpu(*gpu, ids);

  // dim 512: 16-byte copies and 4-wide adds where aligned; 34: 4-byte copies, single adds; 33:
  // element by element. Offset 1 misaligns the 16-bit rows.
  for (const DataType type : kHalfTypes) {
    for (const int dim : {512, 34, 33}) {
      for (const size_t offset : {size_t{0}, size_t{1}}) {
        const std::string what = type_suffix(type) + " dim " + std::to_string(dim) +
                                 (offset ? " unaligned" : " aligned");
        const size_t table_count = static_cast<size_t>(vocab) * dim;
        const std::vector<float> table = random_of(type, table_count, 761);
        GpuTensor table_gpu(*gpu, type, table, offset), y_gpu(*gpu, type, n * dim, offset);
        gpu->ops().embedding_forward(type, table_gpu.data(), ids_gpu.data(), n, dim, y_gpu.data());
        const HostTensor table_host(type, table);
        HostTensor y_host(type, n * dim);
        reference.embedding_forward(type, table_host.data(), ids.data(), n, dim, y_host.data());
        check_same_values(y_gpu.values(), y_host.values(), "embedding_forward" + what);  // a gather

        const std::vector<float> dy = random_of(type, n * dim, 762);
        GpuTensor dy_gpu(*gpu, type, dy, offset);
        const HostTensor dy_host(type, dy);
        std::vector<float> dtable(table_count, 0.0f);
        reference.embedding_backward(ids.data(), type, dy_host.data(), n, dim, dtable.data());
        for (const bool deterministic : {false, true}) {
          set_deterministic(*gpu, deterministic);
          GpuTensor dtable_gpu(*gpu, DataType::f32, table_count, offset);  // zeros, as callers do
          gpu->ops().embedding_backward(ids_gpu.data(), type, dy_gpu.data(), n, dim,
                                        static_cast<float*>(dtable_gpu.data()));
          if (deterministic) {
            // The widened rows added in position order in fp32 onto zeros: the reference's bits.
            check_identical(dtable_gpu.values(), dtable, "embedding_backward sorted" + what);
          } else {
            // The fp32 test's bound: k <= most_uses terms |dy| <= 1 added in any order.
            const double atol = static_cast<double>(most_uses) * most_uses * kEps;
            check_close(dtable_gpu.values(), dtable, atol, 0.0, "embedding_backward atomic" + what);
          }
        }
        set_deterministic(*gpu, false);
      }
    }
  }
}

TEST_CASE("cuda 16-bit lstm cell forward and backward match the reference", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  compare_lstm_cell(*gpu, reference, DataType::f16, 780);
  compare_lstm_cell(*gpu, reference, DataType::bf16, 800);
}

TEST_CASE("cuda 16-bit fused lstm matches an fp32 lstm on the rounded inputs", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  uint64_t stream = 800;
  for (const DataType type : kHalfTypes) {
    for (const LstmCase& c : fused_lstm_cases(type)) {
      compare_fused_lstm(*gpu, reference, c, stream);
      stream += 10;
    }
  }
}

TEST_CASE("cuda fused lstm plans of 16-bit and fp32 data are separate plans", "[gpu]") {
  auto gpu = make_exact_gpu();
  Backend& ops = gpu->ops();
  set_lstm_always_repack(ops, false);
  RnnGeometry fp32 = lstm_geometry(true);
  fp32.seq_len = 5;  // a shape no other test prepares
  RnnGeometry fp16 = fp32, bf16 = fp32;
  fp16.type = DataType::f16;
  bf16.type = DataType::bf16;
  const size_t before = lstm_plans_created(ops);
  (void)ops.lstm_workspace_bytes(fp32);
  (void)ops.lstm_workspace_bytes(fp16);
  CHECK(lstm_plans_created(ops) == before + 2);  // one shape, two data types: two plans
  (void)ops.lstm_reserve_bytes(fp16);
  (void)ops.lstm_reserve_bytes(fp32);
  CHECK(lstm_plans_created(ops) == before + 2);  // each found again, not rebuilt
  if (lstm_runs(ops, bf16)) CHECK(lstm_plans_created(ops) == before + 3);

  // The 16-bit weight copy goes to cuDNN as it is where cuDNN's layout, counted in elements of
  // the type, is the canonical one: expected for these shapes, as in fp32.
  RnnGeometry benchmark;
  benchmark.seq_len = 100;
  benchmark.batch = 384;
  benchmark.input_size = 512;
  benchmark.hidden_size = 512;
  benchmark.num_layers = 2;
  for (const DataType type : kHalfTypes) {
    for (RnnGeometry g : {lstm_geometry(false), lstm_geometry(true), benchmark}) {
      g.type = type;
      if (!lstm_runs(ops, g)) continue;
      INFO(describe(g) << type_suffix(type));
      CHECK(lstm_weights_zero_copy(ops, g));
    }
  }
}

TEST_CASE("cuda 16-bit fused lstm replays from a captured CUDA graph", "[gpu]") {
  // The three passes with dy nullptr, dx nullptr and weights off 16-byte boundaries: every
  // stand-in and the packed copy are made in the eager step, and the replay (scratch zeroed,
  // weights packed, gradients added back) must give what the eager step gave.
  auto gpu = make_exact_gpu();
  Backend& ops = gpu->ops();
  for (const DataType type : kHalfTypes) {
    RnnGeometry g = lstm_geometry(true);
    g.type = type;
    if (!lstm_runs(ops, g)) continue;
    GpuTensor x_gpu(*gpu, type, random_of(type, g.input_count(), 820));
    GpuTensor w_gpu(*gpu, type, random_of(type, g.weight_count(), 821, -0.3f, 0.3f), 1);
    GpuTensor dhy_gpu(*gpu, type, random_of(type, g.state_count(), 822));
    GpuTensor y_gpu(*gpu, type, g.output_count()), dhx_gpu(*gpu, type, g.state_count());
    GpuArray<float> dweights_gpu(*gpu, g.weight_count());
    Buffer workspace = gpu->allocate(std::max<size_t>(ops.lstm_workspace_bytes(g), 1), kTestWorkspace);
    Buffer reserve = gpu->allocate(std::max<size_t>(ops.lstm_reserve_bytes(g), 1), kTestWorkspace);
    auto step = [&] {
      ops.lstm_forward(g, x_gpu.data(), nullptr, nullptr, w_gpu.data(), y_gpu.data(), nullptr,
                       nullptr, reserve.data(), workspace.data());
      ops.lstm_backward_data(g, y_gpu.data(), nullptr, dhy_gpu.data(), nullptr, w_gpu.data(),
                             nullptr, nullptr, nullptr, dhx_gpu.data(), nullptr, reserve.data(),
                             workspace.data());
      ops.fill(dweights_gpu.data(), g.weight_count(), 0.0f);
      ops.lstm_backward_weights(g, x_gpu.data(), nullptr, y_gpu.data(), dweights_gpu.data(),
                                reserve.data(), workspace.data());
    };
    step();
    const std::vector<float> eager_y = y_gpu.values(), eager_dhx = dhx_gpu.values(),
                             eager_dweights = dweights_gpu.download();
    std::unique_ptr<CapturedWork> graph = gpu->capture(step);
    REQUIRE(graph != nullptr);
    ops.fill(type, y_gpu.data(), g.output_count(), -1.0f);
    ops.fill(type, dhx_gpu.data(), g.state_count(), -1.0f);
    ops.fill(dweights_gpu.data(), g.weight_count(), -1.0f);
    graph->launch();
    gpu->synchronize();
    // cuDNN may pick other kernels (other summation orders) in a graph: the 16-bit tolerance.
    const double tolerance = fused_lstm_tolerance(type);
    check_close_to_scale(y_gpu.values(), eager_y, tolerance, "replayed y" + type_suffix(type));
    check_close_to_scale(dhx_gpu.values(), eager_dhx, tolerance,
                         "replayed dhx" + type_suffix(type));
    check_close_to_scale(dweights_gpu.download(), eager_dweights, tolerance,
                         "replayed dweights" + type_suffix(type));
  }
}

// Note [LSTM algorithm]: plans time cuDNN's persistent algorithms against the standard one and
// keep the fastest, so each algorithm the choice can land on must compute the same LSTM. Forced
// one at a time, in every type, on the test shapes and on rnnlm's (128 units, where the
// persistent kernels win); an algorithm cuDNN refuses at set-up for a shape or type is skipped
// with a warning, as the choice skips it.
TEST_CASE("cuda fused lstm algorithms each match the reference where cuDNN offers them", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  Backend& ops = gpu->ops();
  uint64_t stream = 1200;
  for (const char* algorithm : {"standard", "persist_static", "persist_static_small_h"}) {
    set_lstm_algorithm(ops, algorithm);
    for (const DataType type : {DataType::f32, DataType::bf16, DataType::f16}) {
      std::vector<LstmCase> cases;
      for (const bool bidirectional : {false, true}) {
        LstmCase c;
        c.g = lstm_geometry(bidirectional);
        c.g.type = type;
        cases.push_back(c);
      }
      LstmCase rnnlm;
      rnnlm.g.seq_len = 5;
      rnnlm.g.batch = 64;
      rnnlm.g.input_size = 32;
      rnnlm.g.hidden_size = 128;
      rnnlm.g.num_layers = 2;
      rnnlm.g.type = type;
      rnnlm.initial_state = false;
      cases.push_back(rnnlm);
      for (const LstmCase& c : cases) {
        INFO(algorithm << ": " << c.name());
        try {
          (void)ops.lstm_workspace_bytes(c.g);
        } catch (const RuntimeError& error) {
          WARN("skipped: cuDNN refuses " << algorithm << " for " << c.name() << ": " << error.what());
          continue;
        }
        CHECK(lstm_algorithm(ops, c.g) == algorithm);
        compare_fused_lstm(*gpu, reference, c, stream);
        stream += 10;
      }
    }
  }
  set_lstm_algorithm(ops, "fastest");
  // 16-bit: chosen by timing, on a fresh shape: one of cuDNN's three (dpbench's own kernels do
  // not take 8 units), and the choice is kept. fp32: the standard algorithm, untimed.
  RnnGeometry g = lstm_geometry(false);
  g.batch = 7;
  g.type = DataType::f16;
  const std::string chosen = lstm_algorithm(ops, g);
  CHECK((chosen == "standard" || chosen == "persist_static" || chosen == "persist_static_small_h"));
  CHECK(lstm_algorithm(ops, g) == chosen);
  g.type = DataType::f32;
  CHECK(lstm_algorithm(ops, g) == "standard");
  // Where dpbench's persistent kernels take the shape they compete too; a bf16 shape cuDNN
  // refuses (before 9.13) is skipped.
  for (const DataType type : kHalfTypes) {
    RnnGeometry small_h = persistent_lstm_geometry(64);
    small_h.batch = 48;
    small_h.type = type;
    if (!lstm_runs(ops, small_h)) continue;
    const std::string pick = lstm_algorithm(ops, small_h);
    INFO(describe(small_h) << ": " << pick);
    CHECK((pick == "standard" || pick == "persist_static" || pick == "persist_static_small_h" ||
           pick == "own_persistent"));
  }
}

// Note [persistent LSTM]: dpbench's own kernels, forced, against the reference on every
// combination of optional arguments, 32, 64 and 128 units, a batch that leaves the last block
// of 16 rows part-filled, weights off an aligned address, and one step.
TEST_CASE("cuda own persistent lstm matches the reference", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  Backend& ops = gpu->ops();
  set_lstm_algorithm(ops, "own_persistent");
  uint64_t stream = 1500;
  for (const DataType type : kHalfTypes) {
    for (const int hidden : {32, 64, 128}) {
      LstmCase full;
      full.g = persistent_lstm_geometry(hidden);
      full.g.type = type;
      std::vector<LstmCase> cases = {full};
      LstmCase zero_state = full;
      zero_state.initial_state = false;
      zero_state.state_gradients = false;
      cases.push_back(zero_state);
      LstmCase no_outputs = full;
      no_outputs.output_gradient = false;
      cases.push_back(no_outputs);
      LstmCase weights_only = full;
      weights_only.input_gradients = false;
      weights_only.initial_state = false;
      weights_only.weight_offset = 1;
      cases.push_back(weights_only);
      LstmCase one_step = full;
      one_step.g.seq_len = 1;
      one_step.g.num_layers = 1;
      cases.push_back(one_step);
      for (const LstmCase& c : cases) {
        INFO(c.name());
        CHECK(lstm_algorithm(ops, c.g) == "own_persistent");
        compare_fused_lstm(*gpu, reference, c, stream);
        stream += 10;
      }
    }
  }
  // A shape the kernels do not take is refused in one line naming the way out.
  RnnGeometry wide = persistent_lstm_geometry(128);
  wide.hidden_size = 256;
  wide.type = DataType::bf16;
  CHECK_THROWS_WITH(ops.lstm_workspace_bytes(wide), Catch::Contains("--lstm_algorithm=fastest"));
  RnnGeometry both_ways = persistent_lstm_geometry(32);
  both_ways.bidirectional = true;
  both_ways.type = DataType::f16;
  CHECK_THROWS_WITH(ops.lstm_workspace_bytes(both_ways), Catch::Contains("one direction"));
  set_lstm_algorithm(ops, "fastest");
}

TEST_CASE("cuda own persistent lstm replays from a captured CUDA graph", "[gpu]") {
  auto gpu = make_exact_gpu();
  Backend& ops = gpu->ops();
  set_lstm_algorithm(ops, "own_persistent");
  for (const DataType type : kHalfTypes) {
    RnnGeometry g = persistent_lstm_geometry(128);
    g.type = type;
    GpuTensor x_gpu(*gpu, type, random_of(type, g.input_count(), 1700));
    GpuTensor w_gpu(*gpu, type, random_of(type, g.weight_count(), 1701, -0.1f, 0.1f), 1);
    GpuTensor dy_gpu(*gpu, type, random_of(type, g.output_count(), 1702));
    GpuTensor y_gpu(*gpu, type, g.output_count()), dx_gpu(*gpu, type, g.input_count());
    GpuArray<float> dweights_gpu(*gpu, g.weight_count());
    Buffer workspace = gpu->allocate(ops.lstm_workspace_bytes(g), kTestWorkspace);
    Buffer reserve = gpu->allocate(ops.lstm_reserve_bytes(g), kTestWorkspace);
    auto step = [&] {
      ops.lstm_forward(g, x_gpu.data(), nullptr, nullptr, w_gpu.data(), y_gpu.data(), nullptr,
                       nullptr, reserve.data(), workspace.data());
      ops.lstm_backward_data(g, y_gpu.data(), dy_gpu.data(), nullptr, nullptr, w_gpu.data(),
                             nullptr, nullptr, dx_gpu.data(), nullptr, nullptr, reserve.data(),
                             workspace.data());
      ops.fill(dweights_gpu.data(), g.weight_count(), 0.0f);
      ops.lstm_backward_weights(g, x_gpu.data(), nullptr, y_gpu.data(), dweights_gpu.data(),
                                reserve.data(), workspace.data());
    };
    step();
    const std::vector<float> eager_y = y_gpu.values(), eager_dx = dx_gpu.values(),
                             eager_dweights = dweights_gpu.download();
    std::unique_ptr<CapturedWork> graph = gpu->capture(step);
    REQUIRE(graph != nullptr);
    ops.fill(type, y_gpu.data(), g.output_count(), -1.0f);
    ops.fill(type, dx_gpu.data(), g.input_count(), -1.0f);
    ops.fill(dweights_gpu.data(), g.weight_count(), -1.0f);
    graph->launch();
    gpu->synchronize();
    // The same kernels and GEMMs in the same order, and no atomics: the same bits.
    check_same_values(y_gpu.values(), eager_y, "replayed y" + type_suffix(type));
    check_same_values(dx_gpu.values(), eager_dx, "replayed dx" + type_suffix(type));
    check_same_values(dweights_gpu.download(), eager_dweights, "replayed dweights" + type_suffix(type));
  }
  set_lstm_algorithm(ops, "fastest");
}
