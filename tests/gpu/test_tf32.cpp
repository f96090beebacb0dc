// [gpu] --precision=tf32: GEMMs and convolutions really run on TF32 tensor cores (results move
// away from pure fp32 by TF32's rounding, and no further), and models train with it.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/cuda/cuda_controls.h"
#include "engine/reference/reference_backend.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/host/test_support.h"

using namespace dpbench;
using namespace dpbench::gpu_test;

namespace {

// ||a - b|| / ||b|| over whole tensors: TF32's error is a property of the result's scale, not of
// each element (an output near zero has a large relative error and means nothing).
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double difference = 0, reference = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    reference += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(difference / reference);
}

}  // namespace

TEST_CASE("tf32 convolutions and GEMMs: within TF32's rounding; GEMMs on tensor cores", "[gpu]") {
  // TF32 keeps 10 mantissa bits: each input is rounded by up to 2^-11 relative, so a product by
  // up to ~2^-10, and over k random-sign terms the result moves by ~2^-10 of its scale (the
  // rounding errors are as random as the terms). Upper bound for both: 4e-3 (4x the expected 1e-3).
  // cuBLAS in TF32 mode must use the tensor cores for a 256x256x1024 product, so its error must
  // also exceed 1e-5 (pure fp32 lands near 1e-7). cuDNN in its default math may, but need not,
  // pick a tensor-core algorithm (on an H200, 2026-11-21, the fastest for this NHWC 3x3 layer was
  // an FMA one: error 4.3e-7), so the convolution gets only the upper bound.
  auto gpu = make_gpu();
  set_tf32(*gpu, true);
  ReferenceBackend reference;

  const ConvGeometry g = make_conv_geometry(Tensor4{4, 64, 28, 28, DataFormat::nhwc}, 64, 3, 3, 1, 1,
                                            Padding::same);
  const std::vector<float> x = random_vector(g.input.count(), 11), w = random_vector(g.filter.count(), 12);
  GpuArray<float> x_gpu(*gpu, x), w_gpu(*gpu, w), y_gpu(*gpu, g.output.count());
  Buffer workspace = gpu->allocate(std::max<size_t>(gpu->ops().conv2d_workspace_bytes(g), 1), kTestWorkspace);
  gpu->ops().conv2d_forward(g, x_gpu.data(), w_gpu.data(), y_gpu.data(), workspace.data(), workspace.bytes());
  std::vector<float> y_ref(g.output.count());
  reference.conv2d_forward(g, x.data(), w.data(), y_ref.data(), nullptr, 0);
  const double conv_error = relative_error(y_gpu.download(), y_ref);
  INFO("conv relative error " << conv_error);
  CHECK(conv_error < 4e-3);

  const int m = 256, n = 256, k = 1024;
  const std::vector<float> a = random_vector(size_t{m} * k, 13), b = random_vector(size_t{k} * n, 14);
  GpuArray<float> a_gpu(*gpu, a), b_gpu(*gpu, b), c_gpu(*gpu, size_t{m} * n);
  gpu->ops().gemm(Transpose::no, Transpose::no, m, n, k, 1.0f, a_gpu.data(), k, b_gpu.data(), n, 0.0f,
                  c_gpu.data(), n);
  std::vector<float> c_ref(size_t{m} * n);
  reference.gemm(Transpose::no, Transpose::no, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c_ref.data(), n);
  const double gemm_error = relative_error(c_gpu.download(), c_ref);
  INFO("gemm relative error " << gemm_error);
  CHECK(gemm_error > 1e-5);
  CHECK(gemm_error < 4e-3);
}

TEST_CASE("a tf32 run reports tf32 math and its loss falls", "[gpu]") {
  dpbench::testing::TempDir dir;
  REQUIRE(dpbench::testing::run_cli({"--device=gpu", "--model=resnet50", "--precision=tf32",
                                     "--data_format=NHWC", "--batch_size=8", "--num_batches=12",
                                     "--num_warmup_batches=0", "--optimizer=momentum", "--learning_rate=0.001",
                                     "--result_file=" + dir.file("tf32.json")}) == 0);
  const nlohmann::json result = dpbench::testing::read_json(dir.file("tf32.json"));
  CHECK(result["summary"]["math"] == "tf32");
  const auto& steps = result["steps"];
  // As the fp32 model tests: lr 0.001 (0.01 diverges at batch 8), judged on the last three steps.
  const double first = steps[0]["loss"];
  const double last_three = (steps[9]["loss"].get<double>() + steps[10]["loss"].get<double>() +
                             steps[11]["loss"].get<double>()) / 3;
  INFO("first " << first << " mean of the last three " << last_three);
  CHECK(std::isfinite(last_three));
  CHECK(last_three < 0.7 * first);
}
