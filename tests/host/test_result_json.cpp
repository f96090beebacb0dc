// Result JSON: round trip of every field, rejection of foreign documents, crash-safe writing.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "cli/environment_record.h"
#include "reports/result_json.h"

namespace fs = std::filesystem;
using dpbench::DistributionStats;
using dpbench::Result;
using dpbench::RuntimeError;
using nlohmann::json;

namespace {

DistributionStats make_stats(double base) {
  DistributionStats stats;
  stats.count = 90;
  stats.mean = base + 0.5;
  stats.median = base + 0.25;
  stats.stddev = 0.125;
  stats.min = base;
  stats.max = base + 3.0;
  stats.p5 = base + 0.0625;
  stats.p95 = base + 2.75;
  return stats;
}

Result make_full_result() {
  Result result;
  result.tool_version = "0.1.0";
  result.git_sha = "0123456789ab";
  result.environment.hostname = "node-7";
  result.environment.date = "2024-05-01T12:34:56Z";
  result.environment.backend = "cuda";
  result.environment.devices = {{0, "NVIDIA H100 80GB HBM3", 85899345920ull, "9.0"},
                                {1, "NVIDIA H100 80GB HBM3", 85899345920ull, "9.0"}};
  result.environment.cuda_runtime = "12.4";
  result.environment.cuda_driver = "12.5";
  result.environment.driver = "555.42.06";
  result.environment.cudnn = "9.1.0";
  result.environment.nccl = "2.21.5";
  result.environment.cublas = "12.4.5";
  result.config = {{"model", "resnet50"}, {"batch_size", 64}, {"num_gpus", 2},
                   {"variable_update", "replicated"}, {"use_fp16", false}};
  result.summary.items_per_sec = 2345.678;
  result.summary.unit = "images/s";
  result.summary.total_time_s = 5.4321;
  result.summary.measured_steps = 90;
  result.summary.warmup_steps = 10;
  result.summary.num_devices = 2;
  result.summary.global_batch_size = 128;
  result.summary.items_per_step = 128;
  result.summary.step_time_ms = make_stats(54.0);
  result.summary.items_per_sec_per_step = make_stats(2300.0);
  result.summary.jitter = 12.5;
  result.summary.final_loss = 6.875;
  result.summary.num_parameters = 25557032;
  result.summary.param_norm = 123.456;
  result.summary.comm = {{"bytes_per_device_per_step", 102228128}, {"algbw_gbps", 80.5}};
  result.summary.cuda_graph = true;
  result.summary.kernel_launches_per_step = 1094;
  result.summary.math = "fp16";
  result.summary.loss_scaling = "automatic";
  result.summary.final_loss_scale = 4096;
  result.summary.math_paths = {{"convolutions", {{"shapes", 3}, {"fused_bias_relu", 1}}}};
  result.summary.memory = {{"devices", {{{"device", 0}, {"peak_bytes", 9000}, {"at_peak", {{"parameters", 9000}}}}}},
                           {"peak_bytes", 9000}};
  result.steps = {{0, 120.5, 7.25, true}, {1, 55.0, 7.0, false}, {2, 54.5, 6.875, false}};
  return result;
}

void check_stats_equal(const DistributionStats& a, const DistributionStats& b) {
  CHECK(a.count == b.count);
  CHECK(a.mean == b.mean);
  CHECK(a.median == b.median);
  CHECK(a.stddev == b.stddev);
  CHECK(a.min == b.min);
  CHECK(a.max == b.max);
  CHECK(a.p5 == b.p5);
  CHECK(a.p95 == b.p95);
}

// Doubles are compared exactly: nlohmann writes the shortest representation that round-trips.
void check_results_equal(const Result& a, const Result& b) {
  CHECK(a.schema_version == b.schema_version);
  CHECK(a.tool_version == b.tool_version);
  CHECK(a.git_sha == b.git_sha);
  CHECK(a.environment.hostname == b.environment.hostname);
  CHECK(a.environment.date == b.environment.date);
  CHECK(a.environment.backend == b.environment.backend);
  REQUIRE(a.environment.devices.size() == b.environment.devices.size());
  for (size_t i = 0; i < a.environment.devices.size(); ++i) {
    CHECK(a.environment.devices[i].index == b.environment.devices[i].index);
    CHECK(a.environment.devices[i].name == b.environment.devices[i].name);
    CHECK(a.environment.devices[i].memory_bytes == b.environment.devices[i].memory_bytes);
    CHECK(a.environment.devices[i].compute_capability ==
          b.environment.devices[i].compute_capability);
  }
  CHECK(a.environment.cuda_runtime == b.environment.cuda_runtime);
  CHECK(a.environment.cuda_driver == b.environment.cuda_driver);
  CHECK(a.environment.driver == b.environment.driver);
  CHECK(a.environment.cudnn == b.environment.cudnn);
  CHECK(a.environment.nccl == b.environment.nccl);
  CHECK(a.environment.cublas == b.environment.cublas);
  CHECK(a.config == b.config);
  CHECK(a.summary.items_per_sec == b.summary.items_per_sec);
  CHECK(a.summary.unit == b.summary.unit);
  CHECK(a.summary.total_time_s == b.summary.total_time_s);
  CHECK(a.summary.measured_steps == b.summary.measured_steps);
  CHECK(a.summary.warmup_steps == b.summary.warmup_steps);
  CHECK(a.summary.num_devices == b.summary.num_devices);
  CHECK(a.summary.global_batch_size == b.summary.global_batch_size);
  CHECK(a.summary.items_per_step == b.summary.items_per_step);
  REQUIRE(a.summary.step_time_ms.has_value() == b.summary.step_time_ms.has_value());
  if (a.summary.step_time_ms) check_stats_equal(*a.summary.step_time_ms, *b.summary.step_time_ms);
  REQUIRE(a.summary.items_per_sec_per_step.has_value() ==
          b.summary.items_per_sec_per_step.has_value());
  if (a.summary.items_per_sec_per_step) {
    check_stats_equal(*a.summary.items_per_sec_per_step, *b.summary.items_per_sec_per_step);
  }
  CHECK(a.summary.jitter == b.summary.jitter);
  CHECK(a.summary.final_loss == b.summary.final_loss);
  CHECK(a.summary.num_parameters == b.summary.num_parameters);
  CHECK(a.summary.param_norm == b.summary.param_norm);
  CHECK(a.summary.comm == b.summary.comm);
  CHECK(a.summary.cuda_graph == b.summary.cuda_graph);
  CHECK(a.summary.kernel_launches_per_step == b.summary.kernel_launches_per_step);
  CHECK(a.summary.math == b.summary.math);
  CHECK(a.summary.loss_scaling == b.summary.loss_scaling);
  CHECK(a.summary.final_loss_scale == b.summary.final_loss_scale);
  CHECK(a.summary.math_paths == b.summary.math_paths);
  CHECK(a.summary.memory == b.summary.memory);
  REQUIRE(a.steps.size() == b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    CHECK(a.steps[i].step == b.steps[i].step);
    CHECK(a.steps[i].time_ms == b.steps[i].time_ms);
    CHECK(a.steps[i].loss == b.steps[i].loss);
    CHECK(a.steps[i].warmup == b.steps[i].warmup);
  }
}

// A fresh directory per test, removed afterwards, so tests never see each other's files.
struct ScratchDirectory {
  fs::path path;
  ScratchDirectory() {
    std::string pattern = (fs::temp_directory_path() / "dpbench_result_json_XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(path)) names.push_back(entry.path().filename());
    return names;
  }
};

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

}  // namespace

TEST_CASE("result JSON has the DESIGN section 6 shape", "[result_json]") {
  const json document = dpbench::result_to_json(make_full_result());
  CHECK(document.at("schema_version") == 3);
  CHECK(document.at("tool").at("git_sha") == "0123456789ab");
  const json& environment = document.at("environment");
  for (const char* key : {"hostname", "date", "backend", "devices", "cuda", "cuda_driver",
                          "driver", "cudnn", "nccl", "cublas"}) {
    CHECK(environment.contains(key));
  }
  CHECK(environment.at("cuda") == "12.4");
  CHECK(environment.at("devices").at(1).at("index") == 1);
  CHECK(environment.at("devices").at(0).at("memory_bytes") == 85899345920ull);
  CHECK(document.at("config").at("model") == "resnet50");
  const json& summary = document.at("summary");
  for (const char* key : {"items_per_sec", "unit", "total_time_s", "measured_steps",
                          "warmup_steps", "num_devices", "global_batch_size", "items_per_step",
                          "step_time_ms", "items_per_sec_per_step", "jitter", "final_loss",
                          "num_parameters", "param_norm", "comm", "cuda_graph", "math", "loss_scaling",
                          "final_loss_scale", "math_paths", "kernel_launches_per_step"}) {
    CHECK(summary.contains(key));
  }
  for (const char* key : {"count", "mean", "median", "stddev", "min", "max", "p5", "p95"}) {
    CHECK(summary.at("step_time_ms").contains(key));
  }
  CHECK(summary.at("step_time_ms").at("count") == 90);
  CHECK(document.at("steps").size() == 3);
  CHECK(document.at("steps").at(0) ==
        json({{"step", 0}, {"time_ms", 120.5}, {"loss", 7.25}, {"warmup", true}}));
}

TEST_CASE("result JSON round trip keeps every field", "[result_json]") {
  const Result original = make_full_result();
  check_results_equal(dpbench::result_from_json(dpbench::result_to_json(original)), original);
  // Through text as well, as a result file goes.
  const json reparsed = json::parse(dpbench::result_to_json(original).dump(2));
  check_results_equal(dpbench::result_from_json(reparsed), original);
}

TEST_CASE("result JSON round trip of absent aggregates", "[result_json]") {
  Result original = make_full_result();
  original.summary.step_time_ms.reset();
  original.summary.items_per_sec_per_step.reset();
  original.summary.jitter.reset();
  original.environment.devices.clear();
  original.environment.driver = "";
  original.steps.resize(1);
  const json document = dpbench::result_to_json(original);
  CHECK(document.at("summary").at("step_time_ms").is_null());
  CHECK(document.at("summary").at("items_per_sec_per_step").is_null());
  CHECK(document.at("summary").at("jitter").is_null());
  check_results_equal(dpbench::result_from_json(json::parse(document.dump())), original);
}

TEST_CASE("non-finite doubles are written as null and read back as NaN", "[result_json]") {
  Result original = make_full_result();
  original.summary.final_loss = std::numeric_limits<double>::quiet_NaN();
  original.summary.param_norm = std::numeric_limits<double>::infinity();
  original.steps[2].loss = std::numeric_limits<double>::quiet_NaN();
  original.steps[1].time_ms = -std::numeric_limits<double>::infinity();
  const std::string text = dpbench::result_to_json(original).dump();
  const json document = json::parse(text);
  CHECK(document.at("summary").at("final_loss").is_null());
  CHECK(document.at("summary").at("param_norm").is_null());
  CHECK(document.at("steps").at(2).at("loss").is_null());
  const Result read_back = dpbench::result_from_json(document);
  CHECK(std::isnan(read_back.summary.final_loss));
  CHECK(std::isnan(read_back.summary.param_norm));
  CHECK(std::isnan(read_back.steps[2].loss));
  CHECK(std::isnan(read_back.steps[1].time_ms));
  CHECK(read_back.steps[0].loss == 7.25);
}

TEST_CASE("documents that are not dpbench results are rejected", "[result_json]") {
  const json valid = dpbench::result_to_json(make_full_result());

  CHECK_THROWS_WITH(dpbench::result_from_json(json::array()),
                    "not a dpbench result: expected a JSON object, got array");
  for (const char* key : {"schema_version", "summary", "steps", "tool", "environment", "config"}) {
    json document = valid;
    document.erase(key);
    CHECK_THROWS_WITH(dpbench::result_from_json(document),
                      std::string("not a dpbench result: missing key '") + key + "'");
  }
  json missing_nested = valid;
  missing_nested["summary"].erase("unit");
  CHECK_THROWS_WITH(dpbench::result_from_json(missing_nested),
                    "not a dpbench result: missing key 'summary.unit'");
  json wrong_type = valid;
  wrong_type["steps"][1]["time_ms"] = "55";
  CHECK_THROWS_WITH(
      dpbench::result_from_json(wrong_type),
      "not a dpbench result: 'steps[1].time_ms' is string, expected a number or null");
  json fractional_count = valid;
  fractional_count["summary"]["measured_steps"] = 90.5;
  CHECK_THROWS_AS(dpbench::result_from_json(fractional_count), RuntimeError);
}

TEST_CASE("other schema versions are rejected, version 1 and 2 results still read", "[result_json]") {
  json document = dpbench::result_to_json(make_full_result());
  document["summary"].erase("memory");  // versions 1 and 2 had no memory accounting
  document["schema_version"] = 2;
  CHECK(dpbench::result_from_json(document).summary.memory.empty());
  document["schema_version"] = 1;
  document["summary"]["comm"]["messages_per_step"] = 3;  // what version 1 also wrote
  CHECK(dpbench::result_from_json(document).summary.items_per_sec == make_full_result().summary.items_per_sec);
  document["schema_version"] = 4;
  CHECK_THROWS_WITH(dpbench::result_from_json(document),
                    "result schema_version 4 is not supported (this dpbench reads 1 to 3)");
  document["schema_version"] = 0;
  CHECK_THROWS_AS(dpbench::result_from_json(document), RuntimeError);
  document["schema_version"] = "1";
  CHECK_THROWS_AS(dpbench::result_from_json(document), RuntimeError);
}

TEST_CASE("written result files read back and leave no temporary files", "[result_json]") {
  ScratchDirectory scratch;
  const std::string path = (scratch.path / "result.json").string();
  const Result original = make_full_result();
  dpbench::write_result_atomically(original, path);
  CHECK(scratch.entries() == std::vector<std::string>{"result.json"});
  check_results_equal(dpbench::read_result_file(path), original);

  // Overwriting replaces the whole file: a shorter result leaves no tail of the longer one.
  Result shorter = original;
  shorter.steps.clear();
  dpbench::write_result_atomically(shorter, path);
  CHECK(scratch.entries() == std::vector<std::string>{"result.json"});
  CHECK(dpbench::read_result_file(path).steps.empty());
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == dpbench::result_to_json(shorter).dump(2) + "\n");
}

TEST_CASE("a failed write throws and creates nothing", "[result_json]") {
  ScratchDirectory scratch;
  const fs::path missing_directory = scratch.path / "no_such_directory";
  const std::string path = (missing_directory / "result.json").string();
  CHECK_THROWS_AS(dpbench::write_result_atomically(make_full_result(), path), RuntimeError);
  CHECK_THROWS_WITH(dpbench::write_result_atomically(make_full_result(), path),
                    Catch::Contains(path) && Catch::Contains("does not exist"));
  CHECK_FALSE(fs::exists(missing_directory));
  CHECK(scratch.entries().empty());

  // A directory at the path is refused before anything is written: no temporary file, the
  // directory untouched.
  const fs::path occupied = scratch.path / "occupied";
  fs::create_directory(occupied);
  CHECK_THROWS_WITH(dpbench::write_result_atomically(make_full_result(), occupied.string()),
                    Catch::Contains(occupied.string()) && Catch::Contains("is a directory"));
  CHECK(scratch.entries() == std::vector<std::string>{"occupied"});
  CHECK(fs::is_empty(occupied));
}

TEST_CASE("reading a bad result file names the file", "[result_json]") {
  ScratchDirectory scratch;
  const std::string missing = (scratch.path / "missing.json").string();
  CHECK_THROWS_WITH(dpbench::read_result_file(missing),
                    Catch::Contains(missing) && Catch::Contains("does not exist"));

  const std::string invalid = (scratch.path / "invalid.json").string();
  write_text(invalid, "{\"schema_version\": 1, \"summary\": ");
  CHECK_THROWS_WITH(dpbench::read_result_file(invalid),
                    Catch::Contains(invalid) && Catch::Contains("not valid JSON"));

  const std::string foreign = (scratch.path / "foreign.json").string();
  write_text(foreign, "{\"schema_version\": 1, \"steps\": []}");
  CHECK_THROWS_WITH(dpbench::read_result_file(foreign),
                    Catch::Contains(foreign) &&
                        Catch::Contains("not a dpbench result: missing key 'summary'"));

  CHECK_THROWS_WITH(dpbench::read_result_file(scratch.path.string()),
                    Catch::Contains(scratch.path.string()));
}

TEST_CASE("a result written before summary.cuda_graph existed reads as no graphs", "[result_json]") {
  nlohmann::json document = dpbench::result_to_json(dpbench::Result{});
  document["summary"].erase("cuda_graph");
  CHECK_FALSE(dpbench::result_from_json(document).summary.cuda_graph);
}

TEST_CASE("a reference-backend run records no CUDA library versions, and reads back without them", "[result_json]") {
  const dpbench::EnvironmentRecord reference =
      dpbench::describe_environment(dpbench::BackendKind::reference, {dpbench::DeviceDescription{0, "host", 0, ""}});
  const json environment = dpbench::environment_to_json(reference);
  CHECK(environment.at("backend") == "reference");
  for (const char* key : {"cuda", "cuda_driver", "driver", "cudnn", "nccl", "cublas"}) CHECK_FALSE(environment.contains(key));

  dpbench::Result result = make_full_result();
  result.environment = reference;
  const dpbench::Result back = dpbench::result_from_json(dpbench::result_to_json(result));
  CHECK(back.environment.backend == "reference");
  CHECK(back.environment.cudnn.empty());
  CHECK(back.environment.cuda_runtime.empty());
}
