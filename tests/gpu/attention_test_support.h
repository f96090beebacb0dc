// The [gpu] attention tests' machinery: a row of AttentionCase says a shape, its masks and where
// Q, K and V live (separate buffers or column slices of one, with padding columns);
// compare_attention runs forward and backward on a GPU and on the reference backend from the same
// rounded inputs and compares every result, the padding left untouched included, within Note
// [attention tolerance]. Shared by the tests of dpbench's attention kernels
// (test_cuda_transformer_ops.cpp) and of cuDNN's fused attention (test_cudnn_attention.cpp).
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/attention_geometry.h"
#include "engine/reference/reference_backend.h"
#include "tests/gpu/gpu_test_support.h"

namespace dpbench::gpu_test {

inline std::vector<float> random_of(DataType type, size_t n, uint64_t stream, float lo = -1.0f, float hi = 1.0f) {
  return rounded(type, random_vector(n, stream, lo, hi));
}

inline double max_magnitude(const std::vector<float>& values) {
  double largest = 0.0;
  for (float v : values) {
    if (std::isfinite(v)) largest = std::max(largest, std::fabs(static_cast<double>(v)));
  }
  return largest;
}

inline Buffer allocate_at_least_one(Device& gpu, size_t bytes) {
  return gpu.allocate(std::max<size_t>(bytes, 1), kTestBuffer);
}

struct AttentionCase {
  std::string name;
  int batch, heads, query_len, key_len, head_dim;
  bool causal = false;
  float dropout = 0.0f;
  std::vector<int32_t> key_lengths = {};  // empty: every key real
  // Q, K, V column slices of one buffer (self attention: Q|K|V; cross: Q alone, K|V), each buffer
  // and O 8 columns wider than its tensors, so strides differ from the row widths.
  bool packed = false;
  size_t offset = 0;  // elements: 1 misaligns every buffer (no 16-byte packs)
  int32_t step = 5;
};

// Where the attention's tensors live: buffers of rows x width elements; a tensor is `column`
// columns into buffer `buffer`, rows `stride` apart (the buffer's width).
struct Slot {
  int buffer = 0;
  int column = 0;
};

struct AttentionLayout {
  std::vector<size_t> rows;
  std::vector<int> widths;
  Slot q, k, v;
};

inline constexpr int kPadColumns = 8;  // 16 bytes of 16-bit elements: packed rows stay aligned

inline AttentionLayout layout_of(const AttentionCase& c) {
  const int m = c.heads * c.head_dim;
  const size_t q_rows = static_cast<size_t>(c.query_len) * c.batch;
  const size_t kv_rows = static_cast<size_t>(c.key_len) * c.batch;
  AttentionLayout layout;
  if (!c.packed) {
    layout.rows = {q_rows, kv_rows, kv_rows};
    layout.widths = {m, m, m};
    layout.q = {0, 0};
    layout.k = {1, 0};
    layout.v = {2, 0};
  } else if (c.query_len == c.key_len) {
    layout.rows = {q_rows};
    layout.widths = {3 * m + kPadColumns};
    layout.q = {0, 0};
    layout.k = {0, m};
    layout.v = {0, 2 * m};
  } else {
    layout.rows = {q_rows, kv_rows};
    layout.widths = {m + kPadColumns, 2 * m + kPadColumns};
    layout.q = {0, 0};
    layout.k = {1, 0};
    layout.v = {1, m};
  }
  return layout;
}

inline AttentionGeometry geometry_of(const AttentionCase& c, DataType type) {
  const AttentionLayout layout = layout_of(c);
  AttentionGeometry g;
  g.batch = c.batch;
  g.heads = c.heads;
  g.query_len = c.query_len;
  g.key_len = c.key_len;
  g.head_dim = c.head_dim;
  g.type = type;
  g.causal = c.causal;
  g.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  g.q_stride = layout.widths[layout.q.buffer];
  g.k_stride = layout.widths[layout.k.buffer];
  g.v_stride = layout.widths[layout.v.buffer];
  g.o_stride = g.model_dim() + (c.packed ? kPadColumns : 0);
  g.dropout_rate = c.dropout;
  g.dropout_seed = 1234;
  g.first_sample = 1000;  // a replica's share of the global batch, as in data parallelism
  return g;
}

// Columns [first, first + count) of a (rows, width) matrix.
inline std::vector<float> columns_of(const std::vector<float>& matrix, size_t rows, int width, int first, int count) {
  std::vector<float> result;
  result.reserve(rows * count);
  for (size_t r = 0; r < rows; ++r) {
    const auto row = matrix.begin() + static_cast<std::ptrdiff_t>(r * width);
    result.insert(result.end(), row + first, row + first + count);
  }
  return result;
}

// Every element of the columns of a (rows, width) matrix that no tensor owns.
inline std::vector<float> unowned_columns(const std::vector<float>& matrix, size_t rows, int width,
                                          const std::vector<Slot>& slots, int buffer, int model_dim) {
  std::vector<float> result;
  for (int column = 0; column < width; ++column) {
    bool owned = false;
    for (const Slot& s : slots)
      owned = owned || (s.buffer == buffer && column >= s.column && column < s.column + model_dim);
    if (owned) continue;
    for (size_t r = 0; r < rows; ++r) result.push_back(matrix[r * width + column]);
  }
  return result;
}

// Note [attention tolerance]: each result is a sum over at most max(Tq, Tk) terms, each a product
// of a probability and a sum over head_dim terms. In fp32 the GPU's dot products are within
// head_dim eps of their terms, so a score s is within head_dim eps |s|max of itself and a
// probability exp(s - lse) within head_dim eps (1 + |s|max) relative (exp and log within 2 ulp,
// the row sum within (Tk / 16 + 4) eps); the sums over keys or queries add Tq + Tk eps of their
// terms, and the terms' magnitudes are within a small factor of the largest result (cancellation
// in the softmax gradient included), margin 4. A 16-bit result adds its rounding, and the
// backward's row dot d_o . o reads a rounded o: 8 units in the last place of the largest result.

// Attention's fp32 tolerance, relative to the largest result (Note [attention tolerance]).
inline double attention_budget(const AttentionGeometry& g, double qk_max) {
  const double score_max = g.scale * g.head_dim * qk_max * qk_max;
  return 4.0 * kEps * (g.head_dim * (1.0 + score_max) + g.query_len + g.key_len + 32.0);
}

// The spacing of TF32's values relative to the value (10 stored mantissa bits): under TF32 the
// tensor-core kernels round q, k, v, d_o and the probabilities to it before they multiply.
inline constexpr double kTf32Unit = 1.0 / (1 << 10);

// gpu against ref within the budget of the largest |ref| (Note [attention tolerance]). The inputs
// of the products are rounded to 16 bits (or, under `tf32`, to TF32) and the results stored in
// `type`: 8 units in the last place of the largest result for either.
inline void check_attention_result(const std::vector<float>& gpu, const std::vector<float>& ref, DataType type,
                                   double budget, const std::string& what, bool tf32 = false) {
  const double magnitude = max_magnitude(ref);
  const double rounding = type != DataType::f32 ? unit_in_last_place(type) : tf32 ? kTf32Unit : 0.0;
  check_close(gpu, ref, (budget + 8.0 * rounding) * magnitude + storage_atol(type), storage_rtol(type), what);
}

// ||a - b|| / ||b||: how far a whole result moved, the measure of TF32's rounding.
inline double relative_l2_error(const std::vector<float>& a, const std::vector<float>& b) {
  double difference = 0, reference = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    reference += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(difference / reference);
}

// Rows (b, h, i) that see a key: those that have a log-sum-exp.
inline std::vector<char> rows_with_keys(const AttentionCase& c) {
  std::vector<char> seen(static_cast<size_t>(c.batch) * c.heads * c.query_len, 1);
  for (int b = 0; b < c.batch; ++b) {
    const int visible = c.key_lengths.empty() ? c.key_len : std::min(std::max(c.key_lengths[b], 0), c.key_len);
    if (visible > 0) continue;
    for (size_t at = static_cast<size_t>(b) * c.heads * c.query_len;
         at < static_cast<size_t>(b + 1) * c.heads * c.query_len; ++at) {
      seen[at] = 0;
    }
  }
  return seen;
}

// Forward then backward on both backends from the same rounded inputs; every result compared.
// `tf32`: the GPU runs under TF32 (fp32 data then takes the tensor-core kernels where the head and
// strides allow), and the returned value is the relative L2 error of o.
inline double compare_attention(Device& gpu, ReferenceBackend& reference, const AttentionCase& c, DataType type,
                                uint64_t stream, bool tf32 = false) {
  Backend& ops = gpu.ops();
  const AttentionGeometry g = geometry_of(c, type);
  const AttentionLayout layout = layout_of(c);
  const int m = g.model_dim();
  const std::string what = c.name + type_suffix(type);
  const float qk_range = 2.0f;  // scores up to ~|s| 5 at head_dim 64: the running maximum moves

  // Inputs and the gradients' buffers (random: what the backward leaves unwritten shows).
  std::vector<std::vector<float>> inputs, gradients_before;
  std::vector<std::unique_ptr<GpuTensor>> inputs_gpu, gradients_gpu;
  std::vector<HostTensor> inputs_ref, gradients_ref;
  for (size_t buffer = 0; buffer < layout.rows.size(); ++buffer) {
    const size_t count = layout.rows[buffer] * layout.widths[buffer];
    inputs.push_back(random_of(type, count, stream++, -qk_range, qk_range));
    gradients_before.push_back(random_of(type, count, stream++));
    inputs_gpu.push_back(std::make_unique<GpuTensor>(gpu, type, inputs.back(), c.offset));
    gradients_gpu.push_back(std::make_unique<GpuTensor>(gpu, type, gradients_before.back(), c.offset));
    inputs_ref.emplace_back(type, inputs.back());
    gradients_ref.emplace_back(type, gradients_before.back());
  }
  const size_t o_rows = static_cast<size_t>(c.query_len) * c.batch;
  const size_t o_count = o_rows * g.o_stride;
  const std::vector<float> d_o = random_of(type, o_count, stream++);
  const std::vector<float> o_before = random_of(type, o_count, stream++);
  GpuTensor o_gpu(gpu, type, o_before, c.offset), d_o_gpu(gpu, type, d_o, c.offset);
  HostTensor o_ref(type, o_before), d_o_ref(type, d_o);
  GpuArray<float> lse_gpu(gpu, std::vector<float>(g.lse_count(), 7.0f));
  std::vector<float> lse_ref(g.lse_count(), 7.0f);
  GpuArray<int32_t> lengths_gpu(gpu, c.key_lengths.empty() ? std::vector<int32_t>{0} : c.key_lengths);
  GpuArray<int32_t> step_gpu(gpu, std::vector<int32_t>{c.step});
  const int32_t* lengths_device = c.key_lengths.empty() ? nullptr : lengths_gpu.data();
  const int32_t* lengths_host = c.key_lengths.empty() ? nullptr : c.key_lengths.data();
  Buffer workspace = allocate_at_least_one(gpu, ops.attention_workspace_bytes(g));
  std::vector<unsigned char> ref_workspace(std::max<size_t>(reference.attention_workspace_bytes(g), 1));

  auto element = [&](auto& tensors, const Slot& slot) {
    return static_cast<char*>(tensors[slot.buffer]->data()) + slot.column * data_type_bytes(type);
  };
  auto host_element = [&](std::vector<HostTensor>& tensors, const Slot& slot) {
    return static_cast<char*>(tensors[slot.buffer].data()) + slot.column * data_type_bytes(type);
  };
  ops.attention_forward(g, element(inputs_gpu, layout.q), element(inputs_gpu, layout.k), element(inputs_gpu, layout.v),
                        lengths_device, step_gpu.data(), o_gpu.data(), lse_gpu.data(), workspace.data());
  ops.attention_backward(g, element(inputs_gpu, layout.q), element(inputs_gpu, layout.k), element(inputs_gpu, layout.v),
                         o_gpu.data(), d_o_gpu.data(), lse_gpu.data(), lengths_device, step_gpu.data(),
                         element(gradients_gpu, layout.q), element(gradients_gpu, layout.k),
                         element(gradients_gpu, layout.v), workspace.data());
  reference.attention_forward(g, host_element(inputs_ref, layout.q), host_element(inputs_ref, layout.k),
                              host_element(inputs_ref, layout.v), lengths_host, &c.step, o_ref.data(), lse_ref.data(),
                              ref_workspace.data());
  reference.attention_backward(
      g, host_element(inputs_ref, layout.q), host_element(inputs_ref, layout.k), host_element(inputs_ref, layout.v),
      o_ref.data(), d_o_ref.data(), lse_ref.data(), lengths_host, &c.step, host_element(gradients_ref, layout.q),
      host_element(gradients_ref, layout.k), host_element(gradients_ref, layout.v), ref_workspace.data());

  const double budget = attention_budget(g, qk_range);
  const std::vector<float> o_seen = o_gpu.values(), o_expected = o_ref.values();
  check_attention_result(columns_of(o_seen, o_rows, g.o_stride, 0, m), columns_of(o_expected, o_rows, g.o_stride, 0, m),
                         type, budget, "attention o " + what, tf32);
  check_same_values(columns_of(o_seen, o_rows, g.o_stride, m, g.o_stride - m),
                    columns_of(o_before, o_rows, g.o_stride, m, g.o_stride - m), "attention o's padding " + what);
  // lse where the row sees a key; a row that sees none has o = 0 (compared above) and, on the
  // GPU, lse = log 0 = -inf (what the reference stores there is its own business).
  const std::vector<float> lse_seen = lse_gpu.download();
  const std::vector<char> seen = rows_with_keys(c);
  std::vector<float> lse_gpu_seen, lse_ref_seen;
  size_t empty_rows_wrong = 0;
  for (size_t at = 0; at < seen.size(); ++at) {
    if (seen[at]) {
      lse_gpu_seen.push_back(lse_seen[at]);
      lse_ref_seen.push_back(lse_ref[at]);
    } else {
      empty_rows_wrong += !(lse_seen[at] == -std::numeric_limits<float>::infinity());
    }
  }
  // lse = m + log l: |m| up to the largest score, l's relative error budget's worth.
  const double lse_budget = budget + (tf32 ? 8.0 * kTf32Unit : 0.0);
  check_close(lse_gpu_seen, lse_ref_seen, lse_budget * (1.0 + g.scale * g.head_dim * qk_range * qk_range), 2 * kEps,
              "attention lse " + what);
  INFO("attention lse of rows that see no key " + what);
  CHECK(empty_rows_wrong == 0);

  const std::vector<Slot> slots = {layout.q, layout.k, layout.v};
  const char* names[] = {"dq", "dk", "dv"};
  for (int t = 0; t < 3; ++t) {
    const Slot& slot = slots[t];
    const size_t rows = layout.rows[slot.buffer];
    const int width = layout.widths[slot.buffer];
    check_attention_result(columns_of(gradients_gpu[slot.buffer]->values(), rows, width, slot.column, m),
                           columns_of(gradients_ref[slot.buffer].values(), rows, width, slot.column, m), type, budget,
                           std::string("attention ") + names[t] + " " + what, tf32);
  }
  for (size_t buffer = 0; buffer < layout.rows.size(); ++buffer) {
    const int b = static_cast<int>(buffer);
    check_same_values(
        unowned_columns(gradients_gpu[buffer]->values(), layout.rows[buffer], layout.widths[buffer], slots, b, m),
        unowned_columns(gradients_before[buffer], layout.rows[buffer], layout.widths[buffer], slots, b, m),
        "attention gradients' padding " + what);
  }
  return relative_l2_error(columns_of(o_seen, o_rows, g.o_stride, 0, m),
                           columns_of(o_expected, o_rows, g.o_stride, 0, m));
}

}  // namespace dpbench::gpu_test
