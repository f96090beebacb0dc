// fully_sharded on the reference backend: the slot plan's rules, the same training as
// replicated (bit for bit where the sums are the same), the memory each device keeps, the
// schedule predict prices, and the flag rules.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cli/flags.h"
#include "engine/errors.h"
#include "engine/reference/in_process_communicator.h"
#include "strategies/fully_sharded.h"
#include "strategies/strategy_registry.h"
#include "strategies/unit_slots.h"
#include "tests/host/strategy_test_support.h"

namespace dpbench {
namespace {

using namespace dpbench::testing;

// SGD, as the strategies' gpt test (a zero-gradient bias is rounding noise Adam would amplify).
const std::vector<std::string> kTinyGpt = {"--optimizer=sgd", "--learning_rate=0.1", "--model=gpt",
                                           "--vocab_size=13", "--seq_len=5", "--num_layers=3",
                                           "--num_heads=2", "--hidden_size=8"};

const std::vector<std::string> kTinyTransformer = {"--optimizer=sgd", "--learning_rate=0.1", "--model=nmt",
    "--encoder_type=transformer", "--src_vocab_size=13", "--tgt_vocab_size=11", "--num_units=8", "--num_heads=2",
    "--ffn_units=12", "--num_encoder_layers=2", "--num_decoder_layers=2", "--src_max_len=5", "--tgt_max_len=4",
    "--dropout=0"};

std::vector<std::string> run_args(std::vector<std::string> args, int devices, std::vector<std::string> more = {}) {
  for (const std::string& flag : {"--num_gpus=" + std::to_string(devices), std::string("--batch_size=2"),
                                  std::string("--num_warmup_batches=1"), std::string("--num_batches=2")})
    args.push_back(flag);
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

Trained train_as(const std::vector<std::string>& model, int devices, const std::string& strategy,
                 std::vector<std::string> more = {}) {
  more.push_back("--variable_update=" + strategy);
  return train(run_args(model, devices, more));
}

// A GPT-like step: unit 2 the embeddings (used at both ends), 1 a block, 0 the final norm.
const std::vector<UnitUse> kGptUses = {
    {2, UnitPass::forward, false}, {1, UnitPass::forward, false}, {0, UnitPass::forward, false},
    {2, UnitPass::forward, true},  {0, UnitPass::backward, true}, {1, UnitPass::backward, true},
    {2, UnitPass::backward, true}};

}  // namespace

TEST_CASE("fully_sharded plans a fixed pool: gathers ahead, each unit once when kept for backward",
          "[strategies][fully_sharded]") {
  const std::vector<size_t> sizes = {16, 64, 256};
  const UnitSlotPlan resharded = plan_unit_slots(sizes, kGptUses, 1, true);
  REQUIRE(resharded.uses.size() == kGptUses.size());
  // With a prefetch of one, the first use issues its own gather and the next one's.
  CHECK(resharded.gathers_issued_at[0] == std::vector<int>{0, 1});
  // Two uses in a row never share a slot (the next one's gather runs during the first).
  for (size_t j = 1; j < resharded.uses.size(); ++j)
    if (resharded.uses[j].gathers) CHECK(resharded.uses[j].parameter_slot != resharded.uses[j - 1].parameter_slot);
  // The final norm is still held from forward when backward starts; the others are gathered again.
  CHECK_FALSE(resharded.uses[4].gathers);
  CHECK(resharded.uses[5].gathers);
  CHECK(resharded.parameter_slot_elements.size() <= 3);
  // Gradients: the embeddings' from the loss (end of forward) to the end of backward.
  CHECK(resharded.uses[3].zeroes_gradients);
  CHECK_FALSE(resharded.uses[3].reduces_gradients);
  CHECK(resharded.uses[6].reduces_gradients);
  CHECK(resharded.uses[6].gradient_slot == resharded.uses[3].gradient_slot);

  const UnitSlotPlan kept = plan_unit_slots(sizes, kGptUses, 1, false);
  int gathers = 0;
  for (const PlannedUse& use : kept.uses) gathers += use.gathers ? 1 : 0;
  CHECK(gathers == 3);  // every unit once: its forward copy stays for backward
  CHECK(kept.parameter_slot_elements.size() == 3);
}

TEST_CASE("fully_sharded trains gpt bit for bit as replicated on 1, 2 and 4 devices",
          "[strategies][fully_sharded][equivalence]") {
  for (int n : {1, 2, 4}) {
    const Trained want = train_as(kTinyGpt, n, "replicated");
    for (const std::vector<std::string>& options :
         {std::vector<std::string>{}, {"--reshard_after_forward=false"}, {"--prefetch_units=0"},
          {"--prefetch_units=3"}}) {
      INFO(n << " devices, options " << (options.empty() ? "" : options.front()));
      const Trained got = train_as(kTinyGpt, n, "fully_sharded", options);
      REQUIRE(got.parameters.size() == static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) CHECK(got.parameters[r] == want.parameters.front());
    }
  }
}

TEST_CASE("fully_sharded trains gpt in bf16 bit for bit as replicated", "[strategies][fully_sharded][equivalence]") {
  for (int n : {2, 4}) {
    INFO(n << " devices");
    const Trained want = train_as(kTinyGpt, n, "replicated", {"--precision=bf16"});
    const Trained got = train_as(kTinyGpt, n, "fully_sharded", {"--precision=bf16"});
    CHECK(got.parameters.front() == want.parameters.front());
    const Trained kept = train_as(kTinyGpt, n, "fully_sharded", {"--precision=bf16", "--reshard_after_forward=false"});
    CHECK(kept.parameters.front() == want.parameters.front());
  }
}

TEST_CASE("fully_sharded skips and applies the steps replicated does under automatic fp16 loss scaling",
          "[strategies][fully_sharded][equivalence][loss_scaling]") {
  // Six steps from `scale`, halved after each step that overflowed (and skipped).
  auto train_fp16 = [](int devices, const std::string& strategy, float scale) {
    std::vector<std::string> args = kTinyGpt;
    for (const std::string& flag : {"--batch_size=2", "--num_warmup_batches=1", "--num_batches=5", "--precision=fp16",
                                    "--fp16_enable_auto_loss_scale=true"})
      args.push_back(flag);
    args.push_back("--num_gpus=" + std::to_string(devices));
    args.push_back("--fp16_loss_scale=" + std::to_string(static_cast<int64_t>(scale)));
    args.push_back("--variable_update=" + strategy);
    return train(args);
  };
  // From 2^20 the first three steps overflow (2^17 fits), from 2^18 the first: near the edge only
  // some gradients overflow, in some devices' shards and not in others', and every device must
  // still skip the step. From 2^17 and below none does.
  for (int n : {1, 2, 4}) {
    for (const float scale : {1048576.0f, 262144.0f, 131072.0f, 1024.0f}) {
      INFO(n << " devices, loss scale " << scale);
      const Trained want = train_fp16(n, "replicated", scale);
      const Trained got = train_fp16(n, "fully_sharded", scale);
      CHECK(got.final_loss_scale == want.final_loss_scale);
      for (const std::vector<float>& replica : got.parameters) CHECK(replica == want.parameters.front());
    }
  }
  // From 2^20 some steps were skipped (the scale halved) and some applied (not halved six times).
  const Trained overflowed = train_fp16(4, "fully_sharded", 1048576.0f);
  CHECK(overflowed.final_loss_scale < 1048576.0f);
  CHECK(overflowed.final_loss_scale > 1048576.0f / 64);
}

TEST_CASE("fully_sharded with hybrid groups and a bf16 reduction trains gpt as replicated",
          "[strategies][fully_sharded][equivalence]") {
  const Trained want = train_as(kTinyGpt, 4, "replicated");
  // Groups: a mean over 2, then over the 2 groups, is the mean over 4 but for fp32's last bits.
  for (const std::string& groups : {"--shard_group_size=2", "--shard_group_size=1", "--shard_group_size=4"}) {
    INFO(groups);
    const Trained got = train_as(kTinyGpt, 4, "fully_sharded", {groups});
    for (const std::vector<float>& replica : got.parameters) check_close(replica, want.parameters.front(), 1e-5, 2e-6);
  }
  // bf16 reduction: each replica's gradient and the mean rounded to 8 significant bits, as the
  // compact transfers' tolerance (test_strategies.cpp) allows.
  const Trained half = train_as(kTinyGpt, 4, "fully_sharded", {"--reduce_precision=bf16"});
  check_close(half.parameters.front(), want.parameters.front(), 1.6e-2, 4e-4);
  CHECK(half.comm.at("reduce_precision") == "bf16");
}

TEST_CASE("fully_sharded trains the transformer bit for bit as replicated", "[strategies][fully_sharded][equivalence]") {
  for (int n : {1, 2, 4}) {
    for (const std::string& precision : {"--precision=fp32", "--precision=bf16"}) {
      INFO(n << " devices, " << precision);
      const Trained want = train_as(kTinyTransformer, n, "replicated", {precision});
      for (const std::string& reshard : {"--reshard_after_forward=true", "--reshard_after_forward=false"}) {
        const Trained got = train_as(kTinyTransformer, n, "fully_sharded", {reshard, precision});
        CHECK(got.parameters.front() == want.parameters.front());
      }
    }
  }
}

TEST_CASE("fully_sharded keeps 1/N of parameters, gradients and optimizer state, and the units in flight",
          "[strategies][fully_sharded][memory]") {
  const std::vector<std::string> model = {"--optimizer=adam", "--model=gpt", "--vocab_size=64", "--seq_len=8",
                                          "--num_layers=4", "--num_heads=2", "--hidden_size=32"};
  auto kept = [](const Trained& trained) {
    const CategoryBytes& held = trained.memory.front().figures.held;
    return held[static_cast<size_t>(MemoryCategory::parameters)] + held[static_cast<size_t>(MemoryCategory::gradients)] +
           held[static_cast<size_t>(MemoryCategory::optimizer_state)];
  };
  const double replica = static_cast<double>(kept(train_as(model, 4, "replicated")));
  const Trained sharded = train_as(model, 4, "fully_sharded");
  const double in_flight = sharded.comm.at("gathered_bytes").get<double>();
  const double shard = static_cast<double>(kept(sharded)) - in_flight;
  CHECK(shard <= 1.05 * replica / 4);
  CHECK(shard >= 0.95 * replica / 4);
  // The slots: at most prefetch + 2 units' parameters (the embeddings' gathered copy, the unit
  // running, the one prefetched), each at most the largest unit, beside their gradients.
  CHECK(sharded.comm.at("parameter_slots").get<int>() <= 3);
  CHECK(in_flight < replica / 2);

  SECTION("under bf16 a shard keeps its 16-bit copy, or none with --shard_weight_copy=false, training the same") {
    std::vector<std::string> bf16 = model;
    bf16.push_back("--precision=bf16");
    const Trained whole = train_as(bf16, 4, "replicated");
    const CategoryBytes& replica_held = whole.memory.front().figures.held;
    const double values_and_copy = static_cast<double>(replica_held[static_cast<size_t>(MemoryCategory::parameters)]);
    const double rest = static_cast<double>(replica_held[static_cast<size_t>(MemoryCategory::gradients)] +
                                            replica_held[static_cast<size_t>(MemoryCategory::optimizer_state)]);
    for (const bool copy : {true, false}) {
      INFO("--shard_weight_copy=" << copy);
      const Trained half = train_as(bf16, 4, "fully_sharded", {std::string("--shard_weight_copy=") + (copy ? "true" : "false")});
      const double half_shard = static_cast<double>(kept(half)) - half.comm.at("gathered_bytes").get<double>();
      // fp32 values and their bf16 copy are 4 + 2 bytes an element.
      const double want = ((copy ? values_and_copy : values_and_copy * 4 / 6) + rest) / 4;
      CHECK(half_shard <= 1.05 * want);
      CHECK(half_shard >= 0.95 * want);
      CHECK(half.parameters.front() == whole.parameters.front());
    }
  }
}

TEST_CASE("fully_sharded's planned gathers carry a unit's fp32 vectors beside its 16 bits",
          "[strategies][fully_sharded][schedule]") {
  ParameterLayout layout;
  layout.declare("weight", {8, 10});
  layout.declare("bias", {10});
  layout.declare("scale", {7});
  layout.finalize();
  ParameterUnits units;
  units.units = {{"layer", GradientRange{0, layout.total_count()}}};
  units.uses = {{0, UnitPass::forward, false}, {0, UnitPass::backward, true}};
  units = with_vector_elements(units, layout);
  CHECK(units.units[0].vector_elements == 17);
  ScheduleShape shape;
  shape.world = 2;
  shape.ranks_per_host = 2;
  StrategyOptions options;
  options.gathered_element_bytes = 2;
  const StepSchedule half = FullyShardedStrategy::step_schedule(options, layout, {}, shape, units);
  REQUIRE(half.ranges.size() == 1);
  const std::vector<ScheduledCollective>& steps = half.ranges[0].steps;
  // Gathered once (its backward follows its forward in the slot still holding it) in 16 bits with
  // its vectors' pack after it (17 vector elements: 9 per owner, 2 owners, fp32), then reduce-scattered.
  REQUIRE(steps.size() == 3);
  CHECK(steps[0].after == StepAfter::unit_use);
  CHECK(steps[0].width == 0.5);
  CHECK(steps[1].after == StepAfter::with_gather);
  CHECK(steps[1].collective == Collective::all_gather);
  CHECK(steps[1].bytes == 9 * 2 * 4);
  CHECK(steps[2].collective == Collective::reduce_scatter);
  // In fp32 the vectors travel inside the unit.
  options.gathered_element_bytes = 4;
  const StepSchedule whole = FullyShardedStrategy::step_schedule(options, layout, {}, shape, units);
  CHECK(whole.ranges[0].steps.size() == 2);
  for (const ScheduledCollective& step : whole.ranges[0].steps) CHECK(step.after != StepAfter::with_gather);
}

TEST_CASE("fully_sharded publishes its collectives as a schedule", "[strategies][fully_sharded][schedule]") {
  StrategyOptions options;
  ScheduleShape shape;
  shape.world = 4;
  shape.ranks_per_host = 4;
  const std::vector<GradientRange> units = {{0, 1000}, {1000, 401}};
  StepSchedule schedule = FullyShardedStrategy::schedule_for(options, ParameterLayout{}, units, shape);
  REQUIRE(schedule.ranges.size() == 2);
  const RangeSchedule& second = schedule.ranges[1];
  REQUIRE(second.steps.size() == 3);  // gathered for forward and again for backward, reduce-scattered
  CHECK(second.steps[0].collective == Collective::all_gather);
  CHECK(second.steps[1].collective == Collective::all_gather);
  CHECK(second.steps[2].collective == Collective::reduce_scatter);
  CHECK(second.steps[2].bytes == 404 * sizeof(float));  // padded to 4 chunks of 101
  CHECK(traffic_of(schedule.ranges).collectives == 6);
  options.shard_group_size = 2;
  options.reshard_after_forward = false;
  options.reduce_precision = ReducePrecision::bf16;
  schedule = FullyShardedStrategy::schedule_for(options, ParameterLayout{}, units, shape);
  const RangeSchedule& hybrid = schedule.ranges[0];
  REQUIRE(hybrid.steps.size() == 3);
  CHECK(hybrid.steps[0].ranks == 2);
  CHECK(hybrid.steps[1].collective == Collective::reduce_scatter);
  CHECK(hybrid.steps[1].width == 0.5);
  CHECK(hybrid.steps[2].collective == Collective::all_reduce);
  CHECK(hybrid.steps[2].ranks == 2);
  CHECK(find_strategy("fully_sharded")->schedule != nullptr);
}

TEST_CASE("fully_sharded's flag rules", "[strategies][fully_sharded][flags]") {
  auto parse = [](std::vector<std::string> args) {
    args.push_back("--device=cpu");
    return parse_run_flags(args, DeviceInventory{}).config;
  };
  const RunConfig config = parse({"--model=gpt", "--num_gpus=4", "--variable_update=fully_sharded",
                                  "--prefetch_units=2", "--reshard_after_forward=false", "--reduce_precision=bf16",
                                  "--shard_group_size=2"});
  CHECK(config.prefetch_units == 2);
  CHECK_FALSE(config.reshard_after_forward);
  CHECK(config.reduce_precision == ReducePrecision::bf16);
  CHECK(config.shard_group_size == 2);
  CHECK_THROWS_WITH(parse({"--model=gpt", "--num_gpus=4", "--variable_update=fully_sharded", "--shard_group_size=3"}),
                    Catch::Contains("--shard_group_size=3") && Catch::Contains("divisor of 4"));
  CHECK_THROWS_WITH(parse({"--model=gpt", "--variable_update=fully_sharded", "--forward_only=true"}),
                    Catch::Contains("--forward_only"));
  // Its owners agree on skipping a step, so automatic loss scaling is taken.
  CHECK(parse({"--model=gpt", "--num_gpus=2", "--variable_update=fully_sharded", "--precision=fp16",
               "--fp16_enable_auto_loss_scale=true"})
            .fp16_enable_auto_loss_scale);
  // The whole-replica ways of exchanging gradients: refused in one line naming its own way out.
  CHECK_THROWS_WITH(parse({"--model=rnnlm", "--num_gpus=2", "--variable_update=fully_sharded",
                           "--sparse_embedding_grads=true"}),
                    Catch::Matches("--sparse_embedding_grads=true: --variable_update=fully_sharded reduce-scatters "
                                   "[^\n]*drop --sparse_embedding_grads, or use --variable_update=replicated"));
  CHECK_THROWS_WITH(parse({"--model=gpt", "--variable_update=fully_sharded", "--compact_gradient_transfer=bf16"}),
                    Catch::Matches("--compact_gradient_transfer=bf16: --variable_update=fully_sharded [^\n]*"
                                   "--reduce_precision=bf16 is its half-width reduction[^\n]*"));
  CHECK_THROWS_WITH(parse({"--model=gpt", "--variable_update=replicated", "--prefetch_units=2"}),
                    Catch::Contains("--prefetch_units"));
  CHECK_THROWS_WITH(parse({"--model=gpt", "--variable_update=fully_sharded", "--reduce_precision=fp16"}),
                    Catch::Contains("fp16"));
  // A model that publishes no units runs on one device only; on more it is refused when its run
  // is built, with the way out.
  DevicePlacement two;
  two.gpu_indices = {0, 1};
  ParameterLayout layout;
  layout.declare("weights", {3, 5});
  layout.finalize();
  FullyShardedStrategy alone(StrategyOptions{}, two);
  CHECK(alone.plan_shards(layout, ParameterUnits{}, 1).empty());
  FullyShardedStrategy shared(StrategyOptions{}, two);
  CHECK_THROWS_WITH(shared.plan_shards(layout, ParameterUnits{}, 2),
                    Catch::Contains("publishes no parameter units") && Catch::Contains("--sharded_update=true"));
}

}  // namespace dpbench

namespace dpbench {

TEST_CASE("fully_sharded's published schedule is what its run moves", "[strategies][fully_sharded][schedule]") {
  // The collectives of one step: a run of three steps less a run of two (the tally counts every run).
  auto moved_in = [](const std::vector<std::string>& args, int steps) {
    const CollectiveTally before = in_process_collective_tally();
    std::vector<std::string> with_steps = args;
    with_steps.push_back("--num_warmup_batches=1");
    with_steps.push_back("--num_batches=" + std::to_string(steps - 1));
    const testing::Trained trained = testing::train(with_steps);
    const CollectiveTally after = in_process_collective_tally();
    std::map<Collective, std::pair<double, double>> moved;  // calls, bytes
    for (const auto& [collective, calls] : after.calls)
      moved[collective] = {calls - (before.calls.count(collective) ? before.calls.at(collective) : 0),
                           after.bytes.at(collective) - (before.bytes.count(collective) ? before.bytes.at(collective) : 0)};
    return std::make_pair(moved, trained.comm);
  };
  for (const std::vector<std::string>& options :
       {std::vector<std::string>{"--reduce_precision=fp32"}, {"--reduce_precision=bf16"},
        {"--precision=bf16"}, {"--precision=bf16", "--reshard_after_forward=false"}}) {
    INFO(options.front() << (options.size() > 1 ? " " + options.back() : ""));
    std::vector<std::string> args = {"--model=gpt", "--vocab_size=13", "--seq_len=5", "--num_layers=2",
                                     "--num_heads=2", "--hidden_size=8", "--num_gpus=4", "--batch_size=1",
                                     "--variable_update=fully_sharded"};
    args.insert(args.end(), options.begin(), options.end());
    const auto [two, comm] = moved_in(args, 2);
    const auto [three, unused] = moved_in(args, 3);
    double calls = 0, bytes = 0;
    for (const auto& [collective, figures] : three) {
      const auto earlier = two.count(collective) ? two.at(collective) : std::make_pair(0.0, 0.0);
      calls += figures.first - earlier.first;
      bytes += figures.second - earlier.second;
    }
    CHECK(calls == comm.at("collectives_per_step").get<double>());
    // The schedule's sizes (engine/communication/collective_schedule.h): each gather's padded unit
    // in fp32, each reduce-scatter's in its type; the message is the fp32 bytes of the units.
    CHECK(bytes == comm.at("collective_bytes_per_step").get<double>());
    CHECK(comm.at("bytes_per_step").get<double>() >= 4.0 * 13 * 8);
  }
}

}  // namespace dpbench
