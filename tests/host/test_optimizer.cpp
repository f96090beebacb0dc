// The Optimizer's choice of rule: adamw is Adam's update with the configured decoupled weight
// decay and Adam's two moments of state, adam never decays, and a decay of 0 is Adam bit for bit;
// and automatic loss scaling over gradients split among devices.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "engine/errors.h"
#include "engine/reference/in_process_communicator.h"
#include "engine/reference/reference_device.h"
#include "engine/training/optimizer.h"
#include "tests/host/reference_cnn_test_support.h"
#include "tests/rank_threads.h"

using namespace dpbench;
using dpbench::testing::random_values;

namespace {

// The parameters after three steps of `config` from fixed parameters and gradients (reference
// device memory is host memory, so plain vectors serve as its buffers).
std::vector<float> trained(const OptimizerConfig& config) {
  auto device = create_reference_device(0);
  const size_t n = 301;
  std::vector<float> params = random_values(n, 160);
  Optimizer optimizer(*device, config, n);
  for (int64_t step = 1; step <= 3; ++step) {
    const std::vector<float> grads = random_values(n, 160 + static_cast<uint64_t>(step));
    optimizer.begin_update(grads.data(), n);
    optimizer.apply(params.data(), grads.data(), GradientRange{0, n}, step);
    optimizer.end_update();
  }
  return params;
}

OptimizerConfig config_of(OptimizerKind kind, float weight_decay) {
  OptimizerConfig config;
  config.kind = kind;
  config.learning_rate = 0.01f;
  config.weight_decay = weight_decay;
  return config;
}

}  // namespace

TEST_CASE("parse_optimizer_kind knows adamw and lists it among the accepted names", "[optimizer]") {
  CHECK(parse_optimizer_kind("adamw") == OptimizerKind::adamw);
  CHECK(parse_optimizer_kind("adam") == OptimizerKind::adam);
  CHECK_THROWS_WITH(parse_optimizer_kind("lamb"),
                    "--optimizer=lamb: unknown optimizer; accepted: sgd, momentum, adam, adamw");
}

TEST_CASE("adamw decays by its weight_decay, adam ignores it, and a decay of 0 is adam bit for bit",
          "[optimizer]") {
  const std::vector<float> adam = trained(config_of(OptimizerKind::adam, 0.0f));
  CHECK(trained(config_of(OptimizerKind::adamw, 0.0f)) == adam);
  CHECK(trained(config_of(OptimizerKind::adam, 0.5f)) == adam);

  // Both take the same Adam steps s1, s2, s3 (the moments do not depend on the parameters), and
  // adamw's are decayed by the later steps: adam - adamw = p0 (1 - d^3) - s1 (1 - d^2) - s2 (1 - d),
  // d = 1 - 0.01 * 0.5 = 0.995. These early Adam steps stay within 2 learning rates, so the s terms
  // are at most 0.02 * (0.01 + 0.005) = 3e-4.
  const std::vector<float> adamw = trained(config_of(OptimizerKind::adamw, 0.5f));
  const std::vector<float> start = random_values(adamw.size(), 160);
  size_t decayed = 0;
  for (size_t i = 0; i < adamw.size(); ++i) {
    const double expected_shift = start[i] * (1.0 - std::pow(0.995, 3));
    CHECK(adam[i] - adamw[i] == Approx(expected_shift).margin(4e-4));
    if (std::fabs(adam[i] - adamw[i]) > 1e-3) ++decayed;
  }
  CHECK(decayed > adamw.size() / 2);
}

TEST_CASE("devices holding parts of one step's gradients skip the step together when one part overflowed",
          "[optimizer][loss_scaling]") {
  // Two devices, each its part of 8 gradients; only device 1's part holds an infinity.
  OptimizerConfig config;
  config.learning_rate = 0.5f;
  config.loss_scaling = LossScaling::automatic;
  config.loss_scale = 1024.0f;
  const size_t n = 8;
  std::vector<std::vector<float>> params(2, std::vector<float>(n, 1.0f));
  std::vector<std::vector<float>> grads(2, std::vector<float>(n, 256.0f));
  grads[1][5] = INFINITY;
  // shared: the parts agree through a communicator; otherwise each device decides alone.
  auto step = [&](bool shared) {
    std::vector<std::vector<float>> after = params;
    std::vector<float> scales(2);
    const std::unique_ptr<Communicator> group = create_in_process_communicator(2);
    dpbench::testing::on_rank_threads(2, [&](int rank) {
      auto device = create_reference_device(rank);
      Optimizer optimizer(*device, config, n);
      const float* part = grads[static_cast<size_t>(rank)].data();
      if (shared)
        optimizer.begin_shared_update(part, n, [&](float* flag) {
          group->all_reduce(rank, flag, flag, 1, DataType::f32, ReduceOp::sum, StreamKind::compute);
        });
      else
        optimizer.begin_update(part, n);
      optimizer.apply(after[static_cast<size_t>(rank)].data(), part, GradientRange{0, n}, 1);
      optimizer.end_update();
      scales[static_cast<size_t>(rank)] = optimizer.current_loss_scale();
    });
    return std::make_pair(after, scales);
  };
  const auto [agreed, agreed_scales] = step(true);
  CHECK(agreed == params);  // both skipped
  CHECK(agreed_scales == std::vector<float>{512.0f, 512.0f});
  // Alone, device 0 would have applied its step (and kept its scale): the replicas would diverge.
  const auto [alone, alone_scales] = step(false);
  CHECK(alone[0] != params[0]);
  CHECK(alone[1] == params[1]);
  CHECK(alone_scales == std::vector<float>{1024.0f, 512.0f});
  // With every part finite, both apply it.
  grads[1][5] = 256.0f;
  const auto [applied, applied_scales] = step(true);
  CHECK(applied[0] != params[0]);
  CHECK(applied[0] == applied[1]);
  CHECK(applied_scales == std::vector<float>{1024.0f, 1024.0f});
}
