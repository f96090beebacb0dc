// summary.timeline (reports/backward_timeline.h): made from a device's traced steps, averaged over
// the measured ones, written and read back, its errors naming the field, and a bucket's ready time.
#include <catch2/catch.hpp>

#include "engine/errors.h"
#include "reports/backward_timeline.h"

namespace dpbench {
namespace {

// A measured step starting at `origin` ns: forward 2 ms, backward 3 ms with two ranges produced
// at 1 and `last_ready_ms` ms into it, 0.5 ms after backward.
TracedStep traced_step(int64_t step, bool measured, int64_t origin, double last_ready_ms) {
  TracedStep traced;
  traced.step = step;
  traced.measured = measured;
  traced.ran = true;
  auto span = [&](const char* name, const char* category, double from_ms, double to_ms) {
    TimelineSpan s;
    s.name = name;
    s.category = category;
    s.begin_ns = origin + static_cast<int64_t>(from_ms * 1e6);
    s.end_ns = origin + static_cast<int64_t>(to_ms * 1e6);
    traced.spans.push_back(s);
  };
  span("step 1", "step", 0, 5.5);
  span("forward", "forward", 0, 2);
  span("layer1", "backward", 2, 3);  // a layer group of backward, not the pass
  span("backward", "backward", 2, 5);
  auto produced = [&](int64_t offset, int64_t count, double at_ms) {
    traced.instants.push_back({kGradientsProducedInstant, 0, -1, origin + static_cast<int64_t>((2 + at_ms) * 1e6),
                               {{"offset", offset}, {"count", count}}});
  };
  produced(0, 10, 1);
  produced(10, 30, last_ready_ms);
  return traced;
}

}  // namespace

TEST_CASE("the timeline averages the measured traced steps of a device", "[predict]") {
  DeviceTimeline device;
  device.steps.push_back(traced_step(0, false, 0, 2.9));  // warm-up: left out
  device.steps.push_back(traced_step(5, true, 1000000000, 2.0));
  device.steps.push_back(traced_step(6, true, 2000000000, 3.0));
  const auto timeline = summarize_backward_timeline(device, {10, 20, 10});
  REQUIRE(timeline);
  CHECK(timeline->traced_steps == 2);
  CHECK(timeline->step_ms == Approx(5.5));
  CHECK(timeline->forward_ms == Approx(2));
  CHECK(timeline->backward_ms == Approx(3));
  CHECK(timeline->after_backward_ms == Approx(0.5));
  REQUIRE(timeline->produced.size() == 2);
  CHECK(timeline->produced[0].ready_ms == Approx(1));
  CHECK(timeline->produced[1].ready_ms == Approx(2.5));
  // A bucket of the first 20 elements waits for the second range.
  CHECK(ready_ms_of(*timeline, 0, 10) == Approx(1));
  CHECK(ready_ms_of(*timeline, 0, 20) == Approx(2.5));

  const BackwardTimeline read = backward_timeline_from_json(backward_timeline_to_json(*timeline));
  CHECK(read.tensor_elements == std::vector<int64_t>{10, 20, 10});
  CHECK(read.produced[1].count == 30);
  CHECK(read.step_ms == Approx(5.5));
}

TEST_CASE("no measured traced step makes no timeline", "[predict]") {
  DeviceTimeline device;
  device.steps.push_back(traced_step(0, false, 0, 2));
  CHECK_FALSE(summarize_backward_timeline(device, {40}));
}

TEST_CASE("a malformed timeline names its field", "[predict]") {
  DeviceTimeline device;
  device.steps.push_back(traced_step(3, true, 0, 2));
  nlohmann::json json = backward_timeline_to_json(*summarize_backward_timeline(device, {40}));
  json.erase("backward_ms");
  CHECK_THROWS_WITH(backward_timeline_from_json(json), Catch::Contains("summary.timeline.backward_ms is missing"));
  json = backward_timeline_to_json(*summarize_backward_timeline(device, {40}));
  json["produced"][0]["ready_ms"] = "soon";
  CHECK_THROWS_WITH(backward_timeline_from_json(json),
                    Catch::Contains("summary.timeline.produced[0].ready_ms is \"soon\", impossible for a run"));
}

}  // namespace dpbench
