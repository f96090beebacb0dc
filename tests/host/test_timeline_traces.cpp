// --trace_file on the reference backend: resnet50 and nmt with replicated, parameter_server and
// independent on 2 and 4 devices give a process track per device and a thread per stream, the
// exchanges overlap backward on the communication stream, and every span lies inside its step;
// the window of traced steps, the device timeline's stamps, and the flags' errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/traced_steps.h"
#include "engine/backend/step_trace.h"
#include "engine/backends.h"
#include "engine/errors.h"
#include "engine/reference/reference_device.h"
#include "tests/host/test_support.h"
#include "tests/host/trace_test_support.h"

using namespace dpbench;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;
using dpbench::testing::TraceView;

namespace {

// ResNet-50 at CIFAR's 32x32 (the same layers) and a small nmt with one exchange per tensor, so
// that the exchanges of both begin while backward runs.
const std::vector<std::string> kResnet50 = {"--model=resnet50", "--data_name=cifar10", "--batch_size=1"};
const std::vector<std::string> kNmt = {"--model=nmt", "--batch_size=4", "--src_vocab_size=300", "--tgt_vocab_size=300",
                                       "--embedding_dim=16", "--num_units=16", "--src_max_len=6", "--tgt_max_len=5",
                                       "--bucket_cap_mb=0"};

nlohmann::json traced_run(const TempDir& dir, std::vector<std::string> args, int devices, const std::string& strategy) {
  const std::string trace = dir.file("trace.json");
  std::filesystem::remove(trace);
  if (strategy == "independent")  // nothing is exchanged, so there are no buckets to size
    args.erase(std::remove(args.begin(), args.end(), std::string("--bucket_cap_mb=0")), args.end());
  for (const std::string& flag : std::vector<std::string>{"--device=cpu", "--num_warmup_batches=1", "--num_batches=4", "--result_file=",
                                  "--trace_file=" + trace, "--num_gpus=" + std::to_string(devices),
                                  "--variable_update=" + strategy})
    args.push_back(flag);
  REQUIRE(run_cli(args) == 0);
  return read_json(trace);
}

}  // namespace

TEST_CASE("traces of resnet50 and nmt show every device and stream, exchanges during backward, spans in their step",
          "[trace]") {
  const auto model = GENERATE(as<std::string>{}, "resnet50", "nmt");
  const int devices = GENERATE(2, 4);
  const auto strategy = GENERATE(as<std::string>{}, "replicated", "parameter_server", "independent");
  INFO(model << " on " << devices << " devices, " << strategy);
  TempDir dir;
  const nlohmann::json document = traced_run(dir, model == "nmt" ? kNmt : kResnet50, devices, strategy);
  CHECK(document["otherData"]["model"] == model);
  CHECK(document["otherData"]["num_devices"] == devices);
  testing::check_trace(TraceView(document), devices, strategy != "independent");
}

TEST_CASE("a trace of the parameter server on the host shows its reductions on the host's threads", "[trace]") {
  TempDir dir;
  const nlohmann::json document = [&] {
    std::vector<std::string> args = kNmt;
    args.push_back("--local_parameter_device=cpu");
    return traced_run(dir, args, 2, "parameter_server");
  }();
  const TraceView on_host(document);
  testing::check_trace(on_host, 2, true);
  const int workers = on_host.thread(0, "host: parameter server threads");
  REQUIRE(workers >= 0);
  size_t reductions = 0;
  for (const auto& span : on_host.spans) reductions += span.tid == workers && span.category == "parameter server";
  CHECK(reductions > 0);
  size_t fetches = 0;
  for (const auto& span : on_host.spans) fetches += span.name == "fetch parameters";
  CHECK(fetches > 0);
}

TEST_CASE("with --overlap_comm=false the exchanges begin once backward has ended", "[trace]") {
  TempDir dir;
  std::vector<std::string> args = kNmt;
  args.push_back("--overlap_comm=false");
  const TraceView trace(traced_run(dir, args, 2, "replicated"));
  REQUIRE(trace.processes.size() == 2);
  for (int pid : {0, 1})
    for (int64_t step : trace.run_steps(pid)) {
      const testing::ReadSpan* backward = nullptr;
      for (const auto* span : trace.find(pid, "backward", step))
        if (span->name == "backward") backward = span;
      REQUIRE(backward != nullptr);
      const auto transfers = trace.find(pid, "communication", step);
      REQUIRE(!transfers.empty());
      for (const auto* transfer : transfers) CHECK(transfer->begin_us >= backward->end_us - 20);
    }
}

TEST_CASE("the traced steps: five from the middle of the measured ones by default, or those --trace_steps names",
          "[trace]") {
  TempDir dir;
  const std::string trace = dir.file("t.json");
  auto run = [&](const std::string& steps) {
    std::vector<std::string> args = {"--model=trivial", "--device=cpu", "--num_warmup_batches=2", "--num_batches=9",
                                     "--result_file=", "--trace_file=" + trace};
    if (!steps.empty()) args.push_back("--trace_steps=" + steps);
    REQUIRE(run_cli(args) == 0);
    const nlohmann::json document = read_json(trace);
    return std::make_pair(TraceView(document).run_steps(0), document["otherData"]["trace_steps"].get<std::string>());
  };
  CHECK(run("") == std::make_pair(std::set<int64_t>{4, 5, 6, 7, 8}, std::string("3:7")));  // measured 3..7 of 9
  CHECK(run("w2:1") == std::make_pair(std::set<int64_t>{1, 2}, std::string("w2:1")));
  CHECK(run("9") == std::make_pair(std::set<int64_t>{10}, std::string("9:9")));
}

TEST_CASE("resolve_traced_steps numbers measured steps from 1 and warm-up steps as wK", "[trace]") {
  CHECK(resolve_traced_steps("", 10, 100).first == 10 + 47);
  CHECK(resolve_traced_steps("", 10, 100).count() == 5);
  CHECK(resolve_traced_steps("", 0, 3).first == 0);
  CHECK(resolve_traced_steps("", 0, 3).count() == 3);
  CHECK(resolve_traced_steps("w1:w3", 10, 100).first == 0);
  CHECK(resolve_traced_steps("w1:w3", 10, 100).last == 2);
  CHECK(resolve_traced_steps("10:14", 10, 100).first == 19);
  using Catch::Matchers::Contains;
  auto error_of = [](const std::string& text, int warmup, int measured) {
    try {
      resolve_traced_steps(text, warmup, measured);
    } catch (const ConfigError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("x", 10, 100), Contains("--trace_steps=x: not A:B; e.g. 10:14"));
  CHECK_THAT(error_of("3:", 10, 100), Contains("not A:B"));
  CHECK_THAT(error_of("0:2", 10, 100), Contains("measured steps are 1..100"));
  CHECK_THAT(error_of("5:101", 10, 100), Contains("measured steps are 1..100"));
  CHECK_THAT(error_of("w11", 10, 100), Contains("warm-up steps are w1..w10"));
  CHECK_THAT(error_of("w1", 0, 100), Contains("this run has none"));
  CHECK_THAT(error_of("9:3", 10, 100), Contains("ends before it begins"));
  CHECK_THAT(error_of("1:101", 0, 200), Contains("covers 101 steps; at most 100"));
}

TEST_CASE("trace flags that cannot work end before the run with one line", "[trace]") {
  TempDir dir;
  auto exit_code = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--model=trivial", "--device=cpu", "--num_batches=3"});
    return run_cli(args);
  };
  CHECK(exit_code({"--trace_steps=1:2", "--result_file="}) != 0);  // no --trace_file
  CHECK(exit_code({"--trace_file=" + dir.file("t.json"), "--trace_steps=2:9", "--result_file="}) != 0);
  CHECK(exit_code({"--trace_file=" + dir.file("same.json"), "--result_file=" + dir.file("same.json")}) != 0);
  CHECK(exit_code({"--trace_file=" + dir.file("no/such/folder/t.json"), "--result_file="}) != 0);
  CHECK(exit_code({"--trace_file=" + dir.path().string(), "--result_file="}) != 0);  // a folder
  CHECK(!std::filesystem::exists(dir.file("t.json")));
  CHECK(!std::filesystem::exists(dir.file("same.json")));
}

TEST_CASE("without --trace_file nothing is recorded, and --nvtx alone writes no trace", "[trace]") {
  std::unique_ptr<Device> device = create_reference_device(0);
  StepTrace& trace = device->trace();
  CHECK(!trace.recording());
  CHECK(!trace.annotating());
  const StepTrace::Span span = trace.begin(StreamKind::compute, "forward", "forward");
  CHECK(span.index == -1);
  trace.end(span);
  CHECK(trace.instant(StreamKind::compute, "gradient ready") == -1);
  CHECK(trace.collect(0, "device").steps.empty());
  const int64_t enqueued = device->enqueued(StreamKind::compute);
  { TracedSpan scoped(*device, StreamKind::compute, "loss", "forward"); }
  CHECK(device->enqueued(StreamKind::compute) == enqueued);  // not one stamp

  TempDir dir;
  REQUIRE(run_cli({"--model=trivial", "--device=cpu", "--num_batches=3", "--nvtx", "--result_file=" + dir.file("r.json")}) == 0);
  CHECK(read_json(dir.file("r.json"))["config"]["nvtx"] == true);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);
}

TEST_CASE("a device timeline: spans from stream stamps, one stamp between adjacent spans, a full row truncates",
          "[trace]") {
  std::unique_ptr<Device> device = create_reference_device(0);
  StepTrace& trace = device->trace();
  trace.prepare(2, false);
  trace.begin_step(0, 7, true);
  CHECK(trace.recording());
  const int64_t before = device->enqueued(StreamKind::compute);
  StepTrace::Span first = trace.begin(StreamKind::compute, "a", "forward", {{"k", 1}});
  const StepTrace::Span second = trace.next(first, "b", "forward");
  trace.end(second);
  CHECK(device->enqueued(StreamKind::compute) - before == 3);  // a's start, a|b, b's end
  const int ready = trace.instant(StreamKind::compute, "gradient ready");
  const StepTrace::Span transfer = trace.begin(StreamKind::communication, "exchange 0", "communication");
  trace.flow(ready, transfer);
  trace.end_with_instant(transfer, "exchange done");
  const StepTrace::HostTimes host = trace.deferred_host_span(HostTrack::host_workers, "reduce", "parameter server");
  REQUIRE(host.begin_ns != nullptr);
  *host.begin_ns = host_clock_ns();
  *host.end_ns = *host.begin_ns + 1000;
  trace.end_step();
  CHECK(!trace.recording());
  trace.begin_step(1, 8, true);  // a full row: the stamps past it are dropped, the step marked
  for (int i = 0; i < StepTrace::kSlotsPerStep; ++i) trace.instant(StreamKind::compute, "tick");
  const StepTrace::Span late = trace.begin(StreamKind::compute, "late", "forward");
  CHECK(late.index == -1);
  trace.end_step();

  const DeviceTimeline timeline = trace.collect(3, "reference");
  CHECK(timeline.device_index == 3);
  REQUIRE(timeline.steps.size() == 2);
  const TracedStep& step = timeline.steps[0];
  CHECK(step.step == 7);
  CHECK(!step.truncated);
  REQUIRE(step.spans.size() == 4);
  CHECK(step.spans[0].name == "a");
  CHECK(step.spans[0].args["k"] == 1);
  CHECK(step.spans[0].end_ns == step.spans[1].begin_ns);  // one stamp
  CHECK(step.spans[0].begin_ns <= step.spans[0].end_ns);
  CHECK(step.spans[1].begin_ns <= step.spans[1].end_ns);
  CHECK(step.spans[2].flow_in == ready);
  CHECK(step.spans[2].begin_ns >= step.instants[static_cast<size_t>(ready)].at_ns);
  REQUIRE(step.instants.size() == 2);
  CHECK(step.instants[1].name == "exchange done");
  CHECK(step.instants[1].at_ns == step.spans[2].end_ns);
  CHECK(step.spans[3].track == host_track_id(HostTrack::host_workers));
  CHECK(step.spans[3].end_ns - step.spans[3].begin_ns == 1000);
  CHECK(timeline.steps[1].truncated);
  CHECK(timeline.steps[1].instants.size() == static_cast<size_t>(StepTrace::kSlotsPerStep));
  // The reference device's clock is the host's: the offset found is within its uncertainty of 0.
  CHECK(std::abs(timeline.clock_offset_ns) <= timeline.clock_uncertainty_ns + 1000);
}

TEST_CASE("a trace of fully_sharded shows each unit's all-gather and reduce-scatter on the communication stream",
          "[trace][fully_sharded]") {
  TempDir dir;
  const TraceView trace(traced_run(dir, {"--model=gpt", "--batch_size=2", "--vocab_size=32", "--seq_len=8",
                                         "--num_layers=2", "--num_heads=2", "--hidden_size=16"},
                                   2, "fully_sharded"));
  REQUIRE(trace.processes.size() == 2);
  for (int pid : {0, 1}) {
    const int communication = trace.thread(pid, "communication stream");
    REQUIRE(communication >= 0);
    for (int64_t step : trace.run_steps(pid)) {
      std::map<std::string, int> transfers;
      for (const auto* span : trace.find(pid, "communication", step)) {
        CHECK(span->tid == communication);
        ++transfers[span->name];
      }
      // Gathered for forward and again for backward; its gradients reduce-scattered once.
      CHECK(transfers["all-gather block 1"] == 2);
      CHECK(transfers["reduce-scatter block 1"] == 1);
      CHECK(transfers["reduce-scatter embedding"] == 1);
      // Prefetched: block 0's gather begins before block 0's forward does.
      const testing::ReadSpan *gather = nullptr, *block = nullptr;
      for (const auto* span : trace.find(pid, "communication", step))
        if (span->name == "all-gather block 0" && gather == nullptr) gather = span;
      for (const auto* span : trace.find(pid, "forward", step))
        if (span->name == "block 0" && block == nullptr) block = span;
      REQUIRE(gather != nullptr);
      REQUIRE(block != nullptr);
      CHECK(gather->begin_us <= block->begin_us);
    }
  }
}
