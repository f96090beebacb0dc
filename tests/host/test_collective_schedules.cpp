// The schedules of collectives the exchange methods and the parameter server publish
// (engine/communication/collective_schedule.h) against what their runs move on the reference backend, the one
// place that turns a schedule into traffic, and `dpbench predict` reading the same schedules
// through the strategies' table instead of a model of the strategies of its own.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "engine/communication/collective_schedule.h"
#include "engine/reference/in_process_communicator.h"
#include "models/model_registry.h"
#include "reports/step_prediction.h"
#include "strategies/bucketed_exchange.h"
#include "strategies/exchange_plan.h"
#include "strategies/strategy_registry.h"
#include "tests/host/strategy_test_support.h"

namespace dpbench {
namespace {

using namespace dpbench::testing;

// Per collective: calls and bytes (nccl-tests' sizes).
struct Moved {
  std::map<Collective, int64_t> calls;
  std::map<Collective, double> bytes;
};

// later - earlier, collectives that moved nothing left out.
template <typename Counts>
Counts minus(const Counts& later, const Counts& earlier) {
  Counts delta;
  for (const auto& [collective, value] : later) {
    const auto before = earlier.find(collective);
    const auto difference = value - (before == earlier.end() ? 0 : before->second);
    if (difference != 0) delta[collective] = difference;
  }
  return delta;
}

Moved difference(const Moved& later, const Moved& earlier) {
  return Moved{minus(later.calls, earlier.calls), minus(later.bytes, earlier.bytes)};
}

Moved tallied() {
  const CollectiveTally tally = in_process_collective_tally();
  return Moved{tally.calls, tally.bytes};
}

// What the in-process communicators moved in one measured step of the run `args` + `adjust`:
// the difference between a run of two measured steps and one of one (the set-up and warm-up are
// the same in both), and the comm section of the longer one.
struct OneStep {
  Moved moved;
  nlohmann::json comm;
};

OneStep one_step(const std::vector<std::string>& args, const std::function<void(RunConfig&)>& adjust) {
  auto run = [&](int batches) {
    std::vector<std::string> with_steps = args;
    with_steps.push_back("--num_warmup_batches=1");
    with_steps.push_back("--num_batches=" + std::to_string(batches));
    return train(with_steps, adjust);
  };
  const Moved start = tallied();
  run(1);
  const Moved one = tallied();
  OneStep step;
  step.comm = run(2).comm;
  const Moved two = tallied();
  step.moved = difference(difference(two, one), difference(one, start));
  return step;
}

// The schedule the strategies' table publishes for the run `args` + `adjust`: its model's layout,
// the plan its options cut, its devices as one host.
StepSchedule published_schedule(const std::vector<std::string>& args, const std::function<void(RunConfig&)>& adjust) {
  std::vector<std::string> with_device = args;
  with_device.push_back("--device=cpu");
  RunConfig config = parse_run_flags(with_device, DeviceInventory()).config;
  if (adjust) adjust(config);
  const std::unique_ptr<Model> model = find_model(config.model)->create(config);
  const std::vector<GradientRange> plan = plan_exchanges(model->layout(), exchange_plan_options(config));
  const int n = config.num_devices();
  return find_strategy(config.variable_update)->schedule(config, model->layout(), plan, ScheduleShape{n, n, 1}, model->parameter_units());
}

Moved priced(const StepSchedule& schedule) {
  Moved moved;
  for (const RangeSchedule& range : schedule.ranges)
    for (const ScheduledCollective& step : range.steps) {
      moved.calls[step.collective] += 1;
      moved.bytes[step.collective] += step.bytes;
    }
  return moved;
}

struct Case {
  std::string name;
  std::function<void(RunConfig&)> adjust;
  // Bytes a call may move beyond its schedule's size: the padding of a half-width transfer's
  // chunks (fewer than N elements of 2 bytes per call), which the schedule leaves out.
  double padding_per_call = 0;
};

}  // namespace

TEST_CASE("every published collective schedule prices to the bytes the run moves", "[strategies][schedule]") {
  const std::vector<Case> cases = {
      {"replicated nccl", replicated("nccl")},
      {"replicated nccl#3, per tensor", replicated("nccl#3", [](RunConfig& c) { c.bucket_cap_mb = 0; })},
      {"replicated nccl, fp16 transfer",
       replicated("nccl", [](RunConfig& c) { c.compact_gradient_transfer = TransferWidth::fp16; }), 8.0},
      {"replicated nccl#2, bf16 transfer, per tensor",
       replicated("nccl#2",
                  [](RunConfig& c) {
                    c.compact_gradient_transfer = TransferWidth::bf16;
                    c.bucket_cap_mb = 0;
                  }),
       8.0},
      {"replicated nccl, sharded update", replicated("nccl", [](RunConfig& c) { c.sharded_update = true; })},
      {"replicated nccl#2, sharded update, per tensor",
       replicated("nccl#2",
                  [](RunConfig& c) {
                    c.sharded_update = true;
                    c.bucket_cap_mb = 0;
                  })},
      {"replicated nccl, no overlap", replicated("nccl", [](RunConfig& c) { c.overlap_comm = false; })},
      {"parameter_server gpu", parameter_server("gpu")},
      {"parameter_server gpu, per tensor", parameter_server("gpu", [](RunConfig& c) { c.bucket_cap_mb = 0; })},
  };
  for (int devices : {2, 3, 4}) {
    const std::vector<std::string> args = {"--model=trivial", "--num_gpus=" + std::to_string(devices),
                                           "--batch_size=2"};
    for (const Case& variant : cases) {
      INFO(variant.name << " on " << devices << " devices");
      const StepSchedule schedule = published_schedule(args, variant.adjust);
      const Moved expected = priced(schedule);
      const OneStep run = one_step(args, variant.adjust);
      CHECK(run.moved.calls == expected.calls);
      for (const auto& [collective, bytes] : expected.bytes) {
        INFO(collective_name(collective));
        const double moved = run.moved.bytes.count(collective) ? run.moved.bytes.at(collective) : 0.0;
        CHECK(moved >= bytes);
        CHECK(moved <= bytes + variant.padding_per_call * static_cast<double>(expected.calls.at(collective)));
      }
      // The run's traffic is the schedule's (engine/communication/collective_schedule.h's traffic_of).
      const ScheduleTraffic traffic = traffic_of(schedule.ranges);
      CHECK(run.comm.at("collectives_per_step").get<int64_t>() == traffic.collectives);
      CHECK(run.comm.at("bytes_per_step").get<double>() == traffic.bytes);
      CHECK(run.comm.at("bytes_sent_per_device_per_step").get<double>() == traffic.bytes_sent);
    }
  }
}

TEST_CASE("the sparse rows' schedule prices to the rows the run gathers", "[strategies][schedule][sparse]") {
  const std::vector<std::string> args = {"--model=rnnlm", "--num_gpus=2", "--batch_size=2", "--variable_update=replicated",
                                         "--sparse_embedding_grads"};
  const OneStep run = one_step(args, replicated("nccl"));
  const nlohmann::json& comm = run.comm;
  // Dense ranges all-reduced, each table's packs all-gathered: N x the pack each replica gives.
  CHECK(run.moved.calls.at(Collective::all_reduce) + run.moved.calls.at(Collective::all_gather) ==
        comm.at("collectives_per_step").get<int64_t>());
  CHECK(run.moved.bytes.at(Collective::all_reduce) == comm.at("dense_bytes_per_step").get<double>());
  CHECK(run.moved.bytes.at(Collective::all_gather) == 2 * comm.at("sparse_bytes_per_step").get<double>());
  CHECK(run.moved.calls.size() == 2);
}

TEST_CASE("copies of our own are the schedule's and travel outside the communicator", "[strategies][schedule]") {
  const std::vector<std::string> args = {"--model=trivial", "--num_gpus=4", "--batch_size=2"};
  const std::vector<Case> cases = {
      {"replicated xring#2", replicated("xring#2")},
      {"replicated psgpu, bf16 transfer",
       replicated("psgpu", [](RunConfig& c) { c.compact_gradient_transfer = TransferWidth::bf16; })},
      {"replicated pscpu", replicated("pscpu")},
      {"parameter_server cpu", parameter_server("cpu")},
  };
  for (const Case& variant : cases) {
    INFO(variant.name);
    const StepSchedule schedule = published_schedule(args, variant.adjust);
    const OneStep run = one_step(args, variant.adjust);
    CHECK(run.moved.calls.empty());  // peer and host copies: no collective of the communicator
    const ScheduleTraffic traffic = traffic_of(schedule.ranges);
    CHECK(run.comm.at("collectives_per_step").get<int64_t>() == traffic.collectives);
    CHECK(run.comm.at("bytes_sent_per_device_per_step").get<double>() == traffic.bytes_sent);
    for (const RangeSchedule& range : schedule.ranges)
      for (const ScheduledCollective& step : range.steps) {
        const bool copy = step.collective == Collective::peer_copy || step.collective == Collective::copy_to_host ||
                          step.collective == Collective::copy_from_host;
        CHECK(copy);
      }
  }
}

TEST_CASE("a schedule's traffic: sent bytes and bus bytes from the one table's factors", "[schedule]") {
  // An fp32 all-reduce of 1000 bytes and a half-width all-to-all and all-gather of 500 on 4 ranks.
  RangeSchedule dense;
  dense.message_bytes = 1000;
  ScheduledCollective all_reduce;
  all_reduce.bytes = 1000;
  all_reduce.ranks = 4;
  dense.steps = {all_reduce};
  RangeSchedule half = dense;
  ScheduledCollective chunks = all_reduce;
  chunks.collective = Collective::all_to_all;
  chunks.bytes = 500;
  chunks.width = 0.5;
  ScheduledCollective gather = chunks;
  gather.collective = Collective::all_gather;
  half.steps = {chunks, gather};
  const ScheduleTraffic a = traffic_of({dense}), b = traffic_of({half});
  CHECK(a.bytes == 1000);
  CHECK(a.bytes_sent == 1500);  // 2(n-1)/n
  CHECK(a.bus_bytes == 1500);
  CHECK(a.collectives == 1);
  CHECK(b.bytes == 1000);
  CHECK(b.bytes_sent == 750);   // half the bytes
  CHECK(b.bus_bytes == 1500);   // counted in fp32, as an all-reduce's
  CHECK(b.collectives == 2);
  // Counted as the flat all-reduce it replaces: the steps' bus bytes give way to its.
  RangeSchedule counted = half;
  counted.steps[0].collective = Collective::peer_copy;
  counted.busbw_as = Collective::all_reduce;
  counted.busbw_ranks = 4;
  CHECK(traffic_of({counted}).bus_bytes == 1500);
}

TEST_CASE("predict reads every strategy's schedule through the strategies' table", "[predict][schedule]") {
  SystemModel system;
  system.gpus_per_host = 4;
  system.intra_host = {1.0, 10.0};
  system.inter_host = {4.0, 100.0};
  system.host_copy = {0.5, 5.0};
  const AlphaBetaCost cost(system);
  ParameterLayout layout;
  for (int64_t count : {64, 4096, 128, 65536}) layout.declare("tensor", {count});
  layout.finalize();
  StrategyOptions cut;
  cut.bucket_cap_mb = 0;  // one range per tensor
  const std::vector<GradientRange> plan = plan_exchanges(layout, exchange_plan_options(cut));
  MeasuredStep measured;
  measured.step_ms = 20;
  measured.backward_ms = 10;
  measured.update_ms = 2;
  for (size_t i = 0; i < plan.size(); ++i)
    measured.buckets.push_back({static_cast<double>(plan[i].count * sizeof(float)), 2.0 * static_cast<double>(i + 1)});
  // Every exchange method the chooser takes, on every strategy that has a schedule: priced, with
  // communication, on one host and across two.
  const std::vector<std::function<void(StrategyOptions&)>> methods = {
      [](StrategyOptions&) {},
      [](StrategyOptions& o) { o.all_reduce_spec = "nccl#2"; },
      [](StrategyOptions& o) { o.all_reduce_spec = "xring"; },
      [](StrategyOptions& o) { o.all_reduce_spec = "psgpu#2"; },
      [](StrategyOptions& o) { o.all_reduce_spec = "pscpu"; },
      [](StrategyOptions& o) { o.compact_gradient_transfer = TransferWidth::bf16; },
      [](StrategyOptions& o) { o.sharded_update = true; },
      [](StrategyOptions& o) { o.hierarchical_all_reduce = true; },
      [](StrategyOptions& o) { o.local_parameter_device = "cpu"; },
  };
  int priced_schedules = 0;
  for (const StrategyEntry& entry : strategy_registry()) {
    if (!entry.schedule) continue;
    for (const auto& method : methods) {
      StrategyOptions options;
      method(options);
      for (int gpus : {2, 4, 8}) {
        INFO(entry.name << " " << strategy_label(entry.name, recorded_options(entry.name, options), true) << " on "
                        << gpus);
        const StepSchedule schedule = entry.schedule(options, layout, plan, shape_on(system, gpus), ParameterUnits{});
        REQUIRE(schedule.ranges.size() == plan.size());
        const StepPrediction prediction = predict_step(measured, schedule, gpus, system, cost);
        CHECK(prediction.comm_ms > 0);
        CHECK((prediction.modelled ? prediction.step_ms >= measured.step_ms - measured.update_ms
                                   : !prediction.why_not.empty()));
        ++priced_schedules;
      }
    }
  }
  // parameter_server, replicated, their process-per-GPU forms, and fully_sharded
  CHECK(priced_schedules == 5 * 9 * 3);
  // The rows predict shows are the table's configurations, each labelled as `dpbench report`
  // labels such a run, each of an entry with a schedule.
  std::set<std::string> labels;
  for (const PredictedVariant& variant : predicted_variants()) {
    const StrategyEntry* entry = find_strategy(variant.strategy);
    REQUIRE(entry != nullptr);
    CHECK(entry->schedule != nullptr);
    const std::string label = strategy_label(entry->name, recorded_options(entry->name, options_of(variant)), false);
    CHECK(label.rfind(entry->name, 0) == 0);
    CHECK(labels.insert(label).second);  // one row each
  }
}

TEST_CASE("predict's sources compare no strategy names", "[predict][schedule]") {
  // The behavioural check is above; this one keeps a name from creeping back in.
  std::vector<std::string> names;
  for (const StrategyEntry& entry : strategy_registry()) names.push_back("\"" + entry.name + "\"");
  for (const char* word : {"\"nccl\"", "\"xring\"", "\"psgpu\"", "\"pscpu\"", "\"cpu\"", "\"gpu\"", "\"hierarchical",
                           "\"sharded", "\"compact_gradient_transfer\"", "\"variable_update\") =="})
    names.push_back(word);
  for (const char* file : {"cli/predict_command.cpp", "cli/predict_inputs.cpp", "reports/step_prediction.cpp",
                           "reports/step_prediction.h", "reports/prediction_tables.cpp"}) {
    std::ifstream in(std::string(DPBENCH_SOURCE_DIR) + "/" + file);
    REQUIRE(in.good());
    std::stringstream text;
    text << in.rdbuf();
    for (const std::string& name : names) {
      INFO(file << " names " << name);
      CHECK(text.str().find(name) == std::string::npos);
    }
  }
}

}  // namespace dpbench
