// --trace_file on real CUDA runs: the stamps the streams write keep working when the step
// replays as a CUDA graph (each traced step a graph of its own), the spans nest in their step and
// the step's span agrees with the step time the events measured; the parameter server on the host
// shows its copies on the communication stream while backward runs. On several GPUs: a track per
// GPU and stream, and every exchanging strategy's transfers beside backward (after it without
// overlap).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/backends.h"
#include "tests/host/test_support.h"
#include "tests/host/trace_test_support.h"

using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;
using dpbench::testing::TraceView;

TEST_CASE("traces of GPU runs, replayed CUDA graphs included, hold every step's spans in place", "[gpu]") {
  TempDir dir;
  const std::string out = dir.file("out.json");
  const std::string trace_path = dir.file("trace.json");
  struct Case {
    std::vector<std::string> flags;
    bool exchanges;
    bool graph;
  };
  const std::vector<Case> cases = {
      {{"--model=resnet50", "--precision=bf16", "--data_format=NHWC", "--batch_size=64"}, false, true},
      {{"--model=resnet50", "--batch_size=32", "--cuda_graph=false"}, false, false},
      {{"--model=resnet50", "--batch_size=32", "--variable_update=parameter_server", "--local_parameter_device=cpu"},
       true, false},
      {{"--model=nmt", "--batch_size=32", "--src_max_len=20", "--tgt_max_len=20"}, false, true},
      {{"--model=nmt", "--batch_size=32", "--src_max_len=20", "--tgt_max_len=20", "--encoder_type=dynamic",
        "--trace_steps=w4:2"},
       false, true},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--device=gpu", "--num_gpus=1", "--num_batches=20", "--num_warmup_batches=5",
                                     "--result_file=" + out, "--trace_file=" + trace_path};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    INFO(c.flags[0] << " " << c.flags.back());
    REQUIRE(run_cli(args) == 0);
    const nlohmann::json result = read_json(out);
    CHECK(result["summary"]["cuda_graph"] == c.graph);
    const TraceView trace(read_json(trace_path));
    dpbench::testing::check_trace(trace, 1, c.exchanges);
    // The step's own span (stamps around the graph's launch, or around the eager step) against
    // the step time events measured: the median measured step, within a quarter.
    std::vector<double> step_ms;
    for (const auto& step : result["steps"])
      if (!step["warmup"].get<bool>()) step_ms.push_back(step["time_ms"].get<double>());
    std::sort(step_ms.begin(), step_ms.end());
    REQUIRE(!step_ms.empty());
    const double median_ms = step_ms[step_ms.size() / 2];
    for (const auto* step : trace.find(0, "step")) {
      INFO(step->name << ": " << (step->end_us - step->begin_us) / 1000 << " ms, median step " << median_ms << " ms");
      if (step->name.rfind("warm-up", 0) == 0) continue;  // warm-up steps may be slow
      CHECK((step->end_us - step->begin_us) / 1000 == Approx(median_ms).epsilon(0.25));
    }
  }
}

TEST_CASE("traces of multi-GPU runs: a track per GPU and stream, exchanges beside backward", "[gpu]") {
  const int gpus = std::min(dpbench::cuda_device_count(), 4);
  if (gpus < 2) {
    WARN("skipped: needs 2 GPUs, this machine has " << gpus);
    return;
  }
  TempDir dir;
  const std::string out = dir.file("out.json");
  const std::string trace_path = dir.file("trace.json");
  struct Case {
    std::vector<std::string> flags;
    bool exchanges;
    bool overlapped;
  };
  const std::vector<std::vector<std::string>> models = {
      {"--model=resnet50", "--batch_size=32"},
      {"--model=nmt", "--batch_size=32", "--src_max_len=20", "--tgt_max_len=20"}};
  const std::vector<Case> cases = {
      {{"--variable_update=replicated", "--all_reduce_spec=nccl"}, true, true},
      {{"--variable_update=replicated", "--all_reduce_spec=nccl", "--overlap_comm=false"}, true, false},
      {{"--variable_update=parameter_server", "--local_parameter_device=gpu"}, true, true},
      {{"--variable_update=parameter_server", "--local_parameter_device=cpu"}, true, true},
      {{"--variable_update=independent"}, false, true},
  };
  for (const auto& model : models) {
    for (const Case& c : cases) {
      std::vector<std::string> args = {"--device=gpu", "--num_gpus=" + std::to_string(gpus), "--num_batches=10",
                                       "--num_warmup_batches=3", "--result_file=" + out, "--trace_file=" + trace_path};
      args.insert(args.end(), model.begin(), model.end());
      args.insert(args.end(), c.flags.begin(), c.flags.end());
      INFO(model[0] << " " << c.flags[0] << " " << c.flags.back());
      REQUIRE(run_cli(args) == 0);
      dpbench::testing::check_trace(TraceView(read_json(trace_path)), gpus, c.exchanges, c.overlapped);
    }
  }
}
