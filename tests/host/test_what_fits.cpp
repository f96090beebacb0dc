// What fits (README "Memory", "What fits"): memory sizes on the command line, the largest batch
// under a need, each strategy's memory rule against what its run holds on the reference backend,
// the memory predicted from one run (Note [memory from one run]) against runs at other batches
// and device counts, and the too-little-memory refusal at set-up (Note [too little memory]): its
// one line, its suggested batch that then runs, and the next larger that is refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/flag_parsing.h"
#include "cli/flags.h"
#include "cli/memory_refusal.h"
#include "cli/run_command.h"
#include "engine/backends.h"
#include "engine/errors.h"
#include "models/model_registry.h"
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
  MeasuredMemory measured;
  measured.replica = base.memory.front().figures.at_peak;
  measured.replica[static_cast<size_t>(MemoryCategory::communication)] = 0;
  measured.batch_size = 16;
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
        uint64_t measured_peak = 0;
        for (const DeviceMemoryRecord& device : run.memory) measured_peak = std::max(measured_peak, device.figures.peak_bytes);
        const double error = std::abs(static_cast<double>(predicted.peak_bytes()) - static_cast<double>(measured_peak)) /
                             static_cast<double>(measured_peak);
        CHECK(error <= 0.05);
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
