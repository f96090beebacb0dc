// [gpu] end-to-end: the trivial model on one and on all GPUs, and the CUDA backend training the
// same network to the same place as the reference backend.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/backends.h"
#include "tests/host/test_support.h"

using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;

TEST_CASE("trivial runs on one GPU and on all GPUs", "[gpu]") {
  const int gpus = dpbench::cuda_device_count();
  REQUIRE(gpus > 0);
  for (int count : {1, gpus}) {
    TempDir dir;
    const std::string out = dir.file("result.json");
    REQUIRE(run_cli({"--device=gpu", "--num_gpus=" + std::to_string(count), "--num_batches=20",
                     "--num_warmup_batches=5", "--result_file=" + out}) == 0);
    const nlohmann::json result = read_json(out);
    INFO("gpus " << count);
    CHECK(result["environment"]["backend"] == "cuda");
    CHECK(result["environment"]["devices"].size() == static_cast<size_t>(count));
    CHECK(result["environment"]["devices"][0]["compute_capability"].get<std::string>().size() >= 3);
    CHECK_FALSE(result["environment"]["cudnn"].get<std::string>().empty());
    CHECK_FALSE(result["environment"]["nccl"].get<std::string>().empty());
    CHECK(result["summary"]["measured_steps"] == 20);
    CHECK(result["steps"].size() == 25);
    CHECK(result["summary"]["items_per_sec"].get<double>() > 0);
    CHECK(std::isfinite(result["summary"]["final_loss"].get<double>()));
  }
}

TEST_CASE("the CUDA backend trains trivial like the reference backend", "[gpu]") {
  // Same seed, data and initial parameters on both backends. Differences come only from fp32
  // summation order in cuBLAS and the reductions (relative ~1e-6 per op); over 10 SGD steps on a
  // well-conditioned 2-layer MLP they stay far below 1e-3 relative.
  TempDir dir;
  const std::vector<std::string> common = {"--num_gpus=1", "--batch_size=32", "--num_batches=10",
                                           "--num_warmup_batches=0", "--learning_rate=0.05"};
  auto run = [&](const std::string& device, const std::string& name) {
    std::vector<std::string> args = common;
    args.push_back("--device=" + device);
    args.push_back("--result_file=" + dir.file(name));
    REQUIRE(run_cli(args) == 0);
    return read_json(dir.file(name));
  };
  const nlohmann::json gpu = run("gpu", "gpu.json");
  const nlohmann::json cpu = run("cpu", "cpu.json");
  for (size_t step = 0; step < 10; ++step) {
    const double g = gpu["steps"][step]["loss"], c = cpu["steps"][step]["loss"];
    INFO("step " << step << " gpu " << g << " reference " << c);
    CHECK(std::abs(g - c) <= 1e-4 + 1e-3 * std::abs(c));
  }
  const double gpu_norm = gpu["summary"]["param_norm"], cpu_norm = cpu["summary"]["param_norm"];
  CHECK(std::abs(gpu_norm - cpu_norm) <= 1e-4 * std::abs(cpu_norm));
  CHECK(gpu["summary"]["final_loss"].get<double>() < gpu["steps"][0]["loss"].get<double>());
}

TEST_CASE("replaying the step as a CUDA graph trains exactly as launching kernels one by one", "[gpu]") {
  // Same kernels, same order, same deterministic reductions: the graph changes only how the work
  // is launched, so losses and parameters must agree to the last bits (1e-6 allows for nothing
  // but a different cuBLAS kernel choice, which would itself be worth knowing about).
  TempDir dir;
  auto run = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"--device=gpu", "--num_gpus=1", "--batch_size=64",
                                     "--num_batches=20", "--num_warmup_batches=3",
                                     "--result_file=" + dir.file(name)};
    args.insert(args.end(), extra.begin(), extra.end());
    REQUIRE(run_cli(args) == 0);
    return read_json(dir.file(name));
  };
  const nlohmann::json graph = run("graph.json", {});
  const nlohmann::json eager = run("eager.json", {"--cuda_graph=false"});
  CHECK(graph["summary"]["cuda_graph"] == true);
  CHECK(eager["summary"]["cuda_graph"] == false);
  REQUIRE(graph["steps"].size() == 23);
  for (size_t step = 0; step < 23; ++step) {
    const double g = graph["steps"][step]["loss"], e = eager["steps"][step]["loss"];
    INFO("step " << step);
    CHECK(std::isfinite(g));
    CHECK(std::abs(g - e) <= 1e-6 * std::abs(e));
  }
  const double g = graph["summary"]["param_norm"], e = eager["summary"]["param_norm"];
  CHECK(std::abs(g - e) <= 1e-6 * e);
}

TEST_CASE("Adam replays as a CUDA graph, its step number read on the device", "[gpu]") {
  // The bias correction 1 - beta^t changes every step; the graph reads t from the runner's
  // device-side step counter. If it read a frozen t instead, the updates (and so the losses)
  // would drift from the eager run's after the capture at step 1.
  TempDir dir;
  auto run = [&](const std::string& name, const std::string& graph) {
    REQUIRE(run_cli({"--device=gpu", "--optimizer=adam", "--learning_rate=0.001", "--num_batches=8",
                     "--num_warmup_batches=2", "--cuda_graph=" + graph,
                     "--result_file=" + dir.file(name)}) == 0);
    return read_json(dir.file(name));
  };
  const nlohmann::json graph = run("graph.json", "true"), eager = run("eager.json", "false");
  CHECK(graph["summary"]["cuda_graph"] == true);
  CHECK(eager["summary"]["cuda_graph"] == false);
  // Both captured one step to count its kernels: forward, loss, backward, Adam, loss record.
  CHECK(graph["summary"]["kernel_launches_per_step"].get<int64_t>() >= 5);
  CHECK(graph["summary"]["kernel_launches_per_step"] == eager["summary"]["kernel_launches_per_step"]);
  for (size_t step = 0; step < 10; ++step) {
    INFO("step " << step);
    const double g = graph["steps"][step]["loss"], e = eager["steps"][step]["loss"];
    CHECK(std::abs(g - e) <= 1e-6 * std::abs(e));
  }
  CHECK(graph["steps"][9]["loss"].get<double>() < graph["steps"][0]["loss"].get<double>());
  const double g = graph["summary"]["param_norm"], e = eager["summary"]["param_norm"];
  CHECK(std::abs(g - e) <= 1e-6 * e);
}
