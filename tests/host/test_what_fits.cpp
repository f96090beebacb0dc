// What fits (README "Memory", "What fits"): memory sizes on the command line, the largest batch
// under a need, each strategy's memory rule against what its run holds on the reference backend,
// the memory predicted from one run (Note [memory from one run]) against runs at other batches
// and device counts, and the too-little-memory refusal at set-up (Note [too little memory]): its
// one line, its suggested batch that then runs, and the next larger that is refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/flag_parsing.h"
#include "cli/flags.h"
#include "cli/memory_refusal.h"
#include "cli/run_command.h"
#include "engine/backends.h"
#include "engine/errors.h"
#include "engine/reference/reference_device.h"
#include "models/model_registry.h"
#include "reports/memory_summary.h"
#include "reports/prediction_tables.h"
#include "reports/step_prediction.h"
#include "strategies/bucketed_exchange.h"
#include "strategies/exchange_plan.h"
#include "strategies/strategy_registry.h"
#include "tests/host/strategy_test_support.h"
#include "tests/host/what_fits_test_support.h"
#include "tests/host/test_support.h"

using namespace dpbench;
using dpbench::testing::error_message_of;
using dpbench::testing::train;
using dpbench::testing::Trained;
using dpbench::testing::rule_of;
using dpbench::testing::run_within;

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

uint64_t of(const CategoryBytes& bytes, MemoryCategory category) { return bytes[static_cast<size_t>(category)]; }

CategoryBytes without_trace(CategoryBytes bytes) {
  bytes[static_cast<size_t>(MemoryCategory::trace)] = 0;
  return bytes;
}

std::vector<std::string> trivial_flags(int devices, int batch) {
  return {"--model=trivial", "--optimizer=momentum", "--num_gpus=" + std::to_string(devices),
          "--batch_size=" + std::to_string(batch), "--num_warmup_batches=1", "--num_batches=2", "--device=cpu"};
}

RunConfig config_of(const std::vector<std::string>& args) { return parse_run_flags(args, DeviceInventory{}).config; }

}  // namespace

TEST_CASE("memory sizes are read with their units, powers of 2", "[what_fits][flags]") {
  CHECK(parse_memory_size("device_memory", "141GiB") == 141ull << 30);
  CHECK(parse_memory_size("device_memory", "1.5GiB") == 3ull << 29);
  CHECK(parse_memory_size("device_memory", "512MiB") == 512ull << 20);
  CHECK(parse_memory_size("device_memory", "80G") == 80ull << 30);
  CHECK(parse_memory_size("device_memory", "64kb") == 64ull << 10);
  CHECK(parse_memory_size("device_memory", "1000000") == 1000000);
  for (const char* bad : {"", "GiB", "12XB", "0", "100", "-1GiB", "1.2.3MiB", "2PiB", "1e3MiB"}) {
    INFO(bad);
    CHECK(error_message_of<ConfigError>([&] { parse_memory_size("device_memory", bad); }, "error")
              .rfind("--device_memory=", 0) == 0);
  }
}

TEST_CASE("the largest batch that fits is the last whose need is within the memory", "[what_fits]") {
  const auto need = [](int64_t batch) { return static_cast<uint64_t>(1000 + 10 * batch); };
  CHECK(largest_batch_that_fits(1010, need, 1 << 20) == 1);
  CHECK(largest_batch_that_fits(1009, need, 1 << 20) == 0);
  CHECK(largest_batch_that_fits(2000, need, 1 << 20) == 100);
  CHECK(largest_batch_that_fits(2009, need, 1 << 20) == 100);
  CHECK(largest_batch_that_fits(uint64_t{1} << 40, need, 1000) == 1000);
}

TEST_CASE("memory from one run scales the batch's categories and applies the strategy's rule", "[what_fits]") {
  MeasuredMemory measured;
  measured.batch_size = 10;
  measured.replica[static_cast<size_t>(MemoryCategory::parameters)] = 4000;
  measured.replica[static_cast<size_t>(MemoryCategory::optimizer_state)] = 8000;
  measured.replica[static_cast<size_t>(MemoryCategory::activations)] = 1000;  // 100 per sample
  measured.replica[static_cast<size_t>(MemoryCategory::data)] = 500;          // 50 per sample
  const CategoryBytes at_20 = replica_bytes_at(measured, 20);
  CHECK(of(at_20, MemoryCategory::parameters) == 4000);
  CHECK(of(at_20, MemoryCategory::activations) == 2000);
  CHECK(of(at_20, MemoryCategory::data) == 1000);

  StrategyMemory whole;
  whole.added[static_cast<size_t>(MemoryCategory::communication)] = 300;
  const MemoryPrediction replicated = predict_memory(measured, whole, 20, 20000);
  CHECK(replicated.peak_bytes() == 4000 + 8000 + 2000 + 1000 + 300);
  // 12300 + 150 b <= 20000: b = 51.
  CHECK(replicated.largest_batch == 51);

  StrategyMemory sharded_state;  // as a strategy that keeps 1/4 of the optimizer state would say
  sharded_state.kept[static_cast<size_t>(MemoryCategory::optimizer_state)] = 0.25;
  const MemoryPrediction sharded = predict_memory(measured, sharded_state, 20, 20000);
  CHECK(of(sharded.bytes, MemoryCategory::optimizer_state) == 2000);
  CHECK(sharded.largest_batch == (20000 - 6000) / 150);
  CHECK(predict_memory(measured, whole, 1, 12000).largest_batch == 0);

  // The whole run's peak (a set-up search) scales as the steps' do, but for the workspace it held
  // past the steps', which stays; it is no need.
  measured.whole_run = measured.replica;
  measured.whole_run[static_cast<size_t>(MemoryCategory::scratch)] = 200;     // 20 per sample
  measured.whole_run[static_cast<size_t>(MemoryCategory::workspaces)] = 700;  // the search's, fixed
  const MemoryPrediction with_transient = predict_memory(measured, whole, 40, 20000);
  CHECK(with_transient.step_peak_bytes() == 4000 + 8000 + 4000 + 2000 + 300);
  CHECK(with_transient.peak_bytes() == with_transient.step_peak_bytes() + 800 + 700);
  CHECK(with_transient.largest_batch == 51);
  // A whole-run peak that scales below the steps' is the steps'.
  measured.whole_run = measured.replica;
  measured.whole_run[static_cast<size_t>(MemoryCategory::activations)] = 0;
  CHECK(predict_memory(measured, whole, 40, 20000).peak_bytes() == with_transient.step_peak_bytes());
}

TEST_CASE("a run's memory as a prediction's base is its steps' peak and its whole-run peak", "[what_fits]") {
  MemoryFigures figures;
  figures.at_window_peak[static_cast<size_t>(MemoryCategory::activations)] = 1000;
  figures.at_window_peak[static_cast<size_t>(MemoryCategory::communication)] = 300;
  figures.window_peak_bytes = 1300;
  figures.at_peak[static_cast<size_t>(MemoryCategory::workspaces)] = 2000;  // a search's, at set-up
  figures.at_peak[static_cast<size_t>(MemoryCategory::communication)] = 300;
  figures.peak_bytes = 2300;
  const MeasuredMemory measured = measured_memory_from(figures, 8);
  CHECK(of(measured.replica, MemoryCategory::activations) == 1000);
  CHECK(of(measured.replica, MemoryCategory::workspaces) == 0);
  CHECK(of(measured.replica, MemoryCategory::communication) == 0);  // the strategy's rule adds it
  CHECK(of(measured.whole_run, MemoryCategory::workspaces) == 2000);
  CHECK(of(measured.whole_run, MemoryCategory::communication) == 0);
  CHECK(measured.batch_size == 8);
  // At twice the batch: the steps' activations double; the search's workspace stays.
  const MemoryPrediction predicted = predict_memory(measured, StrategyMemory{}, 16, uint64_t{1} << 40);
  CHECK(predicted.step_peak_bytes() == 2000);
  CHECK(predicted.peak_bytes() == 2000);  // max(steps 2000, whole run 0 * 2 + 2000)
}

TEST_CASE("every strategy's memory rule is what its run holds on the reference backend",
          "[what_fits][strategies]") {
  using testing::parameter_server;
  using testing::replicated;
  struct Case {
    std::string name;
    std::function<void(RunConfig&)> adjust;
  };
  const std::vector<Case> cases = {
      {"independent", [](RunConfig& c) { c.variable_update = "independent"; }},
      {"replicated nccl", replicated("nccl")},
      {"replicated xring", replicated("xring")},
      {"replicated psgpu", replicated("psgpu")},
      {"replicated pscpu", replicated("pscpu")},
      {"replicated nccl, sharded update", replicated("nccl", [](RunConfig& c) { c.sharded_update = true; })},
      {"replicated nccl, fp16 transfer",
       replicated("nccl", [](RunConfig& c) { c.compact_gradient_transfer = TransferWidth::fp16; })},
      {"replicated psgpu, fp16 transfer",
       replicated("psgpu", [](RunConfig& c) { c.compact_gradient_transfer = TransferWidth::fp16; })},
      {"parameter_server gpu", parameter_server("gpu")},
      {"parameter_server cpu", parameter_server("cpu")},
  };
  for (int devices : {2, 4}) {
    for (const Case& c : cases) {
      INFO(c.name << " on " << devices << " devices");
      std::vector<std::string> args = trivial_flags(devices, 3);
      args.pop_back();  // train() names the device
      const Trained trained = train(args, c.adjust);
      RunConfig config = config_of(trivial_flags(devices, 3));
      c.adjust(config);
      const StrategyMemory rule = rule_of(config);
      uint64_t fullest_communication = 0, fullest_pinned = 0;
      for (const DeviceMemoryRecord& device : trained.memory) {
        fullest_communication =
            std::max(fullest_communication, of(device.figures.held, MemoryCategory::communication));
        fullest_pinned = std::max(fullest_pinned, total_bytes(without_trace(device.figures.pinned_host_held)));
      }
      CHECK(fullest_communication == of(rule.added, MemoryCategory::communication));
      CHECK(fullest_pinned == rule.pinned_host_added);
      for (double kept : rule.kept) CHECK(kept == 1.0);  // every strategy here keeps a whole replica per device
      CHECK_FALSE(rule.rule.empty());
    }
  }
}

TEST_CASE("memory predicted from one device's run is within 5% of runs at other batches and device counts",
          "[what_fits][end_to_end]") {
  const Trained base = train({"--model=trivial", "--optimizer=momentum", "--num_gpus=1", "--batch_size=16",
                              "--num_warmup_batches=1", "--num_batches=2", "--variable_update=replicated"});
  const MeasuredMemory measured = measured_memory_from(base.memory.front().figures, 16);
  for (int devices : {1, 2, 4}) {
    for (int batch : {16, 40}) {
      for (const char* width : {"none", "fp16"}) {
        INFO(devices << " devices, batch " << batch << ", " << width << " transfer");
        std::vector<std::string> args = {"--model=trivial", "--optimizer=momentum", "--num_gpus=" + std::to_string(devices),
                                         "--batch_size=" + std::to_string(batch), "--num_warmup_batches=1",
                                         "--num_batches=2", "--variable_update=replicated",
                                         std::string("--compact_gradient_transfer=") + width};
        const Trained run = train(args);
        args.push_back("--device=cpu");
        const MemoryPrediction predicted = predict_memory(measured, rule_of(config_of(args)), batch, 1ull << 40);
        uint64_t measured_peak = 0, measured_step_peak = 0;
        for (const DeviceMemoryRecord& device : run.memory) {
          measured_peak = std::max(measured_peak, device.figures.peak_bytes);
          measured_step_peak = std::max(measured_step_peak, device.figures.window_peak_bytes);
        }
        const auto error = [](uint64_t predicted, uint64_t measured) {
          return std::abs(static_cast<double>(predicted) - static_cast<double>(measured)) /
                 static_cast<double>(measured);
        };
        CHECK(error(predicted.peak_bytes(), measured_peak) <= 0.05);
        CHECK(error(predicted.step_peak_bytes(), measured_step_peak) <= 0.05);
      }
    }
  }
}

TEST_CASE("a run too large for its devices is refused at set-up, and the batch the line suggests runs",
          "[what_fits][refusal]") {
  const uint64_t limit = 7 * kMiB;  // the trivial model's parameters and gradients are 6.0 MiB
  for (int devices : {1, 2, 4}) {
    INFO(devices << " devices");
    RunConfig config = config_of(trivial_flags(devices, 512));
    config.variable_update = "replicated";
    config.optimizer = "sgd";
    const std::unique_ptr<ReplicaMemoryFit> fit = run_within(config, limit);
    REQUIRE(fit != nullptr);
    CHECK(fit->fitted);
    CHECK(fit->limit_bytes == limit);
    CHECK(fit->batch_size == 512);
    const StrategyMemory rule = rule_of(config);
    const int64_t largest = largest_fitting_batch(*fit, rule);
    REQUIRE(largest > 1);
    REQUIRE(largest < 512);

    MemoryRefusal refusal;
    refusal.fit = *fit;
    refusal.strategy = rule;
    refusal.limit_source = "--device_memory";
    const std::string line = too_little_memory_line(refusal);
    CHECK(line.find('\n') == std::string::npos);
    CHECK(line.rfind("too little memory on device 0 for --batch_size=512: it needs ", 0) == 0);
    CHECK(line.find("parameters 3.0, gradients 3.0") != std::string::npos);
    CHECK(line.find("is free of its 7.0 MiB (--device_memory)") != std::string::npos);
    CHECK(line.find("the largest batch that fits is " + std::to_string(largest) + " (--batch_size=" +
                    std::to_string(largest) + ")") != std::string::npos);

    // The fit's need is what a run at that batch holds at its peak, and its batch fits; one more does not.
    config.batch_size = static_cast<int>(largest);
    CHECK(run_within(config, limit) == nullptr);
    config.batch_size = static_cast<int>(largest) + 1;
    CHECK(run_within(config, limit) != nullptr);
  }
}

TEST_CASE("a limit that leaves no byte to spare past the fit's largest batch: that batch runs, one more is refused",
          "[what_fits][refusal]") {
  // The fit is exact to the byte: every allocation of the run (the runner's loss slots and
  // stopwatch, the parameter norm's scratch) is in it, so a limit of exactly what batch b needs
  // runs b and refuses b + 1 at set-up, with the line's fit rather than a plain error later.
  for (const char* strategy : {"independent", "replicated"}) {
    INFO(strategy);
    RunConfig config = config_of(trivial_flags(1, 512));
    config.variable_update = strategy;
    const std::unique_ptr<ReplicaMemoryFit> fit = run_within(config, 7 * kMiB);
    REQUIRE(fit != nullptr);
    REQUIRE(fit->fitted);
    const StrategyMemory rule = rule_of(config);
    for (int batch : {1, 37, 100}) {
      INFO("batch " << batch);
      const uint64_t limit = fit->held_bytes + total_bytes(refused_device_bytes(*fit, rule, batch));
      ReplicaMemoryFit at_limit = *fit;
      at_limit.limit_bytes = limit;
      CHECK(largest_fitting_batch(at_limit, rule) == batch);
      config.batch_size = batch;
      const std::unique_ptr<ReplicaMemoryFit> at_batch = run_within(config, limit);
      INFO((at_batch ? "refused: " + at_batch->refused : std::string("it ran")));
      CHECK(at_batch == nullptr);
      config.batch_size = batch + 1;
      const std::unique_ptr<ReplicaMemoryFit> refused = run_within(config, limit);
      REQUIRE(refused != nullptr);
      CHECK(refused->limit_bytes == limit);
      CHECK(largest_fitting_batch(*refused, rule) == batch);
    }
  }
}

TEST_CASE("the run command refuses a configuration that does not fit with one line, before any step",
          "[what_fits][refusal][cli]") {
  const std::vector<std::string> args = {"--model=trivial", "--device=cpu", "--num_gpus=2", "--batch_size=4096",
                                         "--variable_update=replicated", "--device_memory=7MiB",
                                         "--num_warmup_batches=1", "--num_batches=2", "--result_file="};
  const std::string line = error_message_of<ConfigError>(
      [&] { run_benchmark(parse_run_flags(args, DeviceInventory{})); }, "refusal");
  CHECK(line.rfind("too little memory on device ", 0) == 0);
  CHECK(line.find("for --batch_size=4096") != std::string::npos);
  CHECK(line.find("the largest batch that fits is ") != std::string::npos);
  CHECK(line.find('\n') == std::string::npos);
  // Not even one sample beside the parameters and gradients: the line says so.
  const std::vector<std::string> tiny = {"--model=trivial", "--device=cpu", "--batch_size=1", "--device_memory=5MiB",
                                         "--num_warmup_batches=1", "--num_batches=2", "--result_file="};
  const std::string none = error_message_of<ConfigError>(
      [&] { run_benchmark(parse_run_flags(tiny, DeviceInventory{})); }, "refusal");
  CHECK(none.find("not even a batch of 1 fits") != std::string::npos);
}

TEST_CASE("the refusal suggests another strategy that fits the batch, and that strategy runs",
          "[what_fits][refusal][cli]") {
  const std::vector<std::string> args = {"--model=trivial", "--device=cpu", "--num_gpus=2", "--batch_size=64",
                                         "--variable_update=replicated", "--compact_gradient_transfer=fp16",
                                         "--device_memory=12MiB", "--num_warmup_batches=1", "--num_batches=2",
                                         "--result_file="};
  const std::string line = error_message_of<ConfigError>(
      [&] { run_benchmark(parse_run_flags(args, DeviceInventory{})); }, "refusal");
  CHECK(line.find("not even a batch of 1 fits with this strategy, or this batch with replicated (nccl) (") !=
        std::string::npos);
  CHECK(line.find("activation_checkpointing") == std::string::npos);  // the trivial model has no blocks
  RunConfig suggested = config_of(trivial_flags(2, 64));
  suggested.variable_update = "replicated";
  CHECK(run_within(suggested, 12 * kMiB) == nullptr);
}

TEST_CASE("the refusal suggests recomputing the blocks where that fits the batch, and that run fits",
          "[what_fits][refusal][cli][activation_checkpointing]") {
  const std::vector<std::string> gpt = {"--model=gpt",   "--vocab_size=23",  "--seq_len=8",     "--num_layers=4",
                                        "--num_heads=2", "--hidden_size=16", "--batch_size=64", "--device=cpu",
                                        "--num_warmup_batches=1", "--num_batches=2"};
  const RunConfig keeping = config_of(gpt);
  std::vector<std::string> recomputing_args = gpt;
  recomputing_args.push_back("--activation_checkpointing=blocks");
  const RunConfig recomputing = config_of(recomputing_args);
  // Each sized alone, refused by a limit nothing fits.
  const std::unique_ptr<ReplicaMemoryFit> kept_fit = run_within(keeping, 1024);
  const std::unique_ptr<ReplicaMemoryFit> recomputed_fit = run_within(recomputing, 1024);
  REQUIRE(kept_fit != nullptr);
  REQUIRE(recomputed_fit != nullptr);
  const StrategyMemory rule = rule_of(keeping);
  const uint64_t kept_need = total_bytes(refused_device_bytes(*kept_fit, rule, 64));
  const uint64_t recomputed_need = total_bytes(refused_device_bytes(*recomputed_fit, rule, 64));
  INFO("keeping the activations " << kept_need << " bytes, recomputing the blocks " << recomputed_need);
  REQUIRE(recomputed_need < kept_need);
  const uint64_t limit = kept_fit->held_bytes + recomputed_need;

  std::vector<std::string> limited = gpt;
  limited.insert(limited.end(), {"--device_memory=" + std::to_string(limit), "--result_file="});
  const std::string line = error_message_of<ConfigError>(
      [&] { run_benchmark(parse_run_flags(limited, DeviceInventory{})); }, "refusal");
  CHECK(line.rfind("too little memory on device 0 for --batch_size=64: ", 0) == 0);
  CHECK(line.find(", or this batch with --activation_checkpointing=blocks (") != std::string::npos);
  // The largest batch the line names is checked by sizing on the device, so it holds where the
  // fit's line from batches of 1 and 2 is a little off (gpt's buffers rounded up to tiles): it
  // runs, and one more is refused.
  const std::string named = "the largest batch that fits is ";
  REQUIRE(line.find(named) != std::string::npos);
  const int largest = std::stoi(line.substr(line.find(named) + named.size()));
  REQUIRE(largest > 1);
  RunConfig at_largest = keeping;
  at_largest.batch_size = largest;
  CHECK(run_within(at_largest, limit) == nullptr);
  at_largest.batch_size = largest + 1;
  CHECK(run_within(at_largest, limit) != nullptr);
  // The fit is linear in the batch from batches of 1 and 2; gpt's buffers rounded up to tiles
  // hold a few KiB more at 64 than it extrapolates (0.3% here).
  const std::unique_ptr<ReplicaMemoryFit> recomputed_run = run_within(recomputing, limit + limit / 100);
  INFO((recomputed_run ? "refused: " + recomputed_run->refused : std::string("it ran")));
  CHECK(recomputed_run == nullptr);

  // Where recomputing fits a larger batch but not this one, the line names that batch.
  const uint64_t smaller = kept_fit->held_bytes + total_bytes(refused_device_bytes(*recomputed_fit, rule, 48));
  ReplicaMemoryFit kept_at_smaller = *kept_fit;
  kept_at_smaller.limit_bytes = smaller;
  ReplicaMemoryFit recomputed_at_smaller = *recomputed_fit;
  recomputed_at_smaller.limit_bytes = smaller;
  const int64_t largest_kept = largest_fitting_batch(kept_at_smaller, rule);
  REQUIRE(largest_kept < 48);
  kept_at_smaller.batch_size = 64;
  MemoryRefusal refusal;
  refusal.fit = kept_at_smaller;
  refusal.strategy = rule;
  refusal.limit_source = "--device_memory";
  refusal.recomputing_blocks = recomputed_at_smaller;
  CHECK(too_little_memory_line(refusal).find(", or --batch_size=48 with --activation_checkpointing=blocks") !=
        std::string::npos);
}

namespace {

// The reference devices made while it lives stand in for a GPU of `bytes`: the sizing that lifts
// the memory limit is refused past it, as cudaMalloc refuses past a GPU's memory.
class ReferenceDeviceCapacity {
 public:
  explicit ReferenceDeviceCapacity(uint64_t bytes) { set_reference_device_capacity(bytes); }
  ~ReferenceDeviceCapacity() { set_reference_device_capacity(0); }
  ReferenceDeviceCapacity(const ReferenceDeviceCapacity&) = delete;
  ReferenceDeviceCapacity& operator=(const ReferenceDeviceCapacity&) = delete;
};

// fully_sharded's memory rule over `devices` devices for `config`'s model, as the run's refusal
// takes it (a bf16 weight copy gathered).
StrategyMemory fully_sharded_rule_over(const RunConfig& config, int devices) {
  const std::unique_ptr<Model> model = find_model(config.model)->create(config);
  const std::vector<GradientRange> plan = plan_exchanges(model->layout(), exchange_plan_options(config));
  StrategyOptions options;
  options.gathered_element_bytes = 2;
  return find_strategy("fully_sharded")
      ->memory(options, model->layout(), plan, ScheduleShape{devices, devices, 1}, model->parameter_units());
}

}  // namespace

TEST_CASE("a model larger than its whole device is refused with its parameters, gradients and optimizer state, "
          "and the devices fully_sharded would need",
          "[what_fits][refusal][cli]") {
  std::vector<std::string> args = {"--model=gpt",      "--vocab_size=23",   "--seq_len=8",
                                   "--num_layers=4",   "--num_heads=2",     "--hidden_size=16",
                                   "--batch_size=1",   "--precision=bf16",  "--optimizer=adam",
                                   "--variable_update=replicated", "--device=cpu", "--num_warmup_batches=1",
                                   "--num_batches=2"};
  const RunConfig config = config_of(args);
  const uint64_t count = find_model(config.model)->create(config)->layout().total_count();
  // fp32 values and their bf16 copy, fp32 gradients, Adam's two fp32 moments.
  CategoryBytes model_state{};
  model_state[static_cast<size_t>(MemoryCategory::parameters)] = count * (4 + 2);
  model_state[static_cast<size_t>(MemoryCategory::gradients)] = count * 4;
  model_state[static_cast<size_t>(MemoryCategory::optimizer_state)] = count * 8;
  // A device on which fully_sharded over 4 devices leaves a tenth of it beside the model state and
  // over 2 does not, and which the whole model state passes.
  const uint64_t over_two = total_bytes(model_state_under(fully_sharded_rule_over(config, 2), model_state));
  const uint64_t over_four = total_bytes(model_state_under(fully_sharded_rule_over(config, 4), model_state));
  REQUIRE(over_four < over_two);
  const uint64_t limit =
      static_cast<uint64_t>(static_cast<double>(over_two + over_four) / 2 / (1 - kRoomForActivations));
  REQUIRE(limit < total_bytes(model_state));
  const ReferenceDeviceCapacity capacity(limit);

  // The sizing that lifts the limit is refused too: nothing is measured, the model state counted.
  const std::unique_ptr<ReplicaMemoryFit> fit = run_within(config, limit);
  REQUIRE(fit != nullptr);
  CHECK_FALSE(fit->fitted);
  CHECK(fit->model_state == model_state);
  const uint64_t available = limit - fit->held_bytes;
  int fewest = 0;
  for (int devices = 2; devices <= 64 && fewest == 0; devices *= 2)
    if (static_cast<double>(total_bytes(model_state_under(fully_sharded_rule_over(config, devices), model_state))) <=
        (1 - kRoomForActivations) * static_cast<double>(available))
      fewest = devices;
  CHECK(fewest == 4);

  const testing::TempDir folder;
  const std::string result = folder.file("result.json");
  args.insert(args.end(), {"--device_memory=" + std::to_string(limit), "--result_file=" + result});
  const std::string line = error_message_of<ConfigError>(
      [&] { run_benchmark(parse_run_flags(args, DeviceInventory{})); }, "refusal");
  INFO(line);
  const MemoryUnit unit = memory_unit_for(static_cast<double>(total_bytes(model_state)));
  CHECK(line.rfind("too little memory on device 0 for --batch_size=1: its parameters, gradients and optimizer state "
                   "alone need ", 0) == 0);
  CHECK(line.find("too little memory on device", 1) == std::string::npos);
  CHECK(line.find(" (" + category_list(model_state, unit.bytes) + ") before any activation, and ") !=
        std::string::npos);
  CHECK(line.find("(--device_memory); --variable_update=fully_sharded over 4 devices keeps 1/4 of each on every "
                  "device (") != std::string::npos);
  CHECK(line.find(" before activations), or use a smaller model") != std::string::npos);
  CHECK(line.find("reduce --batch_size") == std::string::npos);
  CHECK(line.find("largest batch") == std::string::npos);
  CHECK(line.find('\n') == std::string::npos);
  // The command's exit: 2, and no result.
  CHECK(testing::run_cli(args) == 2);
  CHECK_FALSE(std::filesystem::exists(result));
}

TEST_CASE("a model that even fully_sharded over 64 devices leaves no room beside is told to be smaller",
          "[what_fits][refusal]") {
  constexpr uint64_t kGiB = 1024 * kMiB;
  MemoryRefusal refusal;
  refusal.fit.fitted = false;
  refusal.fit.batch_size = 2;
  refusal.fit.model_state[static_cast<size_t>(MemoryCategory::parameters)] = 6 * kGiB;
  refusal.fit.model_state[static_cast<size_t>(MemoryCategory::gradients)] = 4 * kGiB;
  refusal.fit.model_state[static_cast<size_t>(MemoryCategory::optimizer_state)] = 8 * kGiB;
  refusal.limit_source = "what the GPU had free when the run started";
  for (int devices = 2; devices <= 64; devices *= 2) {
    StrategyMemory sharded;
    for (MemoryCategory category :
         {MemoryCategory::parameters, MemoryCategory::gradients, MemoryCategory::optimizer_state})
      sharded.kept[static_cast<size_t>(category)] = 1.0 / devices;
    refusal.fully_sharded_over.push_back({devices, sharded});
  }
  refusal.fit.limit_bytes = 100 * kMiB;  // 18 GiB over 64 is 288 MiB
  std::string line = too_little_memory_line(refusal);
  INFO(line);
  CHECK(line.rfind("too little memory on device 0 for --batch_size=2: its parameters, gradients and optimizer state "
                   "alone need 18.0 GiB (parameters 6.0, gradients 4.0, optimizer 8.0) before any activation, and "
                   "0.1 GiB is free of its 0.1 GiB (what the GPU had free when the run started); even "
                   "--variable_update=fully_sharded over 64 devices leaves less than 10% of it beside them (0.3 GiB "
                   "before activations): use a smaller model",
                   0) == 0);
  // 18 GiB over 32 is 0.56 GiB, within 90% of 1 GiB; over 16 it is not.
  refusal.fit.limit_bytes = kGiB;
  line = too_little_memory_line(refusal);
  CHECK(line.find("; --variable_update=fully_sharded over 32 devices keeps 1/32 of each on every device (0.6 GiB "
                  "before activations), or use a smaller model") != std::string::npos);
}

TEST_CASE("predict's memory table in markdown, CSV and JSON", "[what_fits][report]") {
  PredictionReport report;
  report.unit = "images/s";
  report.memory_predicted = true;
  report.memory_batch_size = 32;
  report.base_batch_size = 16;
  report.device_memory_bytes = 8 * kMiB;
  report.device_memory_source = "--device_memory";
  PredictionRow with_memory;
  with_memory.strategy = "replicated (nccl)";
  with_memory.step.gpus = 2;
  MemoryPrediction memory;
  memory.batch_size = 32;
  memory.bytes[static_cast<size_t>(MemoryCategory::parameters)] = 3 * kMiB;
  memory.bytes[static_cast<size_t>(MemoryCategory::activations)] = kMiB / 2;
  memory.largest_batch = 144;
  memory.rule = "every device holds a whole replica";
  with_memory.memory = memory;
  with_memory.measured_memory_peak_bytes = 3.5 * kMiB * 1.02;
  PredictionRow without = with_memory;
  without.memory.reset();
  without.step.gpus = 4;
  report.rows = {with_memory, without};
  report.measurements_given = true;

  const std::string markdown = render_prediction_markdown(report);
  CHECK_THAT(markdown, Catch::Contains("## Memory per device"));
  CHECK_THAT(markdown, Catch::Contains("At --batch_size=32 per device (BASE ran 16)"));
  CHECK_THAT(markdown, Catch::Contains("| replicated (nccl) | 2 | 3.50 | 3.00 | 0.00 | 0.00 | 0.50 |"));
  CHECK_THAT(markdown, Catch::Contains("| 144 | 3.57 | -2.0% |"));
  CHECK_THAT(markdown, Catch::Contains("- `replicated (nccl)`: every device holds a whole replica"));

  // Every CSV line has the header's fields, with or without a memory prediction.
  const std::string csv = render_prediction_csv(report);
  std::vector<size_t> fields;
  size_t start = 0;
  while (start < csv.size()) {
    const size_t end = csv.find('\n', start);
    const std::string line = csv.substr(start, end - start);
    fields.push_back(static_cast<size_t>(std::count(line.begin(), line.end(), ',')));
    start = end + 1;
  }
  REQUIRE(fields.size() == 3);
  CHECK(fields[1] == fields[0]);
  CHECK(fields[2] == fields[0]);
  CHECK_THAT(csv, Catch::Contains(",memory_batch_size,memory_peak_bytes,memory_parameters_bytes,"));

  const nlohmann::json json = nlohmann::json::parse(render_prediction_json(report));
  CHECK(json["memory"]["batch_size"] == 32);
  CHECK(json["memory"]["device_memory_bytes"] == 8 * kMiB);
  CHECK(json["rows"][0]["memory"]["peak_bytes"] == 3 * kMiB + kMiB / 2);
  CHECK(json["rows"][0]["memory"]["categories"]["activations"] == kMiB / 2);
  CHECK(json["rows"][0]["memory"]["largest_batch_that_fits"] == 144);
  CHECK(json["rows"][0]["memory_error_pct"].get<double>() == Approx(-100.0 * 0.02 / 1.02));
  CHECK_FALSE(json["rows"][1].contains("memory"));
}
