// `dpbench predict` for fully_sharded: its variants' rows and the runs they are matched to, and
// the use-by-use step simulation (Note [units gathered ahead] in reports/step_prediction.h) on a
// synthetic timeline whose gathers (and reductions, slowing the compute beside them) are hand-timed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/predict_inputs.h"
#include "reports/step_prediction.h"
#include "strategies/fully_sharded.h"
#include "strategies/strategy_registry.h"

namespace dpbench {
namespace {

// Every gather costs `gather_ms`, every other collective nothing: the gathers alone are priced.
class GatherOnlyCost : public CollectiveCost {
 public:
  explicit GatherOnlyCost(double gather_ms) : gather_ms_(gather_ms) {}
  double collective_ms(Collective op, double, int, LinkKind) const override {
    return op == Collective::all_gather ? gather_ms_ : 0.0;
  }
  double host_copy_ms(double) const override { return 0; }

 private:
  double gather_ms_;
};

// Three units of 1000 elements used forward 0, 1, 2 and backward 2, 1, 0 (each writing its
// gradients), produced 2, 4 and 6 ms into a 6 ms backward: 2 ms of backward each, so a 3 ms
// forward is 1 ms per unit. A 12 ms step with a 1 ms update.
ParameterUnits three_units() {
  ParameterUnits units;
  for (int u = 0; u < 3; ++u)
    units.units.push_back({"unit " + std::to_string(u), GradientRange{static_cast<size_t>(u) * 1000, 1000}});
  for (int u = 0; u < 3; ++u) units.uses.push_back({u, UnitPass::forward, false});
  for (int u = 2; u >= 0; --u) units.uses.push_back({u, UnitPass::backward, true});
  return units;
}

MeasuredStep three_unit_step() {
  MeasuredStep step;
  step.step_ms = 12;
  step.forward_ms = 3;
  step.backward_ms = 6;
  step.update_ms = 1;
  step.units = {{4000, 6}, {4000, 4}, {4000, 2}};
  step.buckets = {{12000, 6}};
  return step;
}

SystemModel two_gpu_system(bool overlaps) {
  SystemModel system;
  system.gpus_per_host = 8;
  system.intra_host = {1.0, 10.0};
  system.inter_host = {1.0, 10.0};
  system.host_copy = {1.0, 10.0};
  system.communication_overlaps_compute = overlaps;
  return system;
}

StepPrediction predict_three_units(const StrategyOptions& options, double gather_ms, bool overlaps) {
  const ParameterUnits units = three_units();
  const StepSchedule schedule =
      FullyShardedStrategy::step_schedule(options, ParameterLayout{}, {}, ScheduleShape{2, 2, 1}, units);
  return predict_step(three_unit_step(), schedule, 2, two_gpu_system(overlaps), GatherOnlyCost(gather_ms));
}

}  // namespace

TEST_CASE("fully_sharded's default kept-for-backward and prefetch-2 rows are predicted and match their runs",
          "[predict][fully_sharded]") {
  const std::vector<std::string> rows = predicted_variant_labels();
  struct Run {
    nlohmann::json options;
    std::string row;
  };
  const std::vector<Run> runs = {
      {{}, "fully_sharded"},
      {{{"reshard_after_forward", false}}, "fully_sharded (kept for backward)"},
      {{{"prefetch_units", 2}}, "fully_sharded (prefetch 2)"},
  };
  for (const Run& run : runs) {
    INFO(run.row);
    CHECK(std::count(rows.begin(), rows.end(), run.row) == 1);
    // A measured run records every option it took; its label is its row's.
    nlohmann::json config = {{"variable_update", "fully_sharded"}, {"prefetch_units", 1},
                             {"reshard_after_forward", true},      {"reduce_precision", "fp32"},
                             {"shard_group_size", 0}};
    for (const auto& [key, value] : run.options.items()) config[key] = value;
    const std::vector<std::string> labels = predicted_labels_of(config);
    REQUIRE_FALSE(labels.empty());
    CHECK(labels.front() == run.row);
  }
}

TEST_CASE("gathers that finish behind the previous unit's forward are not charged", "[predict][fully_sharded]") {
  // 0.5 ms gathers against 1 ms of forward per unit: only the first unit's gather, which nothing
  // precedes, delays the step; the backward gathers hide behind 2 ms units.
  const StepPrediction prediction = predict_three_units(StrategyOptions(), 0.5, true);
  CHECK(prediction.exposed_comm_ms == Approx(0.5));
  // The update is split over the 2 devices' shards.
  CHECK(prediction.step_ms == Approx(12 - 1 + 0.5 + 0.5));
}

TEST_CASE("a gather longer than the unit before it is charged the difference", "[predict][fully_sharded]") {
  // 1.5 ms gathers against 1 ms units: the first whole (1.5), then units 1 and 2 each wait 0.5 ms
  // for theirs (issued a use ahead, queued behind the one before); unit 0's backward gather starts
  // after unit 2's backward (its slot's holder) and ends before unit 1's backward does.
  const StepPrediction prediction = predict_three_units(StrategyOptions(), 1.5, true);
  CHECK(prediction.exposed_comm_ms == Approx(1.5 + 0.5 + 0.5));
}

TEST_CASE("kept for backward gathers each unit once where resharding gathers it again", "[predict][fully_sharded]") {
  // Without overlap every gather is charged, so the exposed time counts them.
  StrategyOptions kept;
  kept.reshard_after_forward = false;
  CHECK(predict_three_units(kept, 1.0, false).exposed_comm_ms == Approx(3.0));
  // Resharded: unit 0 is gathered again for its backward; units 2 and 1 are still in their slots
  // when backward reaches them (nothing was gathered into those slots after them).
  CHECK(predict_three_units(StrategyOptions(), 1.0, false).exposed_comm_ms == Approx(4.0));
}

}  // namespace dpbench

namespace dpbench {
namespace {

// Every reduction costs `reduce_ms` alone, slows compute beside it by `slowdown` and is slowed
// by compute beside it by `slowed_by`; gathers are free.
class SlowingReductionCost : public CollectiveCost {
 public:
  SlowingReductionCost(double reduce_ms, double slowdown, double slowed_by = 0)
      : reduce_ms_(reduce_ms), slowdown_(slowdown), slowed_by_(slowed_by) {}
  double collective_ms(Collective op, double, int, LinkKind) const override {
    return op == Collective::reduce_scatter ? reduce_ms_ : 0.0;
  }
  double host_copy_ms(double) const override { return 0; }
  double compute_slowdown(Collective op, double, int, LinkKind) const override {
    return op == Collective::reduce_scatter ? slowdown_ : 0.0;
  }
  double collective_slowdown(Collective op, double, int, LinkKind) const override {
    return op == Collective::reduce_scatter ? slowed_by_ : 0.0;
  }

 private:
  double reduce_ms_, slowdown_, slowed_by_;
};

StepPrediction predict_three_units_slowed(double reduce_ms, double slowdown, bool overlaps, double slowed_by = 0) {
  const StepSchedule schedule = FullyShardedStrategy::step_schedule(StrategyOptions(), ParameterLayout{}, {},
                                                                    ScheduleShape{2, 2, 1}, three_units());
  return predict_step(three_unit_step(), schedule, 2, two_gpu_system(overlaps),
                      SlowingReductionCost(reduce_ms, slowdown, slowed_by));
}

}  // namespace

TEST_CASE("a unit's reduction slows the backward of the units beside it", "[predict][fully_sharded]") {
  // Forward ends at 3; unit 2's backward at 5, its 1 ms reduction then runs to 6. Unit 1's
  // backward (2 ms) does 1 / 1.5 ms of its work beside it and ends at 7 + 1/3; its reduction runs
  // to 8 + 1/3, beside unit 0's backward, which ends at 9 + 2/3; the last reduction ends at
  // 10 + 2/3, 1 + 2/3 ms past the 1-GPU forward and backward (1 ms without the slowdown).
  const StepPrediction slowed = predict_three_units_slowed(1.0, 0.5, true);
  CHECK(slowed.exposed_comm_ms == Approx(1.0 + 2.0 / 3.0));
  CHECK(slowed.step_ms == Approx(12 - 1 + 0.5 + 1.0 + 2.0 / 3.0));
  CHECK(slowed.comm_ms == Approx(3.0));
  CHECK(predict_three_units_slowed(1.0, 0.0, true).exposed_comm_ms == Approx(1.0));
  // Without overlap every transfer is charged, slowed or not.
  CHECK(predict_three_units_slowed(1.0, 0.5, false).exposed_comm_ms ==
        Approx(predict_three_units_slowed(1.0, 0.0, false).exposed_comm_ms));
}

TEST_CASE("a unit's reduction beside backward runs at its pace beside compute, alone after it",
          "[predict][fully_sharded]") {
  // Each 1 ms reduction takes 3 ms beside compute (it does 1/3 ms of its work per ms), compute is
  // not slowed. Unit 2's reduction starts at 5 and has done 2/3 by 7, when unit 1's backward
  // ends; it ends at 8 beside unit 0's backward; unit 1's then does 1/3 by 9, when backward ends,
  // and its last 2/3 alone to 9 + 2/3; unit 0's runs alone to 10 + 2/3: 1 + 2/3 ms past 9.
  const StepPrediction slowed = predict_three_units_slowed(1.0, 0.0, true, 2.0);
  CHECK(slowed.exposed_comm_ms == Approx(1.0 + 2.0 / 3.0));
  CHECK(slowed.comm_ms == Approx(3.0));
  // Not slowed beside compute: each reduction ends 1 ms after its unit, the last at 10.
  CHECK(predict_three_units_slowed(1.0, 0.0, true, 0.0).exposed_comm_ms == Approx(1.0));
}

}  // namespace dpbench
