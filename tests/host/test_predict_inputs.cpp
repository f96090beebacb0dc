// What `dpbench predict` reads of its results (cli/predict_inputs.h): a BASE with a number no run
// writes refused, naming the field; --bucket_cap_mb held to the range `run` takes; measured runs
// of another workload than BASE's, or of other buckets, named and not compared; repeated runs of
// one strategy and GPU count used as their median with the spread, whatever their order; a file
// holding 1e400 named while the others are used; a multi-process run compared with the rows of
// the one-process strategy that issues the same schedule.
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include "cli/predict_command.h"
#include "cli/predict_inputs.h"
#include "engine/errors.h"
#include "reports/text_file.h"
#include "tests/host/report_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

const std::string kSystem = std::string(DPBENCH_SOURCE_DIR) + "/systems/reference_backend.json";

// A trivial run on reference devices at `speed` images/s, `flags` added.
Result reference_run(int gpus, double speed, std::vector<std::string> flags = {}) {
  flags.insert(flags.begin(), {"--model=trivial", "--variable_update=replicated"});
  FixtureRun run = run_of(flags, gpus, speed);
  run.backend = "reference";
  return make_fixture_result(run);
}

// BASE: a 1-device run whose timeline has three tensors (1000, 2000 and 3000 elements, laid out
// at 0, 1024 and 3072) produced 1, 3 and 4.5 ms into a 5 ms backward of a 10 ms step.
json base_json() {
  Result result = reference_run(1, 1000);
  const BackwardTimeline timeline =
      ten_ms_step_timeline({1000, 2000, 3000}, {{0, 1000, 1.0}, {1024, 2000, 3.0}, {3072, 3000, 4.5}});
  result.summary.num_parameters = 6000;
  result.summary.timeline = backward_timeline_to_json(timeline);
  return result_to_json(result);
}

void write_json(const std::string& path, const json& document) { std::ofstream(path) << document.dump(); }

std::string base_error(const std::string& path) {
  return error_message_of<RuntimeError>([&] { load_predict_base(path, ""); }, "RuntimeError");
}

// predict's JSON output for `args` (BASE and MEASURED paths, then flags).
json predicted(const TempDir& dir, std::vector<std::string> args) {
  const std::string output = dir.file("predicted.json");
  args.insert(args.begin(), "predict");
  for (const char* flag : {"--system", "--max_gpus=4", "--format=json", "--output"}) args.push_back(flag);
  args.insert(args.end() - 3, kSystem);
  args.push_back(output);
  REQUIRE(run_cli(args) == 0);
  return json::parse(read_text_file(output));
}

const json& row_of(const json& document, const std::string& strategy, int gpus) {
  for (const json& row : document["rows"])
    if (row["strategy"] == strategy && row["gpu_number"] == gpus) return row;
  FAIL("no row " << strategy << " " << gpus);
  return document;
}

std::string notes_of(const json& document) {
  std::string text;
  for (const json& note : document["notes"]) text += note.get<std::string>() + "\n";
  return text;
}

}  // namespace

TEST_CASE("predict refuses a BASE holding a number no run writes, naming the field", "[predict]") {
  TempDir dir;
  write_json(dir.file("good.json"), base_json());
  CHECK(base_error(dir.file("good.json")) == "(no RuntimeError)");
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& d) { d["summary"]["timeline"]["step_ms"] = 0; }, "summary.timeline.step_ms is 0, impossible"},
      {[](json& d) { d["summary"]["timeline"]["step_ms"] = 1; },
       "summary.timeline.step_ms is 1 ms, shorter than its parts (forward 3 + backward 5 + after backward 2 ms)"},
      {[](json& d) { d["summary"]["timeline"]["forward_ms"] = 1e300; }, "summary.timeline.forward_ms is 1e+300"},
      {[](json& d) { d["summary"]["timeline"]["backward_ms"] = -1; }, "summary.timeline.backward_ms is -1"},
      {[](json& d) { d["summary"]["timeline"]["after_backward_ms"] = nullptr; },
       "summary.timeline.after_backward_ms is null"},
      {[](json& d) { d["summary"]["timeline"]["traced_steps"] = uint64_t{10000000000000000000u}; },
       "summary.timeline.traced_steps is 10000000000000000000, impossible for a run"},
      {[](json& d) { d["summary"]["timeline"]["traced_steps"] = -3; }, "summary.timeline.traced_steps is -3"},
      {[](json& d) { d["summary"]["timeline"]["traced_steps"] = 2.5; }, "summary.timeline.traced_steps is 2.5"},
      {[](json& d) { d["summary"]["timeline"]["traced_steps"] = 500; },
       "summary.timeline.traced_steps 500 is more than summary.measured_steps 100"},
      {[](json& d) { d["summary"]["timeline"]["gradient_element_bytes"] = 0; },
       "summary.timeline.gradient_element_bytes is 0, impossible for a run (expected a whole number from 1 to 8)"},
      {[](json& d) { d["summary"]["timeline"]["gradient_element_bytes"] = 1e19; },
       "summary.timeline.gradient_element_bytes is 1e+19"},
      {[](json& d) { d["summary"]["timeline"]["tensor_elements"] = json::array(); },
       "summary.timeline.tensor_elements is not a non-empty array"},
      {[](json& d) { d["summary"]["timeline"]["tensor_elements"] = {int64_t{1} << 48, int64_t{1} << 48}; },
       "summary.timeline.tensor_elements add up to more than 281474976710656 elements"},
      {[](json& d) { d["summary"]["timeline"]["tensor_elements"][1] = 0; },
       "summary.timeline.tensor_elements[1] is 0, not a tensor size"},
      {[](json& d) { d["summary"]["timeline"]["tensor_elements"][2] = 3001; },
       "summary.timeline.tensor_elements add up to 6001 elements, but summary.num_parameters is 6000"},
      {[](json& d) { d["summary"]["timeline"]["produced"][1]["ready_ms"] = 50; },
       "summary.timeline.produced[1].ready_ms is 50 ms, after the step's end (10 ms)"},
      {[](json& d) { d["summary"]["timeline"]["produced"][2]["offset"] = 4000; },
       "summary.timeline.produced[2] (offset 4000, count 3000) ends past the gradient buffer of its tensors "
       "(6072 elements)"},
      {[](json& d) { d["summary"]["timeline"]["produced"][0]["count"] = 0; },
       "summary.timeline.produced[0].count is 0"},
      {[](json& d) { d["config"]["bucket_cap_mb"] = -1; },
       "config.bucket_cap_mb is -1, impossible for a run (--bucket_cap_mb must be at least 0"},
      {[](json& d) { d["config"]["bucket_cap_mb"] = 1e13; },
       "config.bucket_cap_mb is 10000000000000.0, impossible for a run (--bucket_cap_mb too large; accepted: up to "
       "1048576"},
      {[](json& d) { d["config"]["bucket_cap_mb"] = "big"; }, "config.bucket_cap_mb is \"big\", not a number"},
      {[](json& d) { d["config"]["tail_bucket_mb"] = 30; },
       "config.tail_bucket_mb is 30, impossible for a run (expected 0 to its --bucket_cap_mb, 25)"},
      // A forward-only run has no backward to predict from, whatever else it holds.
      {[](json& d) { d["config"]["forward_only"] = true; },
       " is a forward-only run (--forward_only): it has no backward, whose gradients the prediction exchanges; "
       "rerun it without --forward_only"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [edit, expected] = cases[i];
    INFO("case " << i << ": " << expected);
    json document = base_json();
    edit(document);
    const std::string path = dir.file("base" + std::to_string(i) + ".json");
    write_json(path, document);
    const std::string error = base_error(path);
    CHECK_THAT(error, Catch::StartsWith("predict: BASE '" + path + "'") && Contains(expected));
    // The command fails with it and writes nothing.
    CHECK(run_cli({"predict", path, "--system", kSystem, "--output", dir.file("out.md")}) == 1);
    CHECK_FALSE(std::filesystem::exists(dir.file("out.md")));
  }
}

TEST_CASE("predict takes the --bucket_cap_mb values run takes, refusing the others with run's words", "[predict]") {
  TempDir dir;
  write_json(dir.file("base.json"), base_json());
  auto predict_error = [&](const std::string& cap) {
    return error_message_of<ConfigError>(
        [&] { parse_predict_flags({dir.file("base.json"), "--system", kSystem, "--bucket_cap_mb=" + cap}); },
        "ConfigError");
  };
  auto run_error = [](const std::string& cap) {
    return error_message_of<ConfigError>(
        [&] { parse_run_flags({"--variable_update=replicated", "--bucket_cap_mb=" + cap}, DeviceInventory{8, ""}); },
        "ConfigError");
  };
  for (const char* cap : {"1048577", "1e13", "9e12", "-1", "-0.5"}) {
    INFO(cap);
    CHECK(predict_error(cap) == run_error(cap));
    CHECK(predict_error(cap) != "(no ConfigError)");
  }
  CHECK_THAT(predict_error("1048577"), Contains("--bucket_cap_mb=1048577: too large; accepted: up to 1048576"));
  for (const char* cap : {"0", "0.5", "25", "1048576"}) {
    INFO(cap);
    CHECK(predict_error(cap) == "(no ConfigError)");
  }
  // 0 predicts one exchange per tensor: three buckets of the three tensors.
  const json document = predicted(dir, {dir.file("base.json"), "--bucket_cap_mb=0"});
  CHECK_THAT(document["base"]["timeline"].get<std::string>(), Contains("3 bucket(s) of --bucket_cap_mb=0"));
}

TEST_CASE("predict uses every measured run of a strategy and count: the median, with the spread, in any order",
          "[predict]") {
  TempDir dir;
  write_json(dir.file("base.json"), base_json());
  write_result_atomically(reference_run(2, 1500), dir.file("a.json"));
  write_result_atomically(reference_run(2, 1800), dir.file("b.json"));
  write_result_atomically(reference_run(2, 1600), dir.file("c.json"));
  write_result_atomically(reference_run(4, 3000), dir.file("d.json"));
  write_result_atomically(reference_run(4, 2000), dir.file("e.json"));
  const json forward = predicted(dir, {dir.file("base.json"), dir.file("a.json"), dir.file("b.json"),
                                       dir.file("c.json"), dir.file("d.json"), dir.file("e.json")});
  const json backward = predicted(dir, {dir.file("base.json"), dir.file("e.json"), dir.file("d.json"),
                                        dir.file("c.json"), dir.file("b.json"), dir.file("a.json")});
  CHECK(forward == backward);
  const json& two = row_of(forward, "replicated (nccl)", 2);
  CHECK(two["measured_items_per_sec"] == 1600.0);
  CHECK(two["measured_file"] == dir.file("c.json"));
  CHECK(two["measured_runs"] == 3);
  CHECK(two["measured_min_items_per_sec"] == 1500.0);
  CHECK(two["measured_max_items_per_sec"] == 1800.0);
  CHECK(two["measured_files"] == json({dir.file("a.json"), dir.file("c.json"), dir.file("b.json")}));
  // Of an even count the slower middle run, as report picks it.
  CHECK(row_of(forward, "replicated (nccl)", 4)["measured_items_per_sec"] == 2000.0);
  CHECK_THAT(notes_of(forward), Contains("replicated (nccl), 2 GPUs: 3 measured runs; the error is the median run's (`" +
                                         dir.file("c.json") + "`)"));
  // The markdown shows the spread beside the median.
  REQUIRE(run_cli({"predict", dir.file("base.json"), dir.file("a.json"), dir.file("b.json"), dir.file("c.json"),
                   "--system", kSystem, "--max_gpus=2", "--output", dir.file("predicted.md")}) == 0);
  CHECK_THAT(read_text_file(dir.file("predicted.md")), Contains("| 1600.0 (median of 3: 1500.0 to 1800.0) |"));
}

TEST_CASE("predict compares only runs of BASE's workload and buckets, naming what differs", "[predict]") {
  TempDir dir;
  write_json(dir.file("base.json"), base_json());
  write_result_atomically(reference_run(2, 1500, {"--optimizer=momentum"}), dir.file("momentum.json"));
  write_result_atomically(reference_run(2, 1500, {"--batch_size=8"}), dir.file("batch.json"));
  write_result_atomically(reference_run(2, 1500, {"--bucket_cap_mb=50"}), dir.file("buckets.json"));
  write_result_atomically(reference_run(2, 1400), dir.file("same.json"));
  const json document = predicted(dir, {dir.file("base.json"), dir.file("momentum.json"), dir.file("batch.json"),
                                        dir.file("buckets.json"), dir.file("same.json")});
  const std::string notes = notes_of(document);
  CHECK_THAT(notes, Contains("not compared: `" + dir.file("momentum.json") +
                             "`: another workload than BASE: it differs in optimizer (BASE sgd; MEASURED momentum)"));
  CHECK_THAT(notes, Contains("not compared: `" + dir.file("batch.json") +
                             "`: another workload than BASE: it differs in batch_size (BASE 64; MEASURED 8)"));
  CHECK_THAT(notes, Contains("not compared: `" + dir.file("buckets.json") +
                             "`: its buckets (--bucket_cap_mb=50) are not those predicted (25); give "
                             "--bucket_cap_mb=50 to compare with it"));
  const json& two = row_of(document, "replicated (nccl)", 2);
  CHECK(two["measured_runs"] == 1);
  CHECK(two["measured_file"] == dir.file("same.json"));
  // Predicting the buckets it ran compares it.
  const json at_50 = predicted(dir, {dir.file("base.json"), dir.file("buckets.json"), "--bucket_cap_mb=50"});
  CHECK(row_of(at_50, "replicated (nccl)", 2)["measured_file"] == dir.file("buckets.json"));
}

TEST_CASE("predict names a file holding 1e400 and uses the others", "[predict]") {
  TempDir dir;
  std::string text = base_json().dump();
  write_text_atomically(dir.file("base.json"), text);
  text.replace(text.find("\"final_loss\":"), 13, "\"final_loss\":1e400,\"x\":");
  write_text_atomically(dir.file("huge_base.json"), text);
  CHECK(base_error(dir.file("huge_base.json")) ==
        "predict: BASE '" + dir.file("huge_base.json") +
            "': holds the number 1e400, beyond the range of a double (no file dpbench writes)");
  write_result_atomically(reference_run(2, 1500), dir.file("good.json"));
  std::string measured = result_to_json(reference_run(2, 1500)).dump();
  measured.replace(measured.find("\"param_norm\":"), 13, "\"param_norm\":-1e400,\"x\":");
  write_text_atomically(dir.file("huge.json"), measured);
  const json document = predicted(dir, {dir.file("base.json"), dir.file("good.json"), dir.file("huge.json")});
  CHECK(row_of(document, "replicated (nccl)", 2)["measured_file"] == dir.file("good.json"));
  CHECK_THAT(notes_of(document), Contains("skipped `" + dir.file("huge.json") +
                                          "`: holds the number -1e400, beyond the range of a double"));
}

TEST_CASE("predict compares a multi-process run with the rows of the one-process strategy issuing its schedule",
          "[predict]") {
  TempDir dir;
  write_json(dir.file("base.json"), base_json());
  json distributed = result_to_json(reference_run(2, 1500));
  distributed["config"]["variable_update"] = "distributed_all_reduce";
  write_json(dir.file("distributed.json"), distributed);
  const json document = predicted(dir, {dir.file("base.json"), dir.file("distributed.json")});
  CHECK(row_of(document, "replicated (nccl)", 2)["measured_file"] == dir.file("distributed.json"));
  CHECK_THAT(notes_of(document), !Contains("not compared"));
  // Without a one-process twin a strategy's runs stay its own: an unknown one is not predicted.
  distributed["config"]["variable_update"] = "no_such_strategy";
  write_json(dir.file("unknown.json"), distributed);
  const json unknown = predicted(dir, {dir.file("base.json"), dir.file("unknown.json")});
  CHECK_THAT(notes_of(unknown), Contains("not compared: `" + dir.file("unknown.json") + "`: its strategy"));
}
