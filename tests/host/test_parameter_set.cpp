// ParameterLayout: tensors laid out in gradient-readiness order, ranges contiguous.
#include <catch2/catch.hpp>

#include "engine/device_factory.h"
#include "engine/errors.h"
#include "engine/parameter_set.h"

using namespace dpbench;

TEST_CASE("layout puts the last-declared tensor first and layers stay contiguous", "[parameter_set]") {
  ParameterLayout layout;
  const int w1 = layout.declare("dense1/weights", {4, 3});
  const int b1 = layout.declare("dense1/bias", {3});
  const int w2 = layout.declare("dense2/weights", {3, 2});
  const int b2 = layout.declare("dense2/bias", {2});
  layout.finalize();
  CHECK(layout.total_count() == 12 + 3 + 6 + 2);
  CHECK(layout.tensor(b2).offset == 0);
  CHECK(layout.tensor(w2).offset == 2);
  CHECK(layout.tensor(b1).offset == 8);
  CHECK(layout.tensor(w1).offset == 11);
  const GradientRange second = layout.range_of(w2, b2);
  CHECK(second.offset == 0);
  CHECK(second.count == 8);
  const GradientRange first = layout.range_of(w1, b1);
  CHECK(first.offset == 8);
  CHECK(first.count == 15);
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
  std::vector<float> values{1, 2, 3, 4, 5, 6, 7, 8, 9};
  params.upload(values);
  CHECK(params.download() == values);
  CHECK(params.gradients()[0] == 0.0f);  // gradients start zeroed
  CHECK_THROWS_AS(params.upload({1, 2}), RuntimeError);
}
