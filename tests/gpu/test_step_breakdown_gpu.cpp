// summary.breakdown of real CUDA runs: the device clocks keep timing a step replayed as a CUDA
// graph, and the parts add up to the wall time per step with and without graphs, forward only,
// and with host-fed data.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/gpu/gpu_test_support.h"
#include "tests/host/test_support.h"

using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;

TEST_CASE("breakdowns of GPU runs add up to the wall time per step, CUDA graphs included", "[gpu]") {
  TempDir dir;
  const std::string out = dir.file("out.json");
  const char* const parts[] = {"data_wait_ms", "forward_ms", "backward_ms", "exposed_comm_ms", "update_ms",
                               "straggler_wait_ms", "host_gap_ms"};
  const std::vector<std::vector<std::string>> cases = {
      {"--model=resnet50", "--precision=bf16", "--data_format=NHWC"},
      {"--model=resnet50", "--cuda_graph=false"},
      {"--model=resnet50", "--precision=bf16", "--forward_only"},
      {"--model=nmt", "--batch_size=32", "--src_max_len=20", "--tgt_max_len=20"},
      {"--model=cifar10_cnn", "--data_feed=host"},
  };
  for (const std::vector<std::string>& flags : cases) {
    std::vector<std::string> args = {"--device=gpu", "--num_gpus=1", "--num_batches=20", "--num_warmup_batches=5",
                                     "--result_file=" + out};
    if (flags[0] != "--model=nmt") args.push_back("--batch_size=32");
    args.insert(args.end(), flags.begin(), flags.end());
    REQUIRE(run_cli(args) == 0);
    const nlohmann::json result = read_json(out);
    const nlohmann::json& b = result["summary"]["breakdown"];
    INFO(flags[0] << " " << flags.back() << ": " << b.dump(1));
    REQUIRE(b["per_device"].size() == 1);
    const nlohmann::json& device = b["per_device"][0];
    double sum = 0;
    for (const char* key : parts) {
      CHECK(device[key].get<double>() >= 0);
      sum += device[key].get<double>();
    }
    // 2% of the step, or 20 us: a sub-millisecond step's parts are as fine as the events that time them.
    CHECK(sum == Approx(b["wall_ms_per_step"].get<double>()).epsilon(0.02).margin(0.02));
    CHECK(device["forward_ms"].get<double>() > 0);
    const bool forward_only = flags.back() == "--forward_only";
    CHECK((device["backward_ms"].get<double>() > 0) == !forward_only);
    // The clocks cover the step: forward and backward are most of it.
    CHECK(device["forward_ms"].get<double>() + device["backward_ms"].get<double>() >
          0.5 * b["step_ms"].get<double>());
    if (flags.back() == "--data_feed=host") CHECK(device["data_wait_ms"].get<double>() > 0);
  }
}
