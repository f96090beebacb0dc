// Memory accounting (engine/machine/memory_ledger.h, reports/memory_summary.h): the ledger's
// figures (categories that add up, peaks, the window, frees, threads), every allocation of a
// reference device recorded under its tag, every model and strategy on the reference backend
// accounting its parameters, gradients and optimizer state to the byte, summary.memory's JSON and
// the console's "Memory:" line.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/backend.h"
#include "engine/backends.h"
#include "engine/machine/memory_ledger.h"
#include "engine/training/optimizer.h"
#include "engine/training/parameter_set.h"
#include "reports/memory_summary.h"
#include "tests/host/strategy_test_support.h"
#include "tests/host/test_support.h"

using namespace dpbench;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;
using dpbench::testing::train;
using dpbench::testing::Trained;

namespace {

uint64_t of(const CategoryBytes& bytes, MemoryCategory category) { return bytes[static_cast<size_t>(category)]; }

const MemoryTag kWeights{MemoryCategory::parameters, "dense"};
const MemoryTag kKept{MemoryCategory::activations, "dense"};
const MemoryTag kStaging{MemoryCategory::scratch, "staging"};

}  // namespace

TEST_CASE("the category table names each category once, in the enum's order", "[memory][ledger]") {
  const auto& table = memory_categories();
  for (size_t i = 0; i < table.size(); ++i) {
    CHECK(static_cast<size_t>(table[i].category) == i);
    for (size_t j = i + 1; j < table.size(); ++j) CHECK(std::string(table[i].key) != table[j].key);
  }
  CHECK(std::string(memory_category_key(MemoryCategory::optimizer_state)) == "optimizer_state");
  CHECK(std::string(memory_category_info(MemoryCategory::optimizer_state).console_word) == "optimizer");
  CHECK(memory_category_info(MemoryCategory::activations).scales_with_batch);
  CHECK_FALSE(memory_category_info(MemoryCategory::parameters).scales_with_batch);
}

TEST_CASE("a ledger adds up its categories, keeps the peak and takes freed bytes off", "[memory][ledger]") {
  const std::shared_ptr<MemoryLedger> ledger = MemoryLedger::create();
  LedgerEntry weights = ledger->record(kWeights, MemoryPlace::device, 1000);
  LedgerEntry kept = ledger->record(kKept, MemoryPlace::device, 300);
  {
    LedgerEntry staging = ledger->record(kStaging, MemoryPlace::device, 500);
    const MemoryFigures during = ledger->figures();
    CHECK(total_bytes(during.held) == 1800);
    CHECK(during.peak_bytes == 1800);
  }
  LedgerEntry more_kept = ledger->record(kKept, MemoryPlace::device, 200);
  const MemoryFigures figures = ledger->figures();
  CHECK(total_bytes(figures.held) == 1500);
  CHECK(of(figures.held, MemoryCategory::parameters) == 1000);
  CHECK(of(figures.held, MemoryCategory::activations) == 500);
  CHECK(of(figures.held, MemoryCategory::scratch) == 0);
  // The peak was while the staging lived: its categories as they were then.
  CHECK(figures.peak_bytes == 1800);
  CHECK(total_bytes(figures.at_peak) == figures.peak_bytes);
  CHECK(of(figures.at_peak, MemoryCategory::scratch) == 500);
  CHECK(of(figures.at_peak, MemoryCategory::activations) == 300);
  const auto owners = ledger->held_by_owner(MemoryPlace::device);
  CHECK(owners.at({"dense", MemoryCategory::activations}) == 500);
  CHECK(owners.at({"dense", MemoryCategory::parameters}) == 1000);
  CHECK(owners.count({"staging", MemoryCategory::scratch}) == 0);  // holds nothing now
}

TEST_CASE("the window's peak starts from what is held when it begins", "[memory][ledger]") {
  const std::shared_ptr<MemoryLedger> ledger = MemoryLedger::create();
  LedgerEntry weights = ledger->record(kWeights, MemoryPlace::device, 1000);
  ledger->record(kStaging, MemoryPlace::device, 4000).release();  // set-up's transient
  ledger->begin_window();
  CHECK(ledger->figures().window_peak_bytes == 1000);
  {
    LedgerEntry step = ledger->record(kKept, MemoryPlace::device, 100);
  }
  const MemoryFigures figures = ledger->figures();
  CHECK(figures.peak_bytes == 5000);
  CHECK(figures.window_peak_bytes == 1100);
  CHECK(total_bytes(figures.at_window_peak) == 1100);
  CHECK(of(figures.at_window_peak, MemoryCategory::activations) == 100);
}

TEST_CASE("pinned host memory is counted beside the device's, never in its total", "[memory][ledger]") {
  const std::shared_ptr<MemoryLedger> ledger = MemoryLedger::create();
  LedgerEntry on_device = ledger->record(kWeights, MemoryPlace::device, 64);
  LedgerEntry pinned = ledger->record(kWeights, MemoryPlace::pinned_host, 4096);
  const MemoryFigures figures = ledger->figures();
  CHECK(figures.peak_bytes == 64);
  CHECK(total_bytes(figures.held) == 64);
  CHECK(of(figures.pinned_host_held, MemoryCategory::parameters) == 4096);
  CHECK(figures.pinned_host_peak_bytes == 4096);
  CHECK(ledger->held_by_owner(MemoryPlace::pinned_host).at({"dense", MemoryCategory::parameters}) == 4096);
}

TEST_CASE("ledger entries move with what they account, and are taken off once", "[memory][ledger]") {
  const std::shared_ptr<MemoryLedger> ledger = MemoryLedger::create();
  LedgerEntry first = ledger->record(kKept, MemoryPlace::device, 10);
  LedgerEntry moved = std::move(first);
  LedgerEntry assigned = ledger->record(kKept, MemoryPlace::device, 20);
  assigned = std::move(moved);  // the 20 bytes go, the 10 stay with `assigned`
  CHECK(total_bytes(ledger->figures().held) == 10);
  assigned.release();
  assigned.release();
  CHECK(total_bytes(ledger->figures().held) == 0);
}

TEST_CASE("threads that allocate and free at once leave the ledger balanced", "[memory][ledger]") {
  const std::shared_ptr<MemoryLedger> ledger = MemoryLedger::create();
  constexpr int kThreads = 8, kRounds = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&ledger, t] {
      const MemoryTag tag{static_cast<MemoryCategory>(t % kNumMemoryCategories), "thread " + std::to_string(t)};
      for (int round = 0; round < kRounds; ++round) {
        LedgerEntry held = ledger->record(tag, MemoryPlace::device, 100);
        LedgerEntry pinned = ledger->record(tag, MemoryPlace::pinned_host, 10);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const MemoryFigures figures = ledger->figures();
  CHECK(total_bytes(figures.held) == 0);
  CHECK(total_bytes(figures.pinned_host_held) == 0);
  CHECK(figures.peak_bytes >= 100);
  CHECK(figures.peak_bytes <= 100 * kThreads);
  CHECK(total_bytes(figures.at_peak) == figures.peak_bytes);
}

TEST_CASE("a reference device records each allocation under its tag until the buffer goes", "[memory]") {
  std::unique_ptr<Device> device = std::move(create_devices(BackendKind::reference, {0}).front());
  Buffer weights = device->allocate(4096, kWeights);
  {
    Buffer loss = device->allocate_host_visible(4, MemoryTag{MemoryCategory::trace, "loss"});
    CHECK(of(device->memory().figures().pinned_host_held, MemoryCategory::trace) == 4);
  }
  const MemoryFigures figures = device->memory().figures();
  CHECK(of(figures.held, MemoryCategory::parameters) == 4096);
  CHECK(of(figures.pinned_host_held, MemoryCategory::trace) == 0);
  CHECK_FALSE(device->reported_memory_used());  // the reference device reports no figure of its own
  // A buffer may outlive its device: it is still taken off a ledger that exists.
  device.reset();
  weights = Buffer();
}

TEST_CASE("a parameter set and an optimizer allocate what their bytes_for rules count, to the byte", "[memory]") {
  // The too-little-memory line counts a replica no device can hold with these rules instead of
  // allocating it (Note [too little memory] in engine/training/runner.h).
  std::unique_ptr<Device> device = std::move(create_devices(BackendKind::reference, {0}).front());
  ParameterLayout layout;
  layout.declare("weights", {7, 5});
  layout.declare("bias", {5});
  layout.finalize();
  const size_t count = layout.total_count();
  // What the device holds now beyond `before`.
  const auto held_since = [&](const CategoryBytes& before) {
    const CategoryBytes now = device->memory().figures().held;
    CategoryBytes added{};
    for (size_t c = 0; c < added.size(); ++c) added[c] = now[c] - before[c];
    return added;
  };
  for (DataType copy : {DataType::f32, DataType::f16, DataType::bf16}) {
    INFO("weight copy " << static_cast<int>(copy));
    const CategoryBytes before = device->memory().figures().held;
    const ParameterSet parameters(*device, layout, copy);
    CHECK(held_since(before) == ParameterSet::bytes_for(count, copy));
  }
  for (OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::momentum, OptimizerKind::adam, OptimizerKind::adamw})
    for (LossScaling scaling : {LossScaling::none, LossScaling::fixed, LossScaling::automatic}) {
      INFO("optimizer " << static_cast<int>(kind) << ", loss scaling " << static_cast<int>(scaling));
      OptimizerConfig config;
      config.kind = kind;
      config.loss_scaling = scaling;
      config.loss_scale = 128;
      const CategoryBytes before = device->memory().figures().held;
      const Optimizer optimizer(*device, config, count);
      const CategoryBytes held = held_since(before);
      CHECK(held == Optimizer::bytes_for(config, count));
      CHECK(of(held, MemoryCategory::optimizer_state) >=
            static_cast<size_t>(Optimizer::moments_of(kind)) * count * sizeof(float));
    }
}

// ---- every model and strategy on the reference backend ----

namespace {

// The optimizer's fp32 slots per parameter (momentum 1, Adam's two moments).
size_t optimizer_slots(const std::string& optimizer) {
  if (optimizer == "momentum") return 1;
  if (optimizer == "adam" || optimizer == "adamw") return 2;
  return 0;
}

struct Expected {
  size_t optimizer_slots = 0;
  size_t weight_copy_bytes = 0;  // per parameter: 2 with a 16-bit weight copy, else 0
  bool loss_scale = false;       // fp16: the loss scale's state
};

// Every device's figures: categories that add up to the peaks, nothing allocated inside the
// measured steps, and parameters, gradients and optimizer state to the byte.
void check_accounted(const Trained& trained, const Expected& expected) {
  REQUIRE_FALSE(trained.memory.empty());
  const uint64_t floats = trained.parameter_slots * sizeof(float);
  for (const DeviceMemoryRecord& device : trained.memory) {
    INFO("device " << device.device_index);
    const MemoryFigures& f = device.figures;
    CHECK(total_bytes(f.at_peak) == f.peak_bytes);
    CHECK(total_bytes(f.at_window_peak) == f.window_peak_bytes);
    CHECK(f.window_peak_bytes <= f.peak_bytes);
    // Every buffer of a step is made at set-up: the steps hold what they began with.
    CHECK(total_bytes(f.held) == f.window_peak_bytes);
    CHECK(of(f.held, MemoryCategory::parameters) == floats + trained.parameter_slots * expected.weight_copy_bytes);
    CHECK(of(f.held, MemoryCategory::gradients) == floats);
    CHECK(of(f.held, MemoryCategory::optimizer_state) ==
          expected.optimizer_slots * floats + (expected.loss_scale ? sizeof(LossScaleState) : 0));
    CHECK(of(f.held, MemoryCategory::activations) > 0);
    CHECK(of(f.held, MemoryCategory::data) > 0);
    CHECK(of(f.held, MemoryCategory::trace) > 0);
    CHECK(device.reported_used_bytes == -1);
  }
}

std::vector<std::string> with_run_flags(std::vector<std::string> args, int devices) {
  for (const std::string& flag : {"--num_gpus=" + std::to_string(devices), std::string("--num_warmup_batches=1"),
                                  std::string("--num_batches=2")})
    args.push_back(flag);
  return args;
}

}  // namespace

TEST_CASE("every model accounts its parameters, gradients and optimizer state to the byte", "[memory][models]") {
  struct Case {
    std::vector<std::string> args;
    std::string optimizer;
  };
  const std::vector<Case> cases = {
      {{"--model=trivial", "--batch_size=2", "--optimizer=momentum"}, "momentum"},
      {{"--model=cifar10_cnn", "--batch_size=2"}, "momentum"},
      {{"--model=resnet50", "--data_name=cifar10", "--batch_size=1", "--optimizer=adam"}, "adam"},
      {{"--model=rnnlm", "--batch_size=2", "--vocab_size=30", "--seq_len=4", "--num_units=8", "--embedding_dim=6"},
       "adam"},
      {{"--model=nmt", "--batch_size=2", "--src_vocab_size=20", "--tgt_vocab_size=20", "--embedding_dim=8",
        "--num_units=8", "--num_encoder_layers=2", "--num_decoder_layers=2", "--src_max_len=4", "--tgt_max_len=4"},
       "adam"},
      {{"--model=nmt", "--encoder_type=transformer", "--batch_size=2", "--src_vocab_size=13", "--tgt_vocab_size=11",
        "--num_units=8", "--num_heads=2", "--ffn_units=12", "--num_encoder_layers=1", "--num_decoder_layers=1",
        "--src_max_len=5", "--tgt_max_len=4"},
       "adam"},
      {{"--model=gpt", "--batch_size=2", "--vocab_size=13", "--seq_len=5", "--num_layers=2", "--num_heads=2",
        "--hidden_size=8"},
       "adamw"},
  };
  for (const Case& c : cases) {
    INFO(c.args.front());
    const Trained trained = train(with_run_flags(c.args, 1));
    check_accounted(trained, Expected{optimizer_slots(c.optimizer), 0, false});
  }
}

TEST_CASE("a 16-bit run accounts its weight copy with the parameters and the loss scale with the optimizer",
          "[memory][models]") {
  for (const char* precision : {"--precision=fp16", "--precision=bf16"}) {
    INFO(precision);
    const Trained trained = train(with_run_flags(
        {"--model=gpt", "--batch_size=2", "--vocab_size=13", "--seq_len=5", "--num_layers=1", "--num_heads=2",
         "--hidden_size=8", precision},
        1));
    check_accounted(trained, Expected{2, 2, std::string(precision) == "--precision=fp16"});
  }
}

TEST_CASE("every strategy accounts its exchange buffers as communication", "[memory][strategies]") {
  using testing::parameter_server;
  using testing::replicated;
  struct Case {
    std::string name;
    std::function<void(RunConfig&)> adjust;
    bool device_communication;  // exchange buffers on every device
    bool pinned_communication;  // exchange buffers in pinned host memory
  };
  const std::vector<Case> cases = {
      {"independent", [](RunConfig& c) { c.variable_update = "independent"; }, false, false},
      {"replicated nccl", replicated("nccl"), false, false},
      {"replicated xring", replicated("xring"), true, false},
      {"replicated psgpu", replicated("psgpu"), true, false},
      {"replicated pscpu", replicated("pscpu"), false, true},
      {"replicated nccl, sharded update", replicated("nccl", [](RunConfig& c) { c.sharded_update = true; }), false,
       false},
      {"replicated nccl, fp16 transfer",
       replicated("nccl", [](RunConfig& c) { c.compact_gradient_transfer = TransferWidth::fp16; }), true, false},
      {"parameter_server gpu", parameter_server("gpu"), false, false},
      {"parameter_server cpu", parameter_server("cpu"), false, true},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const Trained trained = train(with_run_flags({"--model=trivial", "--batch_size=2", "--optimizer=momentum"}, 2),
                                  c.adjust);
    REQUIRE(trained.memory.size() == 2);
    check_accounted(trained, Expected{1, 0, false});
    for (const DeviceMemoryRecord& device : trained.memory) {
      CHECK((of(device.figures.held, MemoryCategory::communication) > 0) == c.device_communication);
      CHECK((of(device.figures.pinned_host_held, MemoryCategory::communication) > 0) == c.pinned_communication);
    }
    if (c.name == "parameter_server cpu") {
      // The master copy and the gradients' sum, pinned beside device 0.
      const uint64_t floats = trained.parameter_slots * sizeof(float);
      CHECK(of(trained.memory[0].figures.pinned_host_held, MemoryCategory::parameters) == floats);
      CHECK(of(trained.memory[0].figures.pinned_host_held, MemoryCategory::gradients) == floats);
      CHECK(of(trained.memory[1].figures.pinned_host_held, MemoryCategory::parameters) == 0);
    }
  }
}

TEST_CASE("sparse embedding gradients account their packs as communication", "[memory][strategies][sparse]") {
  const Trained trained =
      train(with_run_flags({"--model=rnnlm", "--batch_size=2", "--vocab_size=30", "--seq_len=4", "--num_units=8",
                            "--embedding_dim=6", "--variable_update=replicated", "--sparse_embedding_grads=true"},
                           2));
  check_accounted(trained, Expected{2, 0, false});
  for (const DeviceMemoryRecord& device : trained.memory)
    CHECK(of(device.figures.held, MemoryCategory::communication) > 0);
}

// ---- summary.memory and the console line ----

namespace {

DeviceMemoryRecord record_of(int index, uint64_t parameters, uint64_t activations) {
  DeviceMemoryRecord record;
  record.device_index = index;
  MemoryFigures& f = record.figures;
  f.held[static_cast<size_t>(MemoryCategory::parameters)] = parameters;
  f.held[static_cast<size_t>(MemoryCategory::activations)] = activations;
  f.at_window_peak = f.held;
  f.window_peak_bytes = total_bytes(f.held);
  f.at_peak = f.held;
  f.at_peak[static_cast<size_t>(MemoryCategory::scratch)] = 512ull << 20;  // set-up's algorithm search
  f.peak_bytes = total_bytes(f.at_peak);
  return record;
}

constexpr uint64_t kGiB = 1ull << 30;

}  // namespace

TEST_CASE("summary.memory lists each device's categories and names the device's own figure", "[memory][json]") {
  DeviceMemoryRecord gpu = record_of(3, kGiB / 2, 5 * kGiB);
  gpu.reported_used_bytes = static_cast<int64_t>(6 * kGiB);
  gpu.reported_used_at_creation_bytes = static_cast<int64_t>(kGiB / 4);
  const nlohmann::json memory = memory_summary_to_json({gpu, record_of(4, kGiB / 2, kGiB)});
  REQUIRE(memory["devices"].size() == 2);
  const nlohmann::json& device = memory["devices"][0];
  CHECK(device["device"] == 3);
  CHECK(device["steady_bytes"] == 11 * kGiB / 2);
  CHECK(device["steady"]["parameters"] == kGiB / 2);
  CHECK(device["step_peak_bytes"] == 11 * kGiB / 2);
  CHECK(device["at_step_peak"]["activations"] == 5 * kGiB);
  CHECK(device["peak_bytes"] == 11 * kGiB / 2 + (512ull << 20));
  CHECK(device["at_peak"]["scratch"] == 512ull << 20);
  CHECK(device["device_reported_bytes"] == 6 * kGiB);
  CHECK(device["unaccounted_bytes"] == kGiB / 2);
  CHECK(device["unaccounted"]["context_bytes"] == kGiB / 4);
  CHECK(device["unaccounted"]["libraries_bytes"] == kGiB / 4);
  CHECK(device["unaccounted_reason"] == kUnaccountedMemoryReason);
  CHECK_FALSE(memory["devices"][1].contains("device_reported_bytes"));
  CHECK(memory["fullest_device"] == 0);
  CHECK(memory["step_peak_bytes"] == 11 * kGiB / 2);
  CHECK(memory["scales_with_batch"] == nlohmann::json({"activations", "scratch", "workspaces", "data"}));
  CHECK(memory_summary_to_json({}).empty());
}

TEST_CASE("NVML's figure goes beside the device's own, for this process's GPUs", "[memory][json]") {
  nlohmann::json memory = memory_summary_to_json({record_of(0, 10, 10), record_of(1, 10, 10)});
  const nlohmann::json telemetry = {{"devices", {{{"memory_used_max_mib", 2048.0}}}}};
  add_nvml_memory_figures(telemetry, 1, memory);
  CHECK_FALSE(memory["devices"][0].contains("nvml_used_max_bytes"));
  CHECK(memory["devices"][1]["nvml_used_max_bytes"] == 2048ll << 20);
  add_nvml_memory_figures({{"available", false}}, 0, memory);  // no telemetry: nothing added
  CHECK_FALSE(memory["devices"][0].contains("nvml_used_max_bytes"));
}

TEST_CASE("the Memory line gives the fullest device's step peak by category and the device's figure",
          "[memory][console]") {
  DeviceMemoryRecord gpu = record_of(0, kGiB / 2, 5 * kGiB);
  gpu.reported_used_bytes = static_cast<int64_t>(6 * kGiB);
  gpu.reported_used_at_creation_bytes = static_cast<int64_t>(kGiB / 4);
  CHECK(describe_memory(memory_summary_to_json({gpu, gpu})) ==
        "peak 5.5 GiB per device in the measured steps: parameters 0.5, activations 5.0; set-up peak 6.0; "
        "device reports 6.0 (0.2 CUDA context and other processes, 0.2 libraries' own and rounding)");
  CHECK(describe_memory(memory_summary_to_json({record_of(0, 1 << 20, 1 << 20), record_of(1, 1 << 20, 3 << 20)})) ==
        "peak 4.0 MiB on device 1 (the fullest of 2) in the measured steps: parameters 1.0, activations 3.0; "
        "set-up peak 516.0");
  CHECK(describe_memory(nlohmann::json::object()).empty());  // a result from before schema 3
}

TEST_CASE("a run's result carries summary.memory whose categories add up to its peaks", "[memory][end_to_end]") {
  TempDir dir;
  const std::string out = dir.file("result.json");
  REQUIRE(run_cli({"--device=cpu", "--model=trivial", "--num_gpus=2", "--batch_size=2", "--num_batches=2",
                   "--num_warmup_batches=1", "--result_file=" + out}) == 0);
  const nlohmann::json result = read_json(out);
  CHECK(result["schema_version"] == 3);
  const nlohmann::json& memory = result["summary"]["memory"];
  REQUIRE(memory["devices"].size() == 2);
  for (const nlohmann::json& device : memory["devices"]) {
    const std::vector<std::pair<const char*, const char*>> totals_and_parts = {
        {"peak_bytes", "at_peak"}, {"step_peak_bytes", "at_step_peak"}, {"steady_bytes", "steady"}};
    for (const auto& [totals, categories] : totals_and_parts) {
      uint64_t sum = 0;
      for (const MemoryCategoryInfo& category : memory_categories())
        sum += device[categories][category.key].get<uint64_t>();
      CHECK(sum == device[totals].get<uint64_t>());
    }
    // The flat buffer holds the parameters and the gaps that align each tensor (fewer than
    // ParameterLayout::kTensorAlignment floats each; trivial has 4 tensors).
    const uint64_t parameters = device["steady"]["parameters"], declared = result["summary"]["num_parameters"];
    CHECK(parameters >= declared * 4);
    CHECK(parameters < (declared + 4 * ParameterLayout::kTensorAlignment) * 4);
    CHECK_FALSE(device.contains("device_reported_bytes"));
  }
}
