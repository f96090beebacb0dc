// Reference results (reports/reference_results.h, cli/reference_lookup.h; README, "Is my number
// normal?"): hand-made GPU results matched with references of one workload and refused for each
// kind of mismatch, the reference chosen among several, the machine differences named, the
// ratio and verdict, the console's lines, summary.reference through the result file, the folder
// found from the build tree or an install, `dpbench compare --reference` and its exit codes; and
// every reference dpbench ships: a real GPU run with its provenance, found again by the command
// that made it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/compare_command.h"
#include "cli/console.h"
#include "cli/reference_lookup.h"
#include "cli/strategies_command.h"
#include "reports/comparison_tables.h"
#include "reports/reference_results.h"
#include "reports/result_comparison.h"
#include "reports/text_file.h"
#include "tests/host/report_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;

namespace {

const char* const kH200 = "NVIDIA H200";

// A GPU run as dpbench records one on an H200 at 700 W: libraries, clocks and power limit.
Result gpu_result(std::vector<std::string> flags, int gpus, double speed, const std::string& gpu = kH200) {
  FixtureRun run = run_of(std::move(flags), gpus, speed);
  run.gpu_name = gpu;
  Result result = make_fixture_result(run);
  EnvironmentRecord& environment = result.environment;
  environment.driver = "580.159.04";
  environment.cuda_runtime = "13.0";
  environment.cuda_driver = "13.0";
  environment.cublas = "13.1.0";
  environment.cudnn = "9.14.0";
  environment.nccl = "2.28.3";
  environment.variables = {{"NCCL_NVLS_ENABLE", "0"}, {"NCCL_VERSION", "2.28.3-1"}};
  json devices = json::array();
  for (int i = 0; i < gpus; ++i) {
    json peers = json::array();
    for (int j = 0; j < gpus; ++j)
      if (j != i) peers.push_back("0000:00:0" + std::to_string(6 + j) + ".0");
    devices.push_back({{"pci_bus_id", "0000:00:0" + std::to_string(6 + i) + ".0"},
                       {"max_sm_clock_mhz", 1980.0},
                       {"power_limit_w", 700.0},
                       {"nvlink_peers", peers},
                       {"hardware_slowdown_share", 0.0}});
  }
  result.summary.gpu_telemetry = {{"available", true},
                                  {"source", "nvml"},
                                  {"power_limit_w_mean", 700.0},
                                  {"sm_clock_mhz_mean", 1980.0},
                                  {"power_w_mean", 500.0},
                                  {"power_capped_share", 0.0},
                                  {"thermal_limited_share", 0.0},
                                  {"devices", devices}};
  return result;
}

const std::vector<std::string> kGpt = {"--model=gpt", "--batch_size=16", "--precision=bf16",
                                       "--variable_update=independent"};

std::vector<std::string> with(std::vector<std::string> flags, const std::string& flag) {
  const std::string name = flag.substr(0, flag.find('='));
  flags.erase(
      std::remove_if(flags.begin(), flags.end(), [&](const std::string& f) { return f.rfind(name + "=", 0) == 0; }),
      flags.end());
  flags.push_back(flag);
  return flags;
}

LoadedResults loaded(std::vector<std::pair<std::string, Result>> results) {
  LoadedResults set;
  for (auto& [path, result] : results) set.results.push_back({"/refs/" + path, std::move(result)});
  set.files_examined = set.results.size();
  return set;
}

ReferenceChoice choice_of(const Result& run, const LoadedResults& references) {
  return choose_reference(run, references.results, strategy_catalog_for_reports());
}

std::vector<std::string> paths_of(const ReferenceChoice& choice) {
  std::vector<std::string> paths;
  for (const LoadedResult* run : choice.runs) paths.push_back(run->path);
  return paths;
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

}  // namespace

TEST_CASE(
    "reference results: a run matches the reference of its workload, and each kind of mismatch names what differs",
    "[reference_results]") {
  const LoadedResults references =
      loaded({{"gpt.json", gpu_result(kGpt, 1, 560000)}, {"resnet50.json", gpu_result({"--model=resnet50"}, 1, 1000)}});
  const ReferenceChoice exact = choice_of(gpu_result(kGpt, 1, 550000), references);
  REQUIRE(exact.matched());
  CHECK(paths_of(exact) == std::vector<std::string>{"/refs/gpt.json"});
  CHECK(exact.machine_differences.empty());

  // Each kind of mismatch: no reference, the nearest named with the difference.
  const std::vector<std::pair<Result, std::string>> mismatches = {
      {gpu_result(with(kGpt, "--batch_size=32"), 1, 1), "batch_size (this run 32; reference 16)"},
      {gpu_result(with(kGpt, "--precision=tf32"), 1, 1), "precision (this run tf32; reference bf16)"},
      {gpu_result(with(kGpt, "--variable_update=replicated"), 1, 1),
       "variable_update (this run replicated; reference independent)"},
      {gpu_result(with(kGpt, "--gpt_size=350m"), 1, 1), "gpt_size (this run 350m; reference 124m)"},
      {gpu_result(with(kGpt, "--learning_rate=0.5"), 1, 1), "learning_rate (this run 0.5; reference 0.001)"},
      {gpu_result(kGpt, 2, 1), "devices (this run 2; reference 1)"},
  };
  for (const auto& [run, difference] : mismatches) {
    INFO(difference);
    const ReferenceChoice none = choice_of(run, references);
    CHECK_FALSE(none.matched());
    REQUIRE(none.nearest != nullptr);
    CHECK(none.nearest->path == "/refs/gpt.json");
    CHECK(contains(none.nearest_differences, difference));
  }
  // Another model: the nearest is the reference of the fewest differences, the model among them.
  const ReferenceChoice other_model = choice_of(gpu_result({"--model=resnet50", "--batch_size=32"}, 1, 1), references);
  CHECK_FALSE(other_model.matched());
  CHECK(other_model.nearest->path == "/refs/resnet50.json");
  CHECK(other_model.nearest_differences == std::vector<std::string>{"batch_size (this run 32; reference 64)"});
  CHECK(contains(workload_mismatches(gpu_result({"--model=resnet50"}, 1, 1), references.results[0].result,
                                     strategy_catalog_for_reports()),
                 "model (this run resnet50; reference gpt)"));
  // A strategy's option, and the backend (a reference-backend run against a GPU reference).
  const Result nccl = gpu_result({"--model=resnet50", "--variable_update=replicated", "--all_reduce_spec=nccl"}, 1, 1);
  const Result xring =
      gpu_result({"--model=resnet50", "--variable_update=replicated", "--all_reduce_spec=xring"}, 1, 1);
  CHECK(contains(workload_mismatches(xring, nccl, strategy_catalog_for_reports()),
                 "all_reduce_spec (this run xring; reference nccl)"));
  FixtureRun host_run = run_of({"--model=resnet50"}, 1, 1000);
  host_run.backend = "reference";
  // Named once, though the config records the backend as a flag too.
  const std::vector<std::string> other_backend =
      workload_mismatches(make_fixture_result(host_run), references.results[1].result, strategy_catalog_for_reports());
  CHECK(std::count(other_backend.begin(), other_backend.end(), "backend (this run reference; reference cuda)") == 1);
  // No references at all: nothing near.
  const ReferenceChoice empty = choice_of(gpu_result(kGpt, 1, 1), LoadedResults());
  CHECK_FALSE(empty.matched());
  CHECK(empty.nearest == nullptr);
}

TEST_CASE(
    "reference results: among references of one workload a run takes its own GPU type, then the closest machine, then "
    "the newest",
    "[reference_results]") {
  Result h100 = gpu_result(kGpt, 1, 400000, "NVIDIA H100 80GB HBM3");
  Result old_h200 = gpu_result(kGpt, 1, 500000);
  old_h200.environment.date = "2024-06-01T00:00:00Z";
  old_h200.git_sha = "000000000000";
  Result capped_h200 = gpu_result(kGpt, 1, 480000);
  capped_h200.summary.gpu_telemetry["power_limit_w_mean"] = 500.0;
  Result new_h200 = gpu_result(kGpt, 1, 560000);
  new_h200.environment.date = "2026-11-29T00:00:00Z";
  Result repeat = gpu_result(kGpt, 1, 556000);
  repeat.environment.date = "2026-11-29T01:00:00Z";
  Result other_build = new_h200;
  other_build.git_sha = "ffffffffffff";
  const LoadedResults references = loaded({{"a_h100.json", h100},
                                           {"b_old.json", old_h200},
                                           {"c_capped.json", capped_h200},
                                           {"d_new.json", new_h200},
                                           {"e_repeat.json", repeat},
                                           {"f_other_build.json", other_build}});
  // The newest of the H200s at 700 W, with its repeat (same build, same machine): the capped one
  // differs in its power limit, the old one and the other build are of another build.
  const ReferenceChoice on_h200 = choice_of(gpu_result(kGpt, 1, 550000), references);
  REQUIRE(on_h200.matched());
  CHECK(on_h200.chosen->path == "/refs/e_repeat.json");
  CHECK(paths_of(on_h200) == std::vector<std::string>{"/refs/d_new.json", "/refs/e_repeat.json"});
  // An H100 run takes the H100 reference; a GPU no reference has takes the closest machine.
  CHECK(paths_of(choice_of(gpu_result(kGpt, 1, 1, "NVIDIA H100 80GB HBM3"), references)) ==
        std::vector<std::string>{"/refs/a_h100.json"});
  Result capped_run = gpu_result(kGpt, 1, 1, "NVIDIA A100-SXM4-80GB");
  capped_run.summary.gpu_telemetry["power_limit_w_mean"] = 500.0;
  const ReferenceChoice on_a100 = choice_of(capped_run, references);
  CHECK(on_a100.chosen->path == "/refs/c_capped.json");
  CHECK(on_a100.machine_differences.front() == "another GPU: NVIDIA A100-SXM4-80GB (reference NVIDIA H200)");
}

TEST_CASE("reference results: the machine differences name what could explain a gap, with both values",
          "[reference_results]") {
  const Result reference = gpu_result(kGpt, 1, 560000);
  auto differences = [&](const Result& run) { return machine_differences(run, reference); };
  CHECK(differences(reference).empty());

  CHECK(
      differences(gpu_result(kGpt, 1, 1, "NVIDIA H200 NVL")) ==
      std::vector<std::string>{
          "a PCIe card instead of SXM, with a lower power limit and clocks: NVIDIA H200 NVL (reference NVIDIA H200)"});
  CHECK(differences(gpu_result(kGpt, 1, 1, "NVIDIA H100 PCIe")).front() ==
        "a PCIe card instead of SXM, with a lower power limit and clocks: NVIDIA H100 PCIe (reference NVIDIA H200)");
  CHECK(machine_differences(reference, gpu_result(kGpt, 1, 1, "NVIDIA A100-PCIE-40GB")).front() ==
        "an SXM module instead of a PCIe card, with a higher power limit and clocks: NVIDIA H200 (reference "
        "NVIDIA A100-PCIE-40GB)");
  CHECK(differences(gpu_result(kGpt, 1, 1, "NVIDIA H100 80GB HBM3")).front() ==
        "another GPU: NVIDIA H100 80GB HBM3 (reference NVIDIA H200)");

  Result run = reference;
  run.summary.gpu_telemetry["power_limit_w_mean"] = 600.0;
  run.summary.gpu_telemetry["devices"][0]["max_sm_clock_mhz"] = 1755.0;
  run.summary.gpu_telemetry["sm_clock_mhz_mean"] = 1500.0;
  run.summary.gpu_telemetry["power_capped_share"] = 0.9;
  run.summary.gpu_telemetry["thermal_limited_share"] = 0.25;
  run.summary.gpu_telemetry["devices"][0]["hardware_slowdown_share"] = 0.1;
  run.config["cuda_graph"] = false;
  run.config["cudnn_benchmark"] = false;
  run.config["peak_tflops"] = 500.0;  // MFU's denominator only: no difference of speed
  run.config["trace_file"] = "trace.json";
  run.environment.driver = "570.86.10";
  run.environment.cuda_runtime = "12.8";
  run.environment.cublas = "12.8.4";
  run.environment.cudnn = "9.10.0";
  run.environment.nccl = "2.26.2";  // one GPU exchanges nothing: not named
  run.environment.launcher = "mpirun";
  run.tool_version = "0.2.0";
  CHECK(differences(run) == std::vector<std::string>{
                                "power limit 600 W (reference 700 W)", "maximum SM clock 1755 MHz (reference 1980 MHz)",
                                "SM clock 1500 MHz mean (reference 1980 MHz), held by the power cap in 90% of samples",
                                "clocks thermally limited in 25% of samples (reference 0%)",
                                "hardware slowdown (power brake, overheating) in 10% of samples (reference 0%)",
                                "--cuda_graph=false (reference true)", "--cudnn_benchmark=false (reference true)",
                                "traced (--trace_file), which adds work to every traced step (reference untraced)",
                                "launched by mpirun (reference one process)", "driver 570.86.10 (reference 580.159.04)",
                                "CUDA runtime 12.8 (reference 13.0)", "cuBLAS 12.8.4 (reference 13.1.0)",
                                "cuDNN 9.10.0 (reference 9.14.0)", "dpbench 0.2.0 (reference 0.1.0)"});
  // Without the run's conditions (what a machine is, not how one run went).
  CHECK(machine_differences(run, reference, false).size() == differences(run).size() - 3);
  // A small wobble of the mean clock is no difference.
  Result steady = reference;
  steady.summary.gpu_telemetry["sm_clock_mhz_mean"] = 1950.0;
  CHECK(differences(steady).empty());

  // Several GPUs: NVLink, NCCL's version and settings.
  const Result pair = gpu_result(kGpt, 2, 1000000);
  Result pcie_pair = pair;
  for (json& device : pcie_pair.summary.gpu_telemetry["devices"]) device["nvlink_peers"] = json::array();
  pcie_pair.environment.nccl = "2.26.2";
  pcie_pair.environment.variables["NCCL_ALGO"] = "Ring";
  pcie_pair.environment.variables.erase("NCCL_NVLS_ENABLE");
  pcie_pair.environment.variables["NCCL_VERSION"] = "2.26.2-1";  // the container's, not a setting
  CHECK(machine_differences(pcie_pair, pair) ==
        std::vector<std::string>{"GPUs linked by PCIe only (reference NVLink)", "NCCL 2.26.2 (reference 2.28.3)",
                                 "NCCL_ALGO=Ring (reference unset)",
                                 "NCCL_NVLS_ENABLE unset (reference NCCL_NVLS_ENABLE=0)"});

  // A run without telemetry says its power and clocks are not known.
  Result blind = reference;
  blind.summary.gpu_telemetry = {{"available", false}, {"reason", "NVML not found"}};
  CHECK(differences(blind) ==
        std::vector<std::string>{"no GPU telemetry in this run (NVML not found), so its power limit and clocks are "
                                 "not known"});
  // On the reference backend the machine is the CPU.
  FixtureRun host_run = run_of({"--model=trivial"}, 1, 1000);
  host_run.backend = "reference";
  Result host_a = make_fixture_result(host_run), host_b = host_a;
  host_a.environment.cpu_model = "Intel(R) Xeon(R) Processor";
  host_b.environment.cpu_model = "AMD EPYC 9654";
  CHECK(machine_differences(host_a, host_b) ==
        std::vector<std::string>{"CPU Intel(R) Xeon(R) Processor (reference AMD EPYC 9654)"});
}

TEST_CASE(
    "reference results: summary.reference holds the reference's identity and the ratio, and the console says it in a "
    "line",
    "[reference_results]") {
  const LoadedResults references = loaded({{"h200/gpt.json", gpu_result(kGpt, 1, 560000)}});
  const ComparisonSettings settings;

  // 98% of the reference, tight steps: slower beyond the noise; the machines agree.
  Result run = gpu_result(kGpt, 1, 0.98 * 560000);
  json summary = reference_summary(run, "/refs", references, strategy_catalog_for_reports(), settings);
  CHECK(summary["matched"] == true);
  CHECK(summary["folder"] == "/refs");
  CHECK(summary["files"] == json::array({"h200/gpt.json"}));
  CHECK(summary["label"] == "H200 reference (2025-01-01, 700 W)");
  CHECK(summary["date"] == "2025-01-01T00:00:00Z");
  CHECK(summary["git_sha"] == "0123456789ab");
  CHECK(summary["gpu"] == kH200);
  CHECK(summary["power_limit_w"] == 700.0);
  CHECK(summary["num_devices"] == 1);
  CHECK(summary["unit"] == "images/s");
  CHECK(summary["reference_speed"].get<double>() == Approx(560000).epsilon(1e-9));
  CHECK(summary["run_speed"].get<double>() == Approx(0.98 * 560000).epsilon(1e-9));
  CHECK(summary["ratio"].get<double>() == Approx(0.98).epsilon(1e-9));
  CHECK(summary["ratio_low"].get<double>() < 0.98);
  CHECK(summary["ratio_high"].get<double>() > 0.98);
  CHECK(summary["ratio_high"].get<double>() < 1.0);
  CHECK(summary["verdict"] == "slower");
  CHECK(summary["machine_differences"] == json::array());
  CHECK(reference_console_lines(summary) ==
        std::vector<std::string>{"H200 reference (2025-01-01, 700 W): 560,000 images/s; this run 98% (slower beyond "
                                 "the noise)",
                                 "the machines' descriptions agree (GPU, power limit, clocks, execution flags, driver, "
                                 "libraries): look at this machine's state (other processes, cooling) or this dpbench "
                                 "build"});

  // The same speed on a power-capped PCIe card: within noise, the differences said.
  run = gpu_result(kGpt, 1, 560000, "NVIDIA H200 NVL");
  run.summary.gpu_telemetry["power_limit_w_mean"] = 600.0;
  summary = reference_summary(run, "/refs", references, strategy_catalog_for_reports(), settings);
  CHECK(summary["verdict"] == "within noise");
  CHECK(
      reference_console_lines(summary) ==
      std::vector<std::string>{"H200 reference (2025-01-01, 700 W): 560,000 images/s; this run 100% (within noise)",
                               "the machines differ: a PCIe card instead of SXM, with a lower power limit and clocks: "
                               "NVIDIA H200 NVL (reference NVIDIA H200); power limit 600 W (reference 700 W)"});
  // 80% of it: the differences could explain the gap.
  run = gpu_result(kGpt, 1, 0.8 * 560000);
  run.summary.gpu_telemetry["power_limit_w_mean"] = 450.0;
  summary = reference_summary(run, "/refs", references, strategy_catalog_for_reports(), settings);
  CHECK(reference_console_lines(summary) ==
        std::vector<std::string>{
            "H200 reference (2025-01-01, 700 W): 560,000 images/s; this run 80% (slower beyond the noise)",
            "the machines differ, which could explain a gap: power limit 450 W (reference 700 W)"});
  // 2 GPUs against the mean of two repeats.
  const LoadedResults pairs =
      loaded({{"a.json", gpu_result(kGpt, 2, 1000000)}, {"b.json", gpu_result(kGpt, 2, 1100000)}});
  summary = reference_summary(gpu_result(kGpt, 2, 1050000), "/refs", pairs, strategy_catalog_for_reports(), settings);
  CHECK(summary["files"] == json::array({"a.json", "b.json"}));
  CHECK(reference_console_lines(summary).front() ==
        "2 x H200 reference (2025-01-01, 700 W), mean of 2 runs: 1,050,000 images/s; this run 100% (within noise)");

  // No reference of this workload: one line naming the nearest.
  summary = reference_summary(gpu_result(with(kGpt, "--batch_size=32"), 1, 1), "/refs", references,
                              strategy_catalog_for_reports(), settings);
  CHECK(summary == json{{"matched", false},
                        {"folder", "/refs"},
                        {"references", 1},
                        {"reason", "no reference result of this workload"},
                        {"nearest",
                         {{"file", "h200/gpt.json"},
                          {"label", "H200 reference (2025-01-01, 700 W)"},
                          {"differs_in", {"batch_size (this run 32; reference 16)"}}}}});
  CHECK(reference_console_lines(summary) ==
        std::vector<std::string>{"none for this workload among 1 reference result in /refs (nearest: h200/gpt.json, "
                                 "H200 reference (2025-01-01, 700 W), which differs in batch_size (this run 32; "
                                 "reference 16))"});
  // A folder without references, or none at all.
  summary =
      reference_summary(gpu_result(kGpt, 1, 1), "/empty", LoadedResults(), strategy_catalog_for_reports(), settings);
  CHECK(reference_console_lines(summary) ==
        std::vector<std::string>{"none: no reference results in the folder (/empty)"});
  CHECK(reference_console_lines(unreadable_references_summary("/nowhere", "no reference results: no such folder")) ==
        std::vector<std::string>{"none: no reference results: no such folder (/nowhere)"});
  CHECK(reference_console_lines(json::object()).empty());

  CHECK(readable_speed(560155.3) == "560,155");
  CHECK(readable_speed(1061) == "1,061");
  CHECK(readable_speed(999.6) == "1,000");
  CHECK(readable_speed(95.34) == "95.3");
  CHECK(readable_speed(34952625) == "34,952,625");
}

TEST_CASE("reference results: the run's summary shows summary.reference under Reference:, and the result file keeps it",
          "[reference_results]") {
  const LoadedResults references = loaded({{"gpt.json", gpu_result(kGpt, 1, 560000)}});
  Result run = gpu_result(kGpt, 1, 0.98 * 560000);
  CHECK_THAT(format_summary(run), !Contains("Reference:"));
  run.summary.reference =
      reference_summary(run, "/refs", references, strategy_catalog_for_reports(), ComparisonSettings());
  CHECK_THAT(
      format_summary(run),
      Contains("\nReference:    H200 reference (2025-01-01, 700 W): 560,000 images/s; this run 98% (slower beyond "
               "the noise)\n              the machines' descriptions agree"));
  TempDir dir;
  write_result_atomically(run, dir.file("run.json"));
  CHECK(read_json(dir.file("run.json"))["summary"]["reference"] == run.summary.reference);
  CHECK(read_result_file(dir.file("run.json")).summary.reference == run.summary.reference);
  // A result without it writes none.
  write_result_atomically(gpu_result(kGpt, 1, 1), dir.file("plain.json"));
  CHECK_FALSE(read_json(dir.file("plain.json"))["summary"].contains("reference"));
}

TEST_CASE("reference results: a build tree copied away from its checkout finds the checkout it sits in",
          "[reference_results]") {
  TempDir dir;
  const std::filesystem::path checkout = dir.path() / "copy";
  std::filesystem::create_directories(checkout / "reference_results");
  std::filesystem::create_directories(checkout / ".device" / "run" / "build");
  write_text_atomically((checkout / "CMakeLists.txt").string(), "project(x)\n");
  const std::string program = (checkout / ".device" / "run" / "build" / "dpbench").string();
  CHECK(checkout_reference_folder_above(program) == (checkout / "reference_results").string());
  // The test binaries one folder deeper (build/tests/) find it too.
  std::filesystem::create_directories(checkout / ".device" / "run" / "build" / "tests");
  CHECK(checkout_reference_folder_above((checkout / ".device" / "run" / "build" / "tests" / "dpbench_gpu_tests").string()) ==
        (checkout / "reference_results").string());
  // Six folders up is too far, and a reference_results/ without a CMakeLists.txt beside it is not a checkout's.
  const std::filesystem::path deep = checkout / "a" / "b" / "c" / "d" / "e" / "f";
  std::filesystem::create_directories(deep);
  CHECK(checkout_reference_folder_above((deep / "dpbench").string()).empty());
  std::filesystem::create_directories(dir.path() / "loose" / "reference_results");
  CHECK(checkout_reference_folder_above((dir.path() / "loose" / "dpbench").string()).empty());
}

TEST_CASE(
    "reference results: the reference folder is the checkout's for a build-tree dpbench and share/ beside an installed "
    "one",
    "[reference_results]") {
  CHECK(reference_folder_for_executable("/src/build/dpbench", "/src/build", "/src/reference_results",
                                        "../share/dpbench/reference_results") == "/src/reference_results");
  CHECK(reference_folder_for_executable("/src/build/tests/dpbench_host_tests", "/src/build", "/src/reference_results",
                                        "../share/dpbench/reference_results") == "/src/reference_results");
  CHECK(reference_folder_for_executable("/usr/bin/dpbench", "/src/build", "/src/reference_results",
                                        "../share/dpbench/reference_results") ==
        "/usr/share/dpbench/reference_results");
  CHECK(reference_folder_for_executable("/opt/x/bin/dpbench", "/src/build", "/src/reference_results",
                                        "../share/dpbench/reference_results") ==
        "/opt/x/share/dpbench/reference_results");
  // A sibling folder whose name starts like the build tree's is not in it.
  CHECK(reference_folder_for_executable("/src/build2/bin/dpbench", "/src/build", "/src/reference_results",
                                        "../share/dpbench/reference_results") ==
        "/src/build2/share/dpbench/reference_results");
  // This test's own executable lies in the build tree: the checkout's folder.
  CHECK(
      std::filesystem::equivalent(default_reference_folder(), std::string(DPBENCH_SOURCE_DIR) + "/reference_results"));
}

TEST_CASE("reference results: compare --reference gates each result on its reference with compare's exit codes",
          "[reference_results]") {
  TempDir dir;
  for (const char* folder : {"refs", "same", "slower", "capped", "unknown", "mixed", "empty", "out"})
    std::filesystem::create_directories(dir.path() / folder);
  write_result_atomically(gpu_result(kGpt, 1, 560000), dir.file("refs/gpt.json"));
  write_result_atomically(gpu_result(kGpt, 1, 560000), dir.file("same/run.json"));
  write_result_atomically(gpu_result(kGpt, 1, 0.9 * 560000), dir.file("slower/run.json"));
  Result capped = gpu_result(kGpt, 1, 0.9 * 560000);
  capped.summary.gpu_telemetry["power_limit_w_mean"] = 500.0;
  write_result_atomically(capped, dir.file("capped/run.json"));
  write_result_atomically(gpu_result(with(kGpt, "--batch_size=8"), 1, 560000), dir.file("unknown/run.json"));
  write_result_atomically(gpu_result(kGpt, 1, 560000), dir.file("mixed/a.json"));
  write_result_atomically(gpu_result(with(kGpt, "--learning_rate=0.5"), 1, 560000), dir.file("mixed/b.json"));
  const std::string refs = "--reference_dir=" + dir.file("refs"), output = dir.file("out/compare.md");

  CHECK(run_cli({"compare", "--reference", refs, dir.file("same"), "--fail_above=5", "--output=" + output}) == 0);
  CHECK_THAT(read_text_file(output), Contains("# dpbench compare --reference"));
  CHECK_THAT(read_text_file(output), Contains("| 1.000 |"));
  CHECK_THAT(read_text_file(output), Contains("H200 reference (2025-01-01, 700 W) (`" + dir.file("refs/gpt.json") +
                                              "`); the machines' descriptions agree"));
  CHECK(run_cli({"compare", "--reference", refs, dir.file("slower"), "--fail_above=5", "--output=" + output}) ==
        kCompareSlowerExitCode);
  CHECK_THAT(read_text_file(output), Contains("| -10.0% | slower, over --fail_above |"));
  CHECK(run_cli({"compare", "--reference", refs, dir.file("slower"), "--fail_above=12", "--output=" + output}) == 0);
  CHECK(run_cli({"compare", "--reference", refs, dir.file("slower"), "--output=" + output}) == 0);
  // The gate holds on another machine too, the difference named.
  CHECK(run_cli({"compare", "--reference", refs, dir.file("capped"), "--fail_above=5", "--output=" + output}) ==
        kCompareSlowerExitCode);
  CHECK_THAT(read_text_file(output), Contains("the machines differ: power limit 500 W (reference 700 W)"));
  // No reference: nothing compared, the gate passes, the nearest named.
  CHECK(run_cli({"compare", "--reference", refs, dir.file("unknown"), "--fail_above=5", "--output=" + output}) == 0);
  CHECK_THAT(read_text_file(output), Contains("## No reference"));
  CHECK_THAT(read_text_file(output), Contains("no reference; nearest: gpt.json, H200 reference (2025-01-01, 700 W), "
                                              "which differs in batch_size (this run 8; reference 16)"));
  // Several paths at once: each series against its own reference.
  CHECK(run_cli({"compare", "--reference", refs, dir.file("same"), dir.file("unknown"), dir.file("slower/run.json"),
                 "--format=json", "--output=" + output}) == 0);
  const json document = json::parse(read_text_file(output));
  CHECK(document["against_references"] == true);
  CHECK(document["base"]["path"] == dir.file("refs"));
  CHECK(document["series"].size() == 1);  // same/ and slower/ are repeats of one series
  CHECK(document["series"][0]["reference"]["label"] == "H200 reference (2025-01-01, 700 W)");
  CHECK(document["only_in_new"][0]["reference"]["differs_in"] ==
        json::array({"batch_size (this run 8; reference 16)"}));
  // CSV: the reference and the machine differences in columns of their own.
  CHECK(run_cli({"compare", "--reference", refs, dir.file("capped"), "--format=csv", "--output=" + output}) == 0);
  CHECK_THAT(read_text_file(output), Contains(",workload_differences,reference,machine_differences\n"));
  CHECK_THAT(read_text_file(output),
             Contains(",\"H200 reference (2025-01-01, 700 W)\",power limit 500 W (reference 700 W)\n"));
  // Runs of one series that differ in their workload: refused, exit 1.
  CHECK(run_cli({"compare", "--reference", refs, dir.file("mixed"), "--fail_above=5", "--output=" + output}) == 1);
  CHECK_THAT(read_text_file(output), Contains("refused: workloads differ"));

  // Command lines (exit 2) and folders without results (exit 1), nothing written.
  std::filesystem::remove(output);
  CHECK(run_cli({"compare", "--reference", refs, "--output=" + output}) == 2);
  CHECK(run_cli({"compare", refs, dir.file("same"), dir.file("slower"), "--output=" + output}) == 2);
  CHECK(run_cli({"compare", "--reference", "--reference_dir=" + dir.file("nowhere"), dir.file("same"),
                 "--output=" + output}) == 2);
  CHECK(run_cli({"compare", "--reference", "--reference_dir=" + dir.file("empty"), dir.file("same"),
                 "--output=" + output}) == 1);
  CHECK(run_cli({"compare", "--reference", refs, dir.file("empty"), "--output=" + output}) == 1);
  CHECK_FALSE(std::filesystem::exists(output));
  CHECK(error_message_of<ConfigError>([&] { parse_compare_flags({"--reference"}); }, "ConfigError") ==
        "compare: --reference takes one or more result files or folders (got none); usage: dpbench compare "
        "--reference [flags] RESULT... (dpbench compare --help)");
  CHECK(error_message_of<ConfigError>(
            [&] {
              parse_compare_flags({refs, dir.file("same"), dir.file("slower")});
            },
            "ConfigError") == "compare: --reference_dir=" + dir.file("refs") +
                                  " names the reference results of --reference; give --reference too, or drop it");
  CHECK(error_message_of<RuntimeError>(
            [&] {
              run_compare_command({"--reference", "--reference_dir=" + dir.file("empty"), dir.file("same")});
            },
            "RuntimeError") ==
        "compare: no dpbench results in the reference results '" + dir.file("empty") + "': no *.json files in it");
  const CompareOptions options = parse_compare_flags({"--reference", dir.file("same"), dir.file("slower")});
  CHECK(options.against_references);
  CHECK(options.new_paths == std::vector<std::string>{dir.file("same"), dir.file("slower")});
  CHECK(std::filesystem::equivalent(options.base_path, std::string(DPBENCH_SOURCE_DIR) + "/reference_results"));
  CHECK_THAT(compare_help_text(), Contains("dpbench compare --reference [flags] RESULT..."));
}

TEST_CASE(
    "reference results: every reference dpbench ships is a whole GPU run with its provenance, found by the command "
    "that made it",
    "[reference_results]") {
  const std::string folder = std::string(DPBENCH_SOURCE_DIR) + "/reference_results";
  const LoadedResults references = load_results({folder});
  REQUIRE(references.results.size() >= 4);
  CHECK(references.skipped.empty());
  for (const SkippedFile& skipped : references.skipped) INFO(skipped.path + ": " + skipped.reason);
  for (const LoadedResult& reference : references.results) {
    INFO(reference.path);
    const Result& result = reference.result;
    // Provenance: when, which build, which machine.
    CHECK(result.environment.date.size() == 20);
    CHECK(result.git_sha.size() >= 12);
    CHECK_FALSE(result.tool_version.empty());
    CHECK(result.environment.backend == "cuda");
    REQUIRE_FALSE(result.environment.devices.empty());
    CHECK_FALSE(result.environment.driver.empty());
    CHECK_FALSE(result.environment.cudnn.empty());
    CHECK_FALSE(result.environment.cublas.empty());
    CHECK(result.summary.gpu_telemetry.value("available", false));
    // The power limit (a run too short for a telemetry sample still records its GPUs').
    REQUIRE(result.summary.gpu_telemetry.contains("devices"));
    for (const json& device : result.summary.gpu_telemetry["devices"]) CHECK(device.value("power_limit_w", 0.0) > 0);
    CHECK_THAT(reference_label(result), Contains(" W)"));
    CHECK_FALSE(result.summary.interrupted);
    CHECK(why_too_few_samples(measured_steps_of(result)).empty());
    // The same command today, on the same machine, finds it (or a repeat of it).
    const json& argv = result.invocation["argv"];
    REQUIRE(argv.is_array());
    // Where it wrote its result is of the machine that ran it.
    std::vector<std::string> args;
    for (const std::string& arg : argv.get<std::vector<std::string>>())
      args.push_back(arg.rfind("--result_file", 0) == 0 ? "--result_file=" : arg);
    const RunConfig config = parse_run_flags(args, DeviceInventory{8, ""}).config;
    Result rerun = result;
    rerun.config = config_to_json(config);
    rerun.summary.reference = json::object();
    CHECK(workload_mismatches(rerun, result, strategy_catalog_for_reports()).empty());
    const ReferenceChoice choice = choose_reference(rerun, references.results, strategy_catalog_for_reports());
    REQUIRE(choice.matched());
    CHECK(contains(paths_of(choice), reference.path));
    CHECK(choice.machine_differences.empty());
  }
}
