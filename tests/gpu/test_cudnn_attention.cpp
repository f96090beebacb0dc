// [gpu] cuDNN's fused attention (engine/cuda/cudnn_attention.h) as CudaBackend runs it: against the
// reference backend in bf16 and fp16 for gpt-like shapes, with the path forced to cuDNN and
// checked to have run; under --deterministic, or forced to dpbench's kernels, it does not run;
// summary.math_paths counts it; it replays from a captured CUDA graph; and for gpt's own shape
// (batch 16, 12 heads of 64, 1024 tokens, packed QKV) the set-up's timing of both paths is
// printed with a wall-clock measurement of each, and dpbench's kernels' forward and backward
// times in TF32 and bf16 (where cuDNN cannot or may not run).
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend/attention_geometry.h"
#include "engine/cuda/cuda_controls.h"
#include "engine/reference/reference_backend.h"
#include "tests/gpu/attention_test_support.h"
#include "tests/gpu/gpu_test_support.h"

using namespace dpbench;
using namespace dpbench::gpu_test;

namespace {

// gpt's attention (packed QKV, causal, heads of 64) at shapes that are not multiples of any tile,
// several batches and heads, and a non-causal head of 128.
const AttentionCase kCudnnCases[] = {
    {"packed causal 1030x1030 h2 d64", 1, 2, 1030, 1030, 64, true, 0.0f, {}, true},
    {"causal 128x128 h4 d64 batch 3", 3, 4, 128, 128, 64, true},
    {"self 70x70 h2 d128", 2, 2, 70, 70, 128},
    {"causal 64x64 h12 d64", 2, 12, 64, 64, 64, true},
};

constexpr DataType k16BitTypes[] = {DataType::bf16, DataType::f16};

// The choice the workspace query made for `g`; fails the test where it made none.
AttentionChoice choice_of(Device& gpu, const AttentionGeometry& g) {
  const std::optional<AttentionChoice> choice = attention_choice(gpu, g);
  REQUIRE(choice.has_value());
  return *choice;
}

std::unique_ptr<Device> gpu_with_attention_path(const std::string& path) {
  auto gpu = make_exact_gpu();
  set_attention_path(*gpu, path);
  return gpu;
}

// GPT-2 124M's attention at batch 16: 12 heads of 64, 1024 tokens, causal, Q|K|V packed in rows
// of 2304.
AttentionGeometry gpt_geometry(DataType type) {
  AttentionGeometry g;
  g.batch = 16;
  g.heads = 12;
  g.query_len = g.key_len = 1024;
  g.head_dim = 64;
  g.type = type;
  g.causal = true;
  g.scale = 0.125f;
  g.q_stride = g.k_stride = g.v_stride = 3 * 768;
  g.o_stride = 768;
  return g;
}

}  // namespace

TEST_CASE("cudnn fused attention matches the reference in bf16 and fp16 and runs where forced", "[gpu][transformer]") {
  auto gpu = gpu_with_attention_path("cudnn");
  ReferenceBackend reference;
  uint64_t stream = 3100;
  for (DataType type : k16BitTypes) {
    for (const AttentionCase& c : kCudnnCases) {
      compare_attention(*gpu, reference, c, type, stream);
      stream += 16;
      const AttentionChoice choice = choice_of(*gpu, geometry_of(c, type));
      INFO(c.name << type_suffix(type) << ": " << choice.reason);
      CHECK(choice.cudnn);
      CHECK(choice.cudnn_forward_calls == 1);
      CHECK(choice.cudnn_backward_calls == 1);
      WARN(c.name << type_suffix(type) << ": " << choice.reason);
    }
  }
  const nlohmann::json attention = math_paths(*gpu)["attention"];
  const int shapes = static_cast<int>(std::size(kCudnnCases) * std::size(k16BitTypes));
  CHECK(attention["shapes"].get<int>() == shapes);
  CHECK(attention["cudnn_fused"].get<int>() == shapes);
}

TEST_CASE("cudnn fused attention stays off under deterministic mode, when forced off and for fp32",
          "[gpu][transformer]") {
  ReferenceBackend reference;
  const AttentionCase& c = kCudnnCases[3];
  {
    auto gpu = gpu_with_attention_path("cudnn");
    set_deterministic(*gpu, true);
    compare_attention(*gpu, reference, c, DataType::bf16, 3300);
    const AttentionChoice choice = choice_of(*gpu, geometry_of(c, DataType::bf16));
    INFO(choice.reason);
    CHECK(!choice.cudnn);
    CHECK(choice.reason.find("deterministic") != std::string::npos);
    CHECK(choice.cudnn_forward_calls + choice.cudnn_backward_calls == 0);
    CHECK(math_paths(*gpu)["attention"]["cudnn_fused"].get<int>() == 0);
  }
  {
    auto gpu = gpu_with_attention_path("own");
    compare_attention(*gpu, reference, c, DataType::f16, 3320);
    const AttentionChoice choice = choice_of(*gpu, geometry_of(c, DataType::f16));
    INFO(choice.reason);
    CHECK(!choice.cudnn);
    CHECK(choice.cudnn_forward_calls + choice.cudnn_backward_calls == 0);
  }
  {
    auto gpu = gpu_with_attention_path("cudnn");
    compare_attention(*gpu, reference, c, DataType::f32, 3340);
    const AttentionChoice choice = choice_of(*gpu, geometry_of(c, DataType::f32));
    INFO(choice.reason);
    CHECK(!choice.cudnn);
    CHECK(choice.reason.find("16-bit") != std::string::npos);
  }
}

TEST_CASE("cudnn fused attention leaves misaligned calls and key lengths to dpbench's kernels", "[gpu][transformer]") {
  // The geometry qualifies (the workspace query prepares cuDNN's plans on aligned scratch), but
  // the calls' tensors sit one element off 16 bytes, or bring key lengths: dpbench's kernels run
  // them, right.
  auto gpu = gpu_with_attention_path("cudnn");
  ReferenceBackend reference;
  const AttentionCase misaligned{"misaligned causal 40x40 h2 d64", 2, 2, 40, 40, 64, true, 0.0f, {}, false, 1};
  const AttentionCase lengths{"lengths 40 17 self 40x40 h2 d64", 2, 2, 40, 40, 64, false, 0.0f, {40, 17}};
  uint64_t stream = 3400;
  for (const AttentionCase* c : {&misaligned, &lengths}) {
    compare_attention(*gpu, reference, *c, DataType::bf16, stream);
    stream += 16;
    const AttentionChoice choice = choice_of(*gpu, geometry_of(*c, DataType::bf16));
    INFO(c->name << ": " << choice.reason);
    CHECK(choice.cudnn);
    CHECK(choice.cudnn_forward_calls + choice.cudnn_backward_calls == 0);
  }
}

TEST_CASE("cudnn fused attention replays from a CUDA graph", "[gpu][transformer]") {
  // Forward and backward captured once, replayed onto cleared outputs: the same o and lse as an
  // eager run bit for bit, and gradients within a unit in the last place (cuDNN adds dQ up with
  // atomics, so its fp32 sums may round differently from run to run).
  auto gpu = gpu_with_attention_path("cudnn");
  Backend& ops = gpu->ops();
  const AttentionCase c{"graph", 2, 4, 128, 128, 64, true, 0.0f, {}, true};
  const DataType type = DataType::bf16;
  const AttentionGeometry g = geometry_of(c, type);
  const AttentionLayout layout = layout_of(c);
  const size_t rows = layout.rows[0];
  const int width = layout.widths[0], m = g.model_dim();
  const size_t o_rows = static_cast<size_t>(c.query_len) * c.batch, o_count = o_rows * g.o_stride;
  GpuTensor qkv(*gpu, type, random_of(type, rows * width, 3500, -2.0f, 2.0f)), dqkv(*gpu, type, rows * width),
      o(*gpu, type, o_count), d_o(*gpu, type, random_of(type, o_count, 3501));
  GpuArray<float> lse(*gpu, g.lse_count());
  Buffer workspace = allocate_at_least_one(*gpu, ops.attention_workspace_bytes(g));
  auto at = [&](GpuTensor& t, int column) { return static_cast<char*>(t.data()) + column * data_type_bytes(type); };
  auto run = [&] {
    ops.attention_forward(g, at(qkv, 0), at(qkv, m), at(qkv, 2 * m), nullptr, nullptr, o.data(), lse.data(),
                          workspace.data());
    ops.attention_backward(g, at(qkv, 0), at(qkv, m), at(qkv, 2 * m), o.data(), d_o.data(), lse.data(), nullptr,
                           nullptr, at(dqkv, 0), at(dqkv, m), at(dqkv, 2 * m), workspace.data());
  };
  auto o_values = [&] { return columns_of(o.values(), o_rows, g.o_stride, 0, m); };
  auto gradient_values = [&] { return columns_of(dqkv.values(), rows, width, 0, 3 * m); };
  run();
  const std::vector<float> eager_o = o_values(), eager_lse = lse.download(), eager_gradients = gradient_values();

  std::unique_ptr<CapturedWork> graph = gpu->capture(run);
  REQUIRE(graph != nullptr);
  o.upload(random_vector(o_count, 3502));
  const std::vector<float> cleared_lse = random_vector(g.lse_count(), 3503);
  gpu->copy_from_host(lse.data(), cleared_lse.data(), cleared_lse.size() * sizeof(float));
  dqkv.upload(random_vector(rows * width, 3504));
  graph->launch();
  gpu->synchronize();
  check_same_values(o_values(), eager_o, "cuDNN attention o, replayed");
  check_identical(lse.download(), eager_lse, "cuDNN attention lse, replayed");
  check_close(gradient_values(), eager_gradients, unit_in_last_place(type) * max_magnitude(eager_gradients), 0.0,
              "cuDNN attention gradients, replayed");
  const AttentionChoice choice = choice_of(*gpu, g);
  INFO(choice.reason);
  CHECK(choice.cudnn);
  CHECK(choice.cudnn_forward_calls == 2);  // the eager run and the capture; replays do not call
  CHECK(choice.cudnn_backward_calls == 2);
}

TEST_CASE("cudnn fused attention and dpbench's kernels timed at gpt's shape", "[gpu][transformer][attention_timing]") {
  // gpt's shape (gpt_geometry). The set-up's timing (3 runs of each pass after one) decides; then each path, forced,
  // runs 10 forward + backward pairs, timed by the wall clock around them.
  const AttentionGeometry g = gpt_geometry(DataType::bf16);
  {
    auto gpu = gpu_with_attention_path("fastest");
    gpu->ops().attention_workspace_bytes(g);
    const AttentionChoice choice = choice_of(*gpu, g);
    WARN("gpt shape, set-up timing: " << choice.reason);
    CHECK(choice.own_forward_ms > 0.0);
    CHECK(choice.own_backward_ms > 0.0);
    CHECK(choice.cudnn_forward_ms > 0.0);
    CHECK(choice.cudnn_backward_ms > 0.0);
  }
  const size_t rows = static_cast<size_t>(g.query_len) * g.batch, element = data_type_bytes(g.type);
  for (const std::string path : {"own", "cudnn"}) {
    auto gpu = gpu_with_attention_path(path);
    Backend& ops = gpu->ops();
    Buffer qkv = gpu->allocate(rows * g.q_stride * element, kTestBuffer),
           dqkv = gpu->allocate(rows * g.q_stride * element, kTestBuffer),
           o = gpu->allocate(rows * g.o_stride * element, kTestBuffer),
           d_o = gpu->allocate(rows * g.o_stride * element, kTestBuffer),
           lse = gpu->allocate(g.lse_count() * sizeof(float), kTestBuffer);
    gpu->ops().fill(g.type, qkv.data(), rows * g.q_stride, 0.01f);
    gpu->ops().fill(g.type, d_o.data(), rows * g.o_stride, 0.01f);
    Buffer workspace = allocate_at_least_one(*gpu, ops.attention_workspace_bytes(g));
    auto at = [&](const Buffer& b, int column) { return static_cast<char*>(b.data()) + column * element; };
    auto step = [&] {
      ops.attention_forward(g, at(qkv, 0), at(qkv, 768), at(qkv, 1536), nullptr, nullptr, o.data(),
                            static_cast<float*>(lse.data()), workspace.data());
      ops.attention_backward(g, at(qkv, 0), at(qkv, 768), at(qkv, 1536), o.data(), d_o.data(),
                             static_cast<const float*>(lse.data()), nullptr, nullptr, at(dqkv, 0), at(dqkv, 768),
                             at(dqkv, 1536), workspace.data());
    };
    step();
    gpu->synchronize();
    constexpr int kRuns = 10;
    const auto start = std::chrono::steady_clock::now();
    for (int run = 0; run < kRuns; ++run) step();
    gpu->synchronize();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / kRuns;
    const AttentionChoice choice = choice_of(*gpu, g);
    char line[160];
    std::snprintf(line, sizeof(line), "gpt shape, %s path: %.3f ms per forward + backward (x12 layers: %.2f ms)",
                  choice.cudnn ? "cuDNN" : "dpbench's", ms, 12 * ms);
    WARN(line << "; " << choice.reason);
    CHECK(choice.cudnn == (path == "cudnn"));
  }
}

TEST_CASE("dpbench's attention kernels timed at gpt's shape in TF32 and bf16", "[gpu][transformer][attention_timing]") {
  // The kernels cuDNN's fused attention cannot stand in for: fp32 data under TF32 (cuDNN has no
  // fp32 fused attention) and bf16 under --deterministic. Forward and backward each run 20 times
  // after one, timed by the wall clock around them; per layer and for gpt's 12.
  for (DataType type : {DataType::f32, DataType::bf16}) {
    const AttentionGeometry g = gpt_geometry(type);
    auto gpu = gpu_with_attention_path("own");
    set_tf32(*gpu, true);
    Backend& ops = gpu->ops();
    const size_t rows = static_cast<size_t>(g.query_len) * g.batch, element = data_type_bytes(type);
    Buffer qkv = gpu->allocate(rows * g.q_stride * element, kTestBuffer),
           dqkv = gpu->allocate(rows * g.q_stride * element, kTestBuffer),
           o = gpu->allocate(rows * g.o_stride * element, kTestBuffer),
           d_o = gpu->allocate(rows * g.o_stride * element, kTestBuffer),
           lse = gpu->allocate(g.lse_count() * sizeof(float), kTestBuffer);
    ops.fill(type, qkv.data(), rows * g.q_stride, 0.01f);
    ops.fill(type, d_o.data(), rows * g.o_stride, 0.01f);
    Buffer workspace = allocate_at_least_one(*gpu, ops.attention_workspace_bytes(g));
    auto at = [&](const Buffer& b, int column) { return static_cast<char*>(b.data()) + column * element; };
    auto forward = [&] {
      ops.attention_forward(g, at(qkv, 0), at(qkv, 768), at(qkv, 1536), nullptr, nullptr, o.data(),
                            static_cast<float*>(lse.data()), workspace.data());
    };
    auto backward = [&] {
      ops.attention_backward(g, at(qkv, 0), at(qkv, 768), at(qkv, 1536), o.data(), d_o.data(),
                             static_cast<const float*>(lse.data()), nullptr, nullptr, at(dqkv, 0), at(dqkv, 768),
                             at(dqkv, 1536), workspace.data());
    };
    auto milliseconds = [&](const auto& pass) {
      pass();
      gpu->synchronize();
      constexpr int kRuns = 20;
      const auto start = std::chrono::steady_clock::now();
      for (int run = 0; run < kRuns; ++run) pass();
      gpu->synchronize();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / kRuns;
    };
    const double forward_ms = milliseconds(forward), backward_ms = milliseconds(backward);
    char line[200];
    std::snprintf(line, sizeof(line),
                  "gpt shape, dpbench's kernels in %s: forward %.3f ms, backward %.3f ms per layer "
                  "(x12 layers: %.2f + %.2f = %.2f ms)",
                  type == DataType::f32 ? "tf32" : "bf16", forward_ms, backward_ms, 12 * forward_ms,
                  12 * backward_ms, 12 * (forward_ms + backward_ms));
    WARN(line);
    CHECK(!choice_of(*gpu, g).cudnn);
  }
}
