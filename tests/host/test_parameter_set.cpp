// ParameterLayout: tensors laid out in gradient-readiness order, ranges contiguous; ParameterSet's
// 16-bit weight copy and the optimizer's loss scale (mixed precision).
#include <catch2/catch.hpp>

#include "engine/backends.h"
#include "engine/errors.h"
#include "engine/reference/reference_device.h"
#include "engine/training/optimizer.h"
#include "engine/training/parameter_set.h"

using namespace dpbench;

TEST_CASE("layout puts the last-declared tensor first, aligned, and layers' ranges tile the buffer",
          "[parameter_set]") {
  ParameterLayout layout;
  const int w1 = layout.declare("dense1/weights", {4, 3});
  const int b1 = layout.declare("dense1/bias", {3});
  const int w2 = layout.declare("dense2/weights", {3, 2});
  const int b2 = layout.declare("dense2/bias", {2});
  layout.finalize();
  // Each tensor starts at a multiple of 64 elements; the last one ends the buffer.
  static_assert(ParameterLayout::kTensorAlignment == 64, "the offsets below assume 64");
  CHECK(layout.tensor(b2).offset == 0);
  CHECK(layout.tensor(w2).offset == 64);
  CHECK(layout.tensor(b1).offset == 128);
  CHECK(layout.tensor(w1).offset == 192);
  CHECK(layout.total_count() == 192 + 12);
  CHECK(layout.parameter_count() == 12 + 3 + 6 + 2);
  // An extent runs to the next tensor's offset (its aligning gap included).
  CHECK(layout.extent(b2).offset == 0);
  CHECK(layout.extent(b2).count == 64);
  CHECK(layout.extent(w1).count == 12);
  const GradientRange second = layout.range_of(w2, b2);
  CHECK(second.offset == 0);
  CHECK(second.count == 128);
  const GradientRange first = layout.range_of(w1, b1);
  CHECK(first.offset == 128);
  CHECK(first.count == 76);
  CHECK(first.end() == layout.total_count());
  CHECK_THROWS_AS(layout.declare("late", {1}), RuntimeError);
}

TEST_CASE("a parameter set round-trips its values on a reference device", "[parameter_set]") {
  ParameterLayout layout;
  layout.declare("a", {5});
  layout.declare("b", {2, 2});
  layout.finalize();
  auto device = create_reference_device(0);
  ParameterSet params(*device, layout);
  std::vector<float> values(layout.total_count(), 0.0f);  // b at 0, a at 64; zeros between
  for (size_t i = 0; i < 4; ++i) values[i] = static_cast<float>(i + 1);
  for (size_t i = 0; i < 5; ++i) values[64 + i] = static_cast<float>(i + 5);
  params.upload(values);
  CHECK(params.download() == values);
  CHECK(params.gradients()[0] == 0.0f);  // gradients start zeroed
  CHECK_THROWS_AS(params.upload({1, 2}), RuntimeError);
}

TEST_CASE("a 16-bit weight copy follows the fp32 master through upload and the optimizer", "[parameter_set]") {
  ParameterLayout layout;
  const int a = layout.declare("a", {3});
  const int b = layout.declare("b", {2});
  layout.finalize();
  auto device = create_reference_device(0);
  for (DataType type : {DataType::bf16, DataType::f16}) {
    INFO(data_type_name(type));
    ParameterSet params(*device, layout, type);
    REQUIRE(params.weight_copy() != nullptr);
    // 1 + 2^-12 is not representable in either 16-bit type; it must round to 1. b at 0, a at 64.
    std::vector<float> values(layout.total_count(), 0.0f);
    values[0] = 0.1f;
    values[1] = -2.5f;
    values[64] = 1.0f + 1.0f / 4096;
    values[65] = 3.0f;
    values[66] = -0.3f;
    params.upload(values);
    for (size_t i = 0; i < values.size(); ++i)
      CHECK(load_as_float(type, params.weight_copy(), i) == round_to(type, values[i]));
    CHECK(params.parameter_as(a, DataType::f32) == params.parameter(a));
    CHECK(load_as_float(type, params.parameter_as(b, type), 0) == round_to(type, values[0]));
    const DataType other = type == DataType::f16 ? DataType::bf16 : DataType::f16;
    CHECK_THROWS_AS(params.parameter_as(a, other), RuntimeError);

    OptimizerConfig config;
    config.kind = OptimizerKind::sgd;
    config.learning_rate = 0.5f;
    Optimizer optimizer(*device, config, params.count());
    for (size_t i = 0; i < values.size(); ++i) params.gradients()[i] = 1.0f;
    optimizer.begin_update(params.gradients(), params.count());
    optimizer.apply(params.parameters(), params.gradients(), GradientRange{0, params.count()}, 1,
                    StreamKind::compute, &params);
    optimizer.end_update();
    for (size_t i = 0; i < values.size(); ++i) {
      CHECK(params.parameters()[i] == values[i] - 0.5f);
      CHECK(load_as_float(type, params.weight_copy(), i) == round_to(type, values[i] - 0.5f));
    }
  }
  ParameterSet plain(*device, layout);
  CHECK(plain.weight_copy() == nullptr);
  CHECK(plain.weight_copy_type() == DataType::f32);
}

TEST_CASE("the optimizer's loss scale unscales gradients and a fixed scale never changes", "[parameter_set]") {
  ParameterLayout layout;
  layout.declare("w", {4});
  layout.finalize();
  auto device = create_reference_device(0);
  ParameterSet params(*device, layout, DataType::f16);
  params.upload({1, 2, 3, 4});
  OptimizerConfig config;
  config.kind = OptimizerKind::sgd;
  config.learning_rate = 1.0f;
  config.loss_scaling = LossScaling::fixed;
  config.loss_scale = 64;
  Optimizer optimizer(*device, config, params.count());
  REQUIRE(optimizer.loss_scale() != nullptr);
  CHECK(*optimizer.loss_scale() == 64.0f);  // reference device memory is host memory
  for (int i = 0; i < 4; ++i) params.gradients()[i] = 32.0f;  // a true gradient of 0.5, scaled
  optimizer.begin_update(params.gradients(), params.count());
  optimizer.apply(params.parameters(), params.gradients(), GradientRange{0, 4}, 1, StreamKind::compute, &params);
  optimizer.end_update();
  CHECK(params.download() == std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f});
  CHECK(optimizer.current_loss_scale() == 64.0f);

  OptimizerConfig none;
  Optimizer unscaled(*device, none, params.count());
  CHECK(unscaled.loss_scale() == nullptr);
  CHECK(unscaled.current_loss_scale() == 1.0f);
  config.loss_scale = 0.5f;
  CHECK_THROWS_AS(Optimizer(*device, config, params.count()), ConfigError);
}
