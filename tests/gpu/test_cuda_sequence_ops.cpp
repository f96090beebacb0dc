// [gpu] The CUDA backend's sequence ops against the reference backend: row-wise softmax
// cross-entropy, the reproducible scaled sum, device copies, embeddings (gather, scatter-add with
// repeated ids, touched rows and their packing by gather_rows), the LSTM cell, and cuDNN's fused
// LSTM (forward, backward data, backward weights; uni- and bidirectional, with and without
// initial states and output gradients). Also: the fused LSTM's plans are built once per
// geometry and take the canonical weights without a copy, the ops replay from a captured CUDA
// graph, and Adam reading its step on the device equals Adam given the step by the host.
//
// Comparison: |gpu - ref| <= atol + rtol * |ref| per element, TF32 off (exact fp32 on the GPU).
// The reference accumulates in double, so the tolerances cover the GPU's fp32 rounding; each one
// says where it comes from. eps = 2^-23.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/cuda/cuda_controls.h"
#include "engine/cuda/cuda_rnn_controls.h"
#include "engine/reference/reference_backend.h"
#include "engine/rnn_geometry.h"
#include "tests/gpu/gpu_test_support.h"

using namespace dpbench;
using namespace dpbench::gpu_test;

namespace {

std::unique_ptr<Device> make_exact_gpu() {
  auto gpu = make_gpu();
  set_tf32(*gpu, false);  // the default, said out loud: every comparison below is exact fp32
  return gpu;
}

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

}  // namespace

TEST_CASE("cuda softmax_cross_entropy_rows matches the reference on vocabulary-sized rows, scaled "
          "and in place",
          "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  struct Shape { int rows, classes; float offset; };
  // 50000 and 10001: the benchmark's vocabularies (rows far longer than shared memory; 10001
  // leaves every row differently aligned). An offset of 100 checks the max subtraction: exp(100)
  // overflows fp32, so only a max-shifted sum gives a finite loss.
  const Shape shapes[] = {{7, 50000, 0.0f}, {7, 10001, 0.0f}, {7, 5, 0.0f}, {7, 10001, 100.0f},
                          {3, 129, 0.0f}};
  // Variants: where logits and dlogits live. Offset 1 misaligns a buffer for float4 access.
  struct Variant { bool in_place; size_t logits_offset, dlogits_offset; bool scaled; };
  const Variant variants[] = {{true, 0, 0, false}, {false, 0, 0, true}, {true, 1, 1, true},
                              {false, 1, 0, false}, {false, 0, 3, true}};
  uint64_t stream = 200;
  for (const Shape& s : shapes) {
    for (const Variant& v : variants) {
      const size_t count = static_cast<size_t>(s.rows) * s.classes;
      const std::vector<float> logits = random_vector(count, stream++, s.offset - 6.0f, s.offset + 6.0f);
      std::vector<int32_t> labels(s.rows);
      reference.fill_labels_by_index(labels.data(), labels.size(), 7, kRandomStreamLabels, stream,
                                     s.classes);
      // Per-token gradients of a loss summed over rows * 3 tokens and scaled by 2^10 (fp16 loss
      // scaling), or plain ones.
      const float gradient_scale = v.scaled ? 1.0f / (3.0f * s.rows) : 1.0f;
      const float loss_scale = 1024.0f;

      GpuTensor logits_gpu(*gpu, DataType::f32, logits, v.logits_offset);
      GpuTensor separate_gpu(*gpu, DataType::f32, count, v.dlogits_offset);
      GpuArray<int32_t> labels_gpu(*gpu, labels);
      GpuArray<float> row_losses_gpu(*gpu, s.rows), loss_scale_gpu(*gpu, std::vector<float>{loss_scale});
      float* dlogits_gpu = static_cast<float*>(v.in_place ? logits_gpu.data() : separate_gpu.data());
      gpu->ops().softmax_cross_entropy_rows(
          static_cast<const float*>(logits_gpu.data()), labels_gpu.data(), s.rows, s.classes,
          gradient_scale, row_losses_gpu.data(), dlogits_gpu, v.scaled ? loss_scale_gpu.data() : nullptr);

      std::vector<float> row_losses(s.rows), dlogits(count);
      reference.softmax_cross_entropy_rows(logits.data(), labels.data(), s.rows, s.classes,
                                           gradient_scale, row_losses.data(), dlogits.data(),
                                           v.scaled ? &loss_scale : nullptr);

      // The GPU sums the row's exponentials in fp32 (each thread its share in order, rescaling
      // its running sum when the maximum grows, then a tree), with expf (<= 2 ulp): the sum's
      // relative error stays below ~3 (classes + 16) eps even if every term were rescaled, and
      // that is the absolute error of log(sum), the row loss. Probabilities carry the same
      // relative error, so dlogits are off by at most that much times the gradient's scale.
      // Margin 2 on the bound, as the mean softmax test has.
      const double bound = 2.0 * 3.0 * (s.classes + 16) * kEps;
      const double gradient_factor = gradient_scale * (v.scaled ? loss_scale : 1.0f);
      const std::string what = " " + std::to_string(s.rows) + "x" + std::to_string(s.classes) +
                               " offset " + std::to_string(static_cast<int>(s.offset)) +
                               (v.in_place ? " in place" : " separate") + " logits+" +
                               std::to_string(v.logits_offset) + " dlogits+" +
                               std::to_string(v.dlogits_offset) + (v.scaled ? " scaled" : "");
      check_close(row_losses_gpu.download(), row_losses, bound, 4 * kEps, "row losses" + what);
      const std::vector<float> dlogits_seen =
          v.in_place ? logits_gpu.values() : separate_gpu.values();
      check_close(dlogits_seen, dlogits, bound * gradient_factor, bound, "dlogits" + what);
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
        std::max<size_t>(gpu->ops().embedding_touched_rows_workspace_bytes(c.n, c.vocab), 1));
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
      gpu->allocate(std::max<size_t>(gpu->ops().embedding_touched_rows_workspace_bytes(n, vocab), 1));
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

TEST_CASE("cuda lstm cell forward and backward match the reference", "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  struct Shape { int batch, hidden; };
  // H 16 moves float4s; H 7 cannot.
  const Shape shapes[] = {{5, 16}, {3, 7}};
  uint64_t stream = 340;
  for (const Shape& s : shapes) {
    const size_t gate_count = static_cast<size_t>(s.batch) * 4 * s.hidden;
    const size_t state_count = static_cast<size_t>(s.batch) * s.hidden;
    for (const bool first_step : {false, true}) {  // first step: c_prev == nullptr; last: dc == nullptr
      const std::string what = " B" + std::to_string(s.batch) + " H" + std::to_string(s.hidden) +
                               (first_step ? " first/last step" : " middle step");
      const std::vector<float> pre = random_vector(gate_count, stream++, -3.0f, 3.0f);
      const std::vector<float> bias_input = random_vector(4 * s.hidden, stream++);
      const std::vector<float> bias_recurrent = random_vector(4 * s.hidden, stream++);
      const std::vector<float> c_prev = random_vector(state_count, stream++, -2.0f, 2.0f);

      GpuArray<float> gates_gpu(*gpu, pre), bias_input_gpu(*gpu, bias_input),
          bias_recurrent_gpu(*gpu, bias_recurrent), c_prev_gpu(*gpu, c_prev),
          c_gpu(*gpu, state_count), h_gpu(*gpu, state_count);
      gpu->ops().lstm_cell_forward(s.batch, s.hidden, gates_gpu.data(), bias_input_gpu.data(),
                                   bias_recurrent_gpu.data(), first_step ? nullptr : c_prev_gpu.data(),
                                   c_gpu.data(), h_gpu.data());
      std::vector<float> gates = pre, c(state_count), h(state_count);
      reference.lstm_cell_forward(s.batch, s.hidden, gates.data(), bias_input.data(),
                                  bias_recurrent.data(), first_step ? nullptr : c_prev.data(),
                                  c.data(), h.data());
      // Each output is a handful of fp32 operations on values below 4 in magnitude: two bias
      // additions, expf or tanhf (<= 2 ulp), a division, then c = f c_prev + i g and
      // h = o tanh(c): under 16 roundings of values <= 4, so 64 eps absolute, 16 eps relative.
      check_close(gates_gpu.download(), gates, 64 * kEps, 16 * kEps, "cell activations" + what);
      check_close(c_gpu.download(), c, 64 * kEps, 16 * kEps, "cell c" + what);
      check_close(h_gpu.download(), h, 64 * kEps, 16 * kEps, "cell h" + what);

      // Backward from the reference's activations, dgates over the gates and dc_prev over dc
      // (the aliases the unrolled layer uses).
      const std::vector<float> dh = random_vector(state_count, stream++);
      const std::vector<float> dc = random_vector(state_count, stream++);
      GpuArray<float> activations_gpu(*gpu, gates), c_out_gpu(*gpu, c), dh_gpu(*gpu, dh),
          dc_gpu(*gpu, dc);
      gpu->ops().lstm_cell_backward(s.batch, s.hidden, activations_gpu.data(),
                                    first_step ? nullptr : c_prev_gpu.data(), c_out_gpu.data(),
                                    dh_gpu.data(), first_step ? nullptr : dc_gpu.data(),
                                    activations_gpu.data(), first_step ? nullptr : dc_gpu.data());
      std::vector<float> dgates = gates, dc_prev = dc;
      reference.lstm_cell_backward(s.batch, s.hidden, dgates.data(),
                                   first_step ? nullptr : c_prev.data(), c.data(), dh.data(),
                                   first_step ? nullptr : dc_prev.data(), dgates.data(),
                                   first_step ? nullptr : dc_prev.data());
      // Products of up to five factors (each <= 2 in magnitude) and one tanhf: 128 eps absolute
      // (the small factors 1 - t^2 and s (1 - s) cancel, which a relative bound would not cover).
      check_close(activations_gpu.download(), dgates, 128 * kEps, 16 * kEps, "cell dgates" + what);
      if (!first_step) check_close(dc_gpu.download(), dc_prev, 128 * kEps, 16 * kEps, "cell dc_prev" + what);
    }
  }
}

namespace {

// One fused-LSTM comparison: the geometry, what is passed and what is asked for.
struct LstmCase {
  RnnGeometry g;
  bool initial_state = true;     // hx, cx given (else nullptr: zeros)
  bool output_gradient = true;   // dy given (else nullptr: the outputs feed nothing)
  bool state_gradients = true;   // dhy, dcy given
  bool input_gradients = true;   // dx, dhx, dcx wanted
  size_t weight_offset = 0;      // floats between an aligned allocation and the weights
  bool repack = false;           // force the plan's repacking path
  std::string name() const {
    return describe(g) + (initial_state ? ", hx/cx" : ", no hx/cx") +
           (output_gradient ? ", dy" : ", dy=null") + (state_gradients ? ", dhy/dcy" : ", no dhy/dcy") +
           (input_gradients ? ", dx/dhx/dcx" : ", no dx/dhx/dcx") +
           (weight_offset ? ", weights+" + std::to_string(weight_offset) : "") +
           (repack ? ", repacked weights" : "");
  }
};

void compare_fused_lstm(Device& gpu, ReferenceBackend& reference, const LstmCase& c,
                        uint64_t stream) {
  const RnnGeometry& g = c.g;
  const std::string what = " (" + c.name() + ")";
  Backend& ops = gpu.ops();
  // The setting is part of the plan's key: it stays on for every call of this comparison.
  set_lstm_always_repack(ops, c.repack);
  if (c.repack) CHECK_FALSE(lstm_weights_zero_copy(ops, g));
  const size_t weights = g.weight_count();
  // Weights of the size PyTorch initialises with (U(-1/sqrt(H), 1/sqrt(H))), inputs in [-1, 1].
  const float bound = 1.0f / std::sqrt(static_cast<float>(g.hidden_size));
  const std::vector<float> w = random_vector(weights, stream + 0, -bound, bound);
  const std::vector<float> x = random_vector(g.input_count(), stream + 1);
  const std::vector<float> hx = random_vector(g.state_count(), stream + 2, -0.5f, 0.5f);
  const std::vector<float> cx = random_vector(g.state_count(), stream + 3, -0.5f, 0.5f);
  const std::vector<float> dy = random_vector(g.output_count(), stream + 4);
  const std::vector<float> dhy = random_vector(g.state_count(), stream + 5);
  const std::vector<float> dcy = random_vector(g.state_count(), stream + 6);
  const std::vector<float> dw_start = random_vector(weights, stream + 7);  // it adds onto this

  // ---- GPU
  const size_t workspace_bytes = ops.lstm_workspace_bytes(g);
  const size_t reserve_bytes = ops.lstm_reserve_bytes(g);
  Buffer workspace = gpu.allocate(std::max<size_t>(workspace_bytes, 1));
  Buffer reserve = gpu.allocate(std::max<size_t>(reserve_bytes, 1));
  GpuTensor w_gpu(gpu, DataType::f32, w, c.weight_offset);
  GpuTensor dw_gpu(gpu, DataType::f32, dw_start, c.weight_offset);
  GpuArray<float> x_gpu(gpu, x), hx_gpu(gpu, hx), cx_gpu(gpu, cx), dy_gpu(gpu, dy),
      dhy_gpu(gpu, dhy), dcy_gpu(gpu, dcy);
  GpuArray<float> y_gpu(gpu, g.output_count()), hy_gpu(gpu, g.state_count()),
      cy_gpu(gpu, g.state_count()), dx_gpu(gpu, g.input_count()), dhx_gpu(gpu, g.state_count()),
      dcx_gpu(gpu, g.state_count());
  const float* hx_p = c.initial_state ? hx_gpu.data() : nullptr;
  const float* cx_p = c.initial_state ? cx_gpu.data() : nullptr;
  const float* w_p = static_cast<const float*>(w_gpu.data());
  ops.lstm_forward(g, x_gpu.data(), hx_p, cx_p, w_p, y_gpu.data(), hy_gpu.data(), cy_gpu.data(),
                   reserve.data(), workspace.data());
  ops.lstm_backward_data(g, y_gpu.data(), c.output_gradient ? dy_gpu.data() : nullptr,
                         c.state_gradients ? dhy_gpu.data() : nullptr,
                         c.state_gradients ? dcy_gpu.data() : nullptr, w_p, hx_p, cx_p,
                         c.input_gradients ? dx_gpu.data() : nullptr,
                         c.input_gradients ? dhx_gpu.data() : nullptr,
                         c.input_gradients ? dcx_gpu.data() : nullptr, reserve.data(),
                         workspace.data());
  ops.lstm_backward_weights(g, x_gpu.data(), hx_p, y_gpu.data(),
                            static_cast<float*>(dw_gpu.data()), reserve.data(), workspace.data());

  // ---- reference
  std::vector<unsigned char> ref_workspace(std::max<size_t>(reference.lstm_workspace_bytes(g), 1));
  std::vector<unsigned char> ref_reserve(std::max<size_t>(reference.lstm_reserve_bytes(g), 1));
  std::vector<float> y(g.output_count()), hy(g.state_count()), cy(g.state_count()),
      dx(g.input_count()), dhx(g.state_count()), dcx(g.state_count()), dw = dw_start;
  const float* ref_hx = c.initial_state ? hx.data() : nullptr;
  const float* ref_cx = c.initial_state ? cx.data() : nullptr;
  reference.lstm_forward(g, x.data(), ref_hx, ref_cx, w.data(), y.data(), hy.data(), cy.data(),
                         ref_reserve.data(), ref_workspace.data());
  reference.lstm_backward_data(g, y.data(), c.output_gradient ? dy.data() : nullptr,
                               c.state_gradients ? dhy.data() : nullptr,
                               c.state_gradients ? dcy.data() : nullptr, w.data(), ref_hx, ref_cx,
                               c.input_gradients ? dx.data() : nullptr,
                               c.input_gradients ? dhx.data() : nullptr,
                               c.input_gradients ? dcx.data() : nullptr, ref_reserve.data(),
                               ref_workspace.data());
  reference.lstm_backward_weights(g, x.data(), ref_hx, y.data(), dw.data(), ref_reserve.data(),
                                  ref_workspace.data());

  // Every value is the end of a chain of at most T * layers * directions = 24 cell steps (18 for
  // the odd geometry), each a dot product of <= in + 2H ~ 30-50 terms of O(1) plus expf/tanhf
  // (<= 2 ulp), errors mostly cancelling: ~1e-4 relative to O(1) values at worst; weight
  // gradients add T * B = 24 such terms. Typical fp32 errors are ~1e-6; a wrong gate order, bias
  // or direction moves results by 1e-2 or more.
  const double atol = 2e-4, rtol = 2e-4;
  check_close(y_gpu.download(), y, atol, rtol, "lstm y" + what);
  check_close(hy_gpu.download(), hy, atol, rtol, "lstm hy" + what);
  check_close(cy_gpu.download(), cy, atol, rtol, "lstm cy" + what);
  if (c.input_gradients) {
    check_close(dx_gpu.download(), dx, atol, rtol, "lstm dx" + what);
    check_close(dhx_gpu.download(), dhx, atol, rtol, "lstm dhx" + what);
    check_close(dcx_gpu.download(), dcx, atol, rtol, "lstm dcx" + what);
  }
  check_close(dw_gpu.values(), dw, atol, rtol, "lstm dweights (added onto prefilled)" + what);
  // The weights themselves are read only.
  check_identical(w_gpu.values(), w, "lstm weights unchanged" + what);
  set_lstm_always_repack(ops, false);
}

}  // namespace

TEST_CASE("cuda fused lstm matches the reference: forward, backward data and backward weights",
          "[gpu]") {
  auto gpu = make_exact_gpu();
  ReferenceBackend reference;
  std::vector<LstmCase> cases;
  for (const bool bidirectional : {false, true}) {
    LstmCase full;
    full.g = lstm_geometry(bidirectional);
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
  // The weights one float past an aligned address: a parameter tensor can start anywhere.
  LstmCase unaligned;
  unaligned.g = lstm_geometry(false);
  unaligned.weight_offset = 1;
  cases.push_back(unaligned);
  // The repacking path (taken where cuDNN's layout is not the canonical one), forced: weights
  // packed before forward and backward data, gradients added back after backward weights.
  for (const bool bidirectional : {false, true}) {
    LstmCase repacked;
    repacked.g = lstm_geometry(bidirectional);
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
  cases.push_back(odd);
  uint64_t stream = 400;
  for (const LstmCase& c : cases) {
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
  Buffer workspace = gpu->allocate(std::max<size_t>(ops.lstm_workspace_bytes(g), 1));
  Buffer reserve = gpu->allocate(std::max<size_t>(ops.lstm_reserve_bytes(g), 1));
  Buffer touched_workspace =
      gpu->allocate(std::max<size_t>(ops.embedding_touched_rows_workspace_bytes(tokens, vocab), 1));
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
                    1e-3f, 0.9f, 0.999f, 1e-8f, /*step ignored*/ 0, on_device);
  });
  REQUIRE(graph != nullptr);
  for (int32_t step_from_zero = 0; step_from_zero < 4; ++step_from_zero) {
    gpu->copy_from_host(grads_gpu.data(), random_vector(n, 601 + step_from_zero).data(),
                        n * sizeof(float));
    gpu->copy_from_host(step_gpu.data(), &step_from_zero, sizeof(int32_t));
    ops.adam_update(host_params.data(), grads_gpu.data(), host_m.data(), host_v.data(), n, 1e-3f,
                    0.9f, 0.999f, 1e-8f, step_from_zero + 1);
    // A wrong host step proves it is ignored.
    ops.adam_update(device_params.data(), grads_gpu.data(), device_m.data(), device_v.data(), n,
                    1e-3f, 0.9f, 0.999f, 1e-8f, 1000, on_device);
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
