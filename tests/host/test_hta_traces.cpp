// --trace_format=hta: a device's nested spans cut into the kernels Holistic Trace Analysis adds up
// (the innermost span owns each stretch; the step frame and waits own none), exchanges and copies
// named as HTA classifies them, the document's rank line and whole-microsecond times, and on the
// reference backend one file per device in the folder, with the folder's errors before the run.
// (tests/scripts/test_hta_traces.sh runs HTA itself on such a folder.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "reports/hta_trace.h"
#include "tests/host/test_support.h"

using namespace dpbench;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;

namespace {

TimelineSpan span(const std::string& name, const std::string& category, StreamKind stream, int64_t begin_ns,
                  int64_t end_ns) {
  TimelineSpan made;
  made.name = name;
  made.category = category;
  made.track = static_cast<int>(stream);
  made.begin_ns = begin_ns;
  made.end_ns = end_ns;
  return made;
}

// One step of 100 us: forward with two layer groups and the loss outside them, backward with one
// group, an exchange on the communication stream from inside backward to past it, the compute
// stream waiting for it, then the update; times in ns.
DeviceTimeline one_step() {
  TracedStep step;
  step.step = 12;
  step.ran = true;
  step.spans = {span("step 3", "step", StreamKind::compute, 0, 100'000),
                span("forward", "forward", StreamKind::compute, 1'000, 40'000),
                span("conv1", "forward", StreamKind::compute, 1'000, 10'000),
                span("layer1.0", "forward", StreamKind::compute, 10'000, 35'000),
                span("backward", "backward", StreamKind::compute, 40'000, 80'000),
                span("layer1.0", "backward", StreamKind::compute, 40'000, 70'000),
                span("exchange 0", "communication", StreamKind::communication, 60'000, 90'000),
                span("wait for exchange", "exposed communication", StreamKind::compute, 80'000, 90'000),
                span("optimizer update", "optimizer", StreamKind::compute, 90'000, 99'000),
                span("batch copy to the device", "data", StreamKind::copy, 95'000, 99'400)};
  step.spans[6].args = {{"bytes", 4096}};
  DeviceTimeline timeline;
  timeline.device_index = 1;
  timeline.device_name = "reference-cpu-1";
  timeline.steps.push_back(step);
  return timeline;
}

struct Piece {
  std::string name;
  int64_t begin_us, end_us;
};

std::vector<Piece> pieces(const std::vector<HtaKernel>& kernels, StreamKind stream) {
  std::vector<Piece> found;
  for (const HtaKernel& kernel : kernels)
    if (kernel.track == static_cast<int>(stream))
      found.push_back({kernel.name, kernel.begin_ns / 1000, kernel.end_ns / 1000});
  return found;
}

}  // namespace

TEST_CASE("HTA kernels: each stretch of a stream goes to its innermost span, frames and waits own none", "[trace]") {
  const std::vector<HtaKernel> kernels = hta_kernels(one_step());
  const std::vector<Piece> compute = pieces(kernels, StreamKind::compute);
  // The step's own time (0-1, 99-100) and the wait (80-90) are no kernels: HTA's idle time there.
  const std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> expected = {
      {"forward: conv1", {1, 10}},     {"forward: layer1.0", {10, 35}}, {"forward", {35, 40}},
      {"backward: layer1.0", {40, 70}}, {"backward", {70, 80}},          {"optimizer update", {90, 99}}};
  REQUIRE(compute.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO(i << ": " << compute[i].name << " [" << compute[i].begin_us << ", " << compute[i].end_us << ")");
    CHECK(compute[i].name == expected[i].first);
    CHECK(compute[i].begin_us == expected[i].second.first);
    CHECK(compute[i].end_us == expected[i].second.second);
  }
  const std::vector<Piece> communication = pieces(kernels, StreamKind::communication);
  REQUIRE(communication.size() == 1);
  CHECK(communication[0].name == std::string(kHtaCommunicationPrefix) + "exchange 0");
  // HTA 0.5's test for a communication kernel, and the later one.
  CHECK(std::regex_search(communication[0].name, std::regex("^nccl.*Kernel")));
  const std::vector<Piece> copy = pieces(kernels, StreamKind::copy);
  REQUIRE(copy.size() == 1);
  CHECK(copy[0].name.rfind("Memcpy HtoD", 0) == 0);
  for (const HtaKernel& kernel : kernels) {
    CHECK(kernel.run_step == 12);
    if (kernel.track == static_cast<int>(StreamKind::copy)) CHECK(kernel.category == "gpu_memcpy");
    if (kernel.track != static_cast<int>(StreamKind::copy)) CHECK(kernel.category == "kernel");
  }
  CHECK(kernels[6].args["bytes"] == 4096);  // the exchange's, as the Chrome trace has them
}

TEST_CASE("an HTA document: its rank first, kernels with stream and device, spans as GPU user annotations",
          "[trace]") {
  HtaRank rank;
  rank.rank = 3;
  rank.world_size = 4;
  rank.host_process_id = 4242;
  TraceOrigin origin;
  origin.clock_shift_ns = 2'000'000;
  const std::string text = hta_trace_document(one_step(), rank, origin, {{"tool", "dpbench"}});
  // HTA's folder reader takes the rank from the first line matching this pattern.
  std::smatch match;
  REQUIRE(std::regex_search(text, match, std::regex("\"rank\":\\s+(\\d+)")));
  CHECK(match[1] == "3");
  CHECK(static_cast<size_t>(match.position(0)) < text.find("traceEvents"));  // before any event
  const nlohmann::json document = nlohmann::json::parse(text);
  CHECK(document["distributedInfo"] == nlohmann::json({{"rank", 3}, {"world_size", 4}}));
  CHECK(document["otherData"]["tool"] == "dpbench");
  int kernels = 0, annotations = 0;
  for (const nlohmann::json& event : document["traceEvents"]) {
    REQUIRE(event["ts"].is_number_integer());  // whole microseconds: HTA leaves them as they are
    if (event["ph"] != "X") continue;
    CHECK(event["dur"].is_number_integer());
    const nlohmann::json& args = event["args"];
    if (event["cat"] == "kernel" || event["cat"] == "gpu_memcpy") {
      ++kernels;
      CHECK(event["pid"] == 1);
      CHECK(args["device"] == 1);
      CHECK(args["stream"] == event["tid"]);
      CHECK(event["ts"].get<int64_t>() >= 2000);  // on rank 0's clock
    } else {
      CHECK(!args.contains("stream"));  // else HTA would add it up as a kernel
      annotations += event["cat"] == "gpu_user_annotation";
    }
  }
  CHECK(kernels == 8);
  CHECK(annotations == 10);
  CHECK(hta_trace_file_name(3) == "rank3.json");
}

TEST_CASE("trace format hta: one file per reference device into the folder, each its own rank", "[trace]") {
  TempDir dir;
  const std::string folder = dir.file("traces");
  REQUIRE(run_cli({"--model=trivial", "--device=cpu", "--num_gpus=2", "--variable_update=replicated",
                   "--num_warmup_batches=1", "--num_batches=3", "--trace_format=hta", "--trace_file=" + folder,
                   "--result_file=" + dir.file("r.json")}) == 0);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  REQUIRE(names == std::vector<std::string>{"rank0.json", "rank1.json"});
  for (int rank = 0; rank < 2; ++rank) {
    const nlohmann::json document = read_json(folder + "/rank" + std::to_string(rank) + ".json");
    CHECK(document["distributedInfo"]["rank"] == rank);
    CHECK(document["distributedInfo"]["world_size"] == 2);
    size_t communication = 0;
    for (const nlohmann::json& event : document["traceEvents"])
      communication += event.value("name", std::string()).rfind(kHtaCommunicationPrefix, 0) == 0;
    CHECK(communication > 0);
  }
  CHECK(read_json(dir.file("r.json"))["config"]["trace_format"] == "hta");
}

TEST_CASE("trace format hta: refused before the run, a folder HTA would misread or that cannot be written",
          "[trace]") {
  TempDir dir;
  auto exit_code = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--model=trivial", "--device=cpu", "--num_batches=3", "--trace_format=hta"});
    return run_cli(args);
  };
  CHECK(exit_code({"--result_file="}) != 0);                                             // no --trace_file
  CHECK(exit_code({"--trace_file=-", "--result_file="}) != 0);                           // not a folder
  { std::ofstream(dir.file("plain")) << "x"; }
  CHECK(exit_code({"--trace_file=" + dir.file("plain"), "--result_file="}) != 0);        // a file
  CHECK(exit_code({"--trace_file=" + dir.file("no/such/traces"), "--result_file="}) != 0);
  std::filesystem::create_directory(dir.file("used"));
  { std::ofstream(dir.file("used/other_run.json")) << "{}"; }
  CHECK(exit_code({"--trace_file=" + dir.file("used"), "--result_file="}) != 0);         // HTA would read it
  CHECK(exit_code({"--trace_file=" + dir.path().string(), "--result_file=" + dir.file("r.json")}) != 0);
  CHECK(!std::filesystem::exists(dir.file("r.json")));
  CHECK(run_cli({"--model=trivial", "--device=cpu", "--num_batches=3", "--trace_format=perfetto", "--result_file="}) != 0);
}
