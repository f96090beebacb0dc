// `dpbench predict --num_layers` (Note [deeper model from its blocks] in cli/predict_deeper_model.h)
// on the reference backend: a traced 2-block gpt predicted at 4 and 6 blocks against runs of
// those depths (its tensors, units and parameter count exact; memory per category within 5% on
// one device and under fully_sharded on two; the predicted 1-device step linear in the blocks),
// and the models and depths it refuses.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/predict_inputs.h"
#include "engine/errors.h"
#include "engine/machine/memory_ledger.h"
#include "tests/host/test_support.h"

using namespace dpbench;
using dpbench::testing::error_message_of;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;
using json = nlohmann::json;

namespace {

const std::string kSystem = std::string(DPBENCH_SOURCE_DIR) + "/systems/reference_backend.json";

// A small gpt of `layers` blocks on `devices` reference devices, its result written to `result`;
// traced (summary.timeline) where `traced`.
void run_gpt(const TempDir& dir, int layers, int devices, const std::string& strategy, bool traced,
             const std::string& result) {
  std::vector<std::string> args = {"--device=cpu",        "--model=gpt",          "--num_layers=" + std::to_string(layers),
                                   "--hidden_size=64",    "--num_heads=2",        "--seq_len=32",
                                   "--vocab_size=512",    "--batch_size=2",       "--num_warmup_batches=3",
                                   "--num_batches=20",    "--num_gpus=" + std::to_string(devices),
                                   "--variable_update=" + strategy, "--result_file=" + result};
  // 20 traced steps: a mean the machine's other work moves less.
  if (traced)
    args.insert(args.end(), {"--trace_file=" + dir.file("trace_" + std::to_string(layers) + ".json"), "--trace_steps=1:20"});
  REQUIRE(run_cli(args) == 0);
}

// A traced 1-device run of `layers` blocks: its result file.
std::string traced_run(const TempDir& dir, int layers) {
  const std::string path = dir.file("traced_" + std::to_string(layers) + ".json");
  run_gpt(dir, layers, 1, "independent", true, path);
  return path;
}

// predict's JSON for BASE at `layers` blocks, up to 2 GPUs.
json predicted_at(const TempDir& dir, const std::string& base, int layers) {
  const std::string output = dir.file("predicted_" + std::to_string(layers) + ".json");
  REQUIRE(run_cli({"predict", base, "--system", kSystem, "--max_gpus=2", "--num_layers=" + std::to_string(layers),
                   "--format=json", "--output", output}) == 0);
  return read_json(output);
}

const json& row_of(const json& document, const std::string& strategy, int gpus) {
  for (const json& row : document["rows"])
    if (row["strategy"] == strategy && row["gpu_number"] == gpus) return row;
  FAIL("no row " << strategy << " " << gpus);
  return document;
}

// The measured steps' bytes of `result`'s fullest device, by category.
json measured_categories(const json& result) {
  json fullest;
  double most = -1;
  for (const json& device : result["summary"]["memory"]["devices"])
    if (device["step_peak_bytes"].get<double>() > most) {
      most = device["step_peak_bytes"].get<double>();
      fullest = device["at_step_peak"];
    }
  return fullest;
}

void check_memory_within_5_percent(const json& predicted_row, const json& measured_result) {
  const json& predicted = predicted_row["memory"]["categories"];
  const json measured = measured_categories(measured_result);
  for (const MemoryCategoryInfo& category : memory_categories()) {
    INFO(predicted_row["strategy"].get<std::string>() << " on " << predicted_row["gpu_number"] << ": " << category.key);
    const double want = measured.value(category.key, 0.0), got = predicted.value(category.key, 0.0);
    CHECK(std::abs(got - want) <= 0.05 * want);
  }
}

size_t blocks_of(const ParameterUnits& units) {
  return static_cast<size_t>(std::count_if(units.units.begin(), units.units.end(),
                                           [](const ParameterUnit& unit) { return unit.name.rfind("block ", 0) == 0; }));
}

}  // namespace

TEST_CASE("a 2-block gpt predicted at 4 and 6 blocks has their tensors, memory and a step linear in the blocks",
          "[predict][deeper_model]") {
  TempDir dir;
  const std::string base = traced_run(dir, 2);
  std::vector<double> steps_ms;  // predicted on 1 device at 4 and 6 blocks
  for (int layers : {4, 6}) {
    INFO(layers << " blocks");
    const std::string name = std::to_string(layers);
    run_gpt(dir, layers, 1, "replicated", false, dir.file("one_" + name + ".json"));
    run_gpt(dir, layers, 2, "fully_sharded", false, dir.file("sharded_" + name + ".json"));
    const json traced = read_json(traced_run(dir, layers));

    // The scaled base: the deeper model's tensors, units and parameter count, exactly.
    const PredictBase scaled = load_predict_base(base, "", layers);
    REQUIRE(scaled.depth);
    CHECK(scaled.depth->text() == "--num_layers=" + name + ", scaled from BASE's 2 blocks");
    const BackwardTimeline measured = backward_timeline_from_json(traced["summary"]["timeline"]);
    CHECK(scaled.loaded.result.summary.num_parameters == traced["summary"]["num_parameters"].get<int64_t>());
    CHECK(scaled.timeline.tensor_elements == measured.tensor_elements);
    CHECK(blocks_of(scaled.timeline.units) == static_cast<size_t>(layers));
    REQUIRE(scaled.timeline.units.units.size() == measured.units.units.size());
    for (size_t u = 0; u < measured.units.units.size(); ++u) {
      CHECK(scaled.timeline.units.units[u].name == measured.units.units[u].name);
      CHECK(scaled.timeline.units.units[u].range.offset == measured.units.units[u].range.offset);
      CHECK(scaled.timeline.units.units[u].range.count == measured.units.units[u].range.count);
    }
    CHECK(scaled.timeline.units.uses.size() == measured.units.uses.size());
    CHECK(scaled.loaded.result.config["num_layers"] == layers);

    const json predicted = predicted_at(dir, base, layers);
    CHECK(predicted["depth"]["scaled"] == scaled.depth->text());
    check_memory_within_5_percent(row_of(predicted, "replicated (nccl)", 1), read_json(dir.file("one_" + name + ".json")));
    check_memory_within_5_percent(row_of(predicted, "fully_sharded", 2), read_json(dir.file("sharded_" + name + ".json")));
    steps_ms.push_back(row_of(predicted, "replicated (nccl)", 1)["step_ms"].get<double>());
  }
  // The step grows by the same time for each pair of blocks added (2 -> 4 -> 6), and by more than
  // nothing: every number comes from one BASE, so this holds to rounding whatever the machine's
  // load (how close it comes to a measured step is the GPU's to show, docs/BENCHMARKS.md).
  const double base_step = read_json(base)["summary"]["timeline"]["step_ms"].get<double>();
  REQUIRE(steps_ms.size() == 2);
  INFO("1-device steps: " << base_step << " (BASE), " << steps_ms[0] << ", " << steps_ms[1] << " ms");
  CHECK(steps_ms[0] > base_step);
  CHECK(steps_ms[1] - steps_ms[0] == Approx(steps_ms[0] - base_step).epsilon(0.01));
}

TEST_CASE("predict refuses --num_layers for a model not built of repeated blocks, and below 1",
          "[predict][deeper_model]") {
  TempDir dir;
  const std::string base = dir.file("trivial.json");
  REQUIRE(run_cli({"--device=cpu", "--model=trivial", "--batch_size=4", "--num_warmup_batches=1", "--num_batches=2",
                   "--trace_file=" + dir.file("trace.json"), "--result_file=" + base}) == 0);
  CHECK(error_message_of<RuntimeError>([&] { load_predict_base(base, "", 4); }, "RuntimeError") ==
        "predict: BASE '" + base + "': --num_layers scales a model built of identical blocks, and --model=trivial is "
        "not; it is taken for gpt (its transformer blocks)");
  CHECK(run_cli({"predict", base, "--system", kSystem, "--num_layers=0"}) == 2);
  CHECK(run_cli({"predict", base, "--system", kSystem, "--num_layers=4"}) == 1);
}
