// The [gpu] model tests' comparison with the reference backend: a model's loss and every gradient
// on the GPU against the reference backend's, from the same parameters and data.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/backends.h"
#include "engine/cuda/cuda_controls.h"
#include "engine/reference/reference_device.h"
#include "tests/host/model_probe.h"

namespace dpbench::testing {

// `model` at its initial parameters of seed 9 on data seed 42, with `batch` samples and weights
// stored as `type`: the losses within loss_epsilon (relative), every gradient within `tolerance`
// of the reference's largest. The GPU's linear layers take `linear_path` (set_linear_path):
// "plain" by default, whose rounding points are the reference's op by op; "cublaslt" has the
// reference round as the fused epilogues do (ReferenceBackend::set_fuse_linear_epilogues): a
// post-LayerNorm residual can turn the plain path's two extra roundings into 3% of the largest
// gradient in fp16. `configure` sets the GPU up further (a test's switches).
inline void check_gpu_matches_reference(const Model& model, int batch, DataType type, double loss_epsilon,
                                        double tolerance, const std::function<void(Device&)>& configure = {},
                                        const std::string& linear_path = "plain") {
  const std::vector<float> values = model.initial_parameters(9);
  std::unique_ptr<Device> device = create_cuda_device(0);
  set_linear_path(*device, linear_path);
  if (configure) configure(*device);
  std::unique_ptr<Device> oracle = create_reference_device(0);
  dynamic_cast<ReferenceDevice&>(*oracle).reference_backend().set_fuse_linear_epilogues(linear_path == "cublaslt");
  ModelProbe gpu(model, std::move(device), batch, 42, type);
  ModelProbe reference(model, std::move(oracle), batch, 42, type);
  const double gpu_loss = gpu.loss_at(values), reference_loss = reference.loss_at(values);
  CHECK(gpu_loss == Approx(reference_loss).epsilon(loss_epsilon));
  const std::vector<float> a = gpu.gradients(), b = reference.gradients();
  const double largest = largest_magnitude(b);
  REQUIRE(largest > 0);
  const double worst = gradient_difference(a, b).largest;
  INFO("largest gradient " << largest << ", largest difference " << worst);
  INFO("paths: " << math_paths(gpu.device()).dump());
  CHECK(worst <= tolerance * largest);
}

}  // namespace dpbench::testing
