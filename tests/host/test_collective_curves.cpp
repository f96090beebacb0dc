// Measured collective curves for `dpbench predict --curves` (reports/collective_curves.h): made-up
// comm_bench files read into points, the files refused with the line that names the problem and
// the fix, and a prediction priced by a curve against the hand computation. Also the link kind
// comm_bench records, and the predict flags that take the curves.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include "cli/predict_command.h"
#include "engine/errors.h"
#include "reports/collective_curves.h"
#include "reports/prediction_tables.h"
#include "strategies/replicated.h"
#include "tests/host/test_support.h"

namespace dpbench {
namespace {

using dpbench::testing::error_message_of;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;
using json = nlohmann::json;

// What `dpbench comm_bench --json` writes, cut to what a curve reads: 2 ranks on one host, three
// sizes given out of order.
json comm_bench_file(const std::string& op = "all_reduce", const std::string& link = "intra_host", int ranks = 2) {
  json rows = json::array();
  for (const auto& [bytes, busbw] : std::vector<std::pair<int, double>>{{4096, 3.0}, {1024, 1.0}, {2048, 2.0}})
    rows.push_back({{"size_bytes", bytes}, {"count", bytes / 4}, {"type", "fp32"}, {"time_us", 1.0},
                    {"algbw_gbps", busbw}, {"busbw_gbps", busbw}});
  return {{"schema_version", 1},
          {"command", "comm_bench"},
          {"communicator", "in-process"},
          {"config", {{"op", op}, {"data_type", "fp32"}, {"backend", "reference"}, {"num_gpus", ranks}}},
          {"ranks", ranks},
          {"hosts", link == "intra_host" ? 1 : 2},
          {"link", link},
          {"rows", rows}};
}

// 1 GB/s and 10 us inside a host of 8 GPUs, 4 GB/s and 100 us across hosts, 0.5 GB/s to host memory.
SystemModel eight_gpu_hosts() {
  SystemModel system;
  system.gpus_per_host = 8;
  system.intra_host = {1.0, 10.0};
  system.inter_host = {4.0, 100.0};
  system.host_copy = {0.5, 5.0};
  return system;
}

// A 20 ms step with a 10 ms backward and a 2 ms update, one 1e6-byte bucket ready at `ready_ms`.
MeasuredStep one_bucket_step(double ready_ms) {
  MeasuredStep step;
  step.step_ms = 20;
  step.backward_ms = 10;
  step.update_ms = 2;
  step.buckets = {{1e6, ready_ms}};
  return step;
}

std::string parse_error(const json& document) {
  return error_message_of<RuntimeError>([&] { parse_collective_curve(document, "c.json"); }, "error");
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("a comm_bench file becomes a curve of busbw against size", "[predict]") {
  const CollectiveCurve curve = parse_collective_curve(comm_bench_file(), "c.json");
  CHECK(curve.op == Collective::all_reduce);
  CHECK(curve.link == LinkKind::intra_host);
  CHECK(curve.link_recorded);
  CHECK(curve.ranks == 2);
  CHECK(curve.hosts == 1);
  CHECK(curve.backend == "reference");
  REQUIRE(curve.points.size() == 3);
  // By ascending size, whatever order the rows came in.
  CHECK(curve.points[0].bytes == 1024);
  CHECK(curve.points[0].busbw_gb_per_s == 1.0);
  CHECK(curve.points[2].bytes == 4096);
  CHECK(curve.points[2].busbw_gb_per_s == 3.0);
  CHECK(describe_curve(curve) ==
        "all_reduce intra_host: `c.json`, 2 ranks on 1 host (reference backend, in-process, fp32), 1 KiB to 4 KiB");

  const CollectiveCurve across = parse_collective_curve(comm_bench_file("reduce_scatter", "inter_host", 16), "x.json");
  CHECK(across.op == Collective::reduce_scatter);
  CHECK(across.link == LinkKind::inter_host);
  CHECK(across.hosts == 2);
}

TEST_CASE("a comm_bench file from before link was recorded ran in one process: one host", "[predict]") {
  json old = comm_bench_file();
  old.erase("link");
  old.erase("ranks");
  old.erase("hosts");
  old["config"]["num_gpus"] = 8;
  const CollectiveCurve curve = parse_collective_curve(old, "old.json");
  CHECK(curve.link == LinkKind::intra_host);
  CHECK_FALSE(curve.link_recorded);
  CHECK(curve.ranks == 8);
  CHECK_THAT(describe_curve(curve), Catch::Contains("link not recorded"));
}

TEST_CASE("a file that is not a usable comm_bench curve is refused with the fix", "[predict]") {
  const std::string prefix = "predict: curve file 'c.json': ";
  json training = {{"schema_version", 1}, {"config", {{"model", "trivial"}}}, {"summary", json::object()}};
  CHECK_THAT(parse_error(training), Catch::StartsWith(prefix + "a training result, not dpbench comm_bench output; "
                                                              "give runs to compare with as MEASURED"));
  CHECK_THAT(parse_error(json::array()), Catch::StartsWith(prefix + "not a JSON object; write one with dpbench comm_bench"));
  CHECK_THAT(parse_error({{"name", "x"}}), Catch::StartsWith(prefix + "not dpbench comm_bench output"));
  json newer = comm_bench_file();
  newer["schema_version"] = 2;
  CHECK_THAT(parse_error(newer), Catch::StartsWith(prefix + "schema_version 2; this dpbench reads"));
  CHECK_THAT(parse_error(comm_bench_file("all_to_all")),
             Catch::StartsWith(prefix + "config.op 'all_to_all' is no collective dpbench predicts with; accepted:"));
  CHECK_THAT(parse_error(comm_bench_file("all_reduce", "nvlink")),
             Catch::StartsWith(prefix + "link \"nvlink\" unknown; accepted: \"intra_host\", \"inter_host\""));
  CHECK_THAT(parse_error(comm_bench_file("all_reduce", "intra_host", 1)),
             Catch::StartsWith(prefix + "measured on 1 rank, where a collective moves nothing; measure on 2 or more"));
  json no_rows = comm_bench_file();
  no_rows["rows"] = json::array();
  CHECK_THAT(parse_error(no_rows), Catch::StartsWith(prefix + "no rows"));
  json zero = comm_bench_file();
  zero["rows"][1]["busbw_gbps"] = 0;
  CHECK(parse_error(zero) == prefix + "row 1 (1024 B) has busbw_gbps 0; a curve needs a positive bus bandwidth at "
                                      "every size: rerun comm_bench with more --iters");
  json repeated = comm_bench_file();
  repeated["rows"][1]["size_bytes"] = 4096;
  CHECK_THAT(parse_error(repeated), Catch::StartsWith(prefix + "size 4 KiB appears twice"));
  json no_busbw = comm_bench_file();
  no_busbw["rows"][0].erase("busbw_gbps");
  CHECK_THAT(parse_error(no_busbw), Catch::StartsWith(prefix + "row 0 has no numeric size_bytes and busbw_gbps"));
}

TEST_CASE("a curve file that cannot be read or is not JSON is named", "[predict]") {
  TempDir dir;
  write_file(dir.file("broken.json"), "{\"command\": ");
  CHECK_THAT(error_message_of<RuntimeError>([&] { load_collective_curve(dir.file("broken.json")); }, "error"),
             Catch::StartsWith("predict: curve file '" + dir.file("broken.json") + "': not JSON (") &&
                 Catch::EndsWith("write one with dpbench comm_bench --op=all_reduce --json FILE"));
  CHECK_THAT(error_message_of<RuntimeError>([&] { load_collective_curve(dir.path().string()); }, "error"),
             Catch::StartsWith("predict: cannot read curve file '" + dir.path().string() + "': it ") &&
                 Catch::EndsWith("; give a file dpbench comm_bench --json wrote"));
}

TEST_CASE("curves of one collective and link kind on several rank counts each price their own counts",
          "[predict]") {
  // 2 ranks at 1 GB/s, 4 ranks at 0.5 GB/s (flat over size), all_reduce inside a host.
  json two_file = comm_bench_file("all_reduce", "intra_host", 2), four_file = comm_bench_file("all_reduce", "intra_host", 4);
  two_file["rows"] = json::array({{{"size_bytes", 1000}, {"busbw_gbps", 1.0}}, {{"size_bytes", 1000000000}, {"busbw_gbps", 1.0}}});
  four_file["rows"] = json::array({{{"size_bytes", 1000}, {"busbw_gbps", 0.5}}, {{"size_bytes", 1000000000}, {"busbw_gbps", 0.5}}});
  const CollectiveCurve two = parse_collective_curve(two_file, "g2.json");
  const CollectiveCurve four = parse_collective_curve(four_file, "g4.json");
  const CollectiveCurve across = parse_collective_curve(comm_bench_file("all_reduce", "inter_host", 4), "x.json");
  const CurveMap map = curves_by_collective({two, four, across});
  CHECK(map.size() == 2);
  CHECK(map.at({Collective::all_reduce, LinkKind::intra_host}).size() == 2);
  SystemModel system;
  system.gpus_per_host = 8;
  system.intra_host = {10.0, 1.0};
  system.inter_host = {10.0, 1.0};
  system.host_copy = {10.0, 1.0};
  const MeasuredCurveCost cost(map, std::make_shared<AlphaBetaCost>(system));
  // 1e6 bytes: 2(n-1)/n x 1e6 bytes at the chosen curve's busbw. 2 ranks: the 2-rank curve, 1 ms.
  // 3 ranks: still the 2-rank curve (the most ranks not above 3), 4/3 ms. 4 and 8 ranks: the
  // 4-rank curve, 3 ms and 3.5 ms.
  const auto all_reduce_ms = [&](int ranks) {
    return cost.collective_ms(Collective::all_reduce, 1e6, ranks, LinkKind::intra_host);
  };
  CHECK(all_reduce_ms(2) == Approx(1.0));
  CHECK(all_reduce_ms(3) == Approx(4.0 / 3.0));
  CHECK(all_reduce_ms(4) == Approx(3.0));
  CHECK(all_reduce_ms(8) == Approx(3.5));
  // Only a 4-rank curve: it prices 2 ranks too (the fewest measured).
  const MeasuredCurveCost four_only(curves_by_collective({four}), std::make_shared<AlphaBetaCost>(system));
  CHECK(four_only.collective_ms(Collective::all_reduce, 1e6, 2, LinkKind::intra_host) == Approx(2.0));
}

TEST_CASE("two curves of one collective over one link kind on one rank count are refused, naming both",
          "[predict]") {
  const CollectiveCurve first = parse_collective_curve(comm_bench_file("all_reduce", "intra_host", 4), "a.json");
  const CollectiveCurve second = parse_collective_curve(comm_bench_file("all_reduce", "intra_host", 4), "b.json");
  CHECK(error_message_of<RuntimeError>([&] { curves_by_collective({first, second}); }, "error") ==
        "predict: curve files 'a.json' and 'b.json' both measure all_reduce over intra_host on 4 ranks; give one "
        "curve per collective, link kind and rank count (the prediction for N GPUs takes the one of the most ranks "
        "not above N)");
}

TEST_CASE("the costs no curve covers come from the system file", "[predict]") {
  const CollectiveCurve curve = parse_collective_curve(comm_bench_file(), "c.json");
  const std::vector<std::string> rest = costs_from_system_file({curve});
  CHECK(rest.size() == 10);  // 5 collectives x 2 link kinds, less the one measured, and host copies
  CHECK(std::find(rest.begin(), rest.end(), "all_reduce intra_host") == rest.end());
  CHECK(std::find(rest.begin(), rest.end(), "all_reduce inter_host") != rest.end());
  CHECK(rest.back() == "host copies");
  const std::string text = prediction_costs_text({curve});
  CHECK_THAT(text, Catch::Contains("- all_reduce intra_host: `c.json`, 2 ranks"));
  CHECK_THAT(text, Catch::Contains("Costs from the system file (alpha-beta): reduce_scatter intra_host, "));
  CHECK(prediction_costs_text({}) == "Costs: every collective and host copy from the system file (alpha-beta).\n");
}

TEST_CASE("a curve at half the system file's bandwidth doubles the predicted transfer", "[predict]") {
  // The system: 1 GB/s and 10 us inside a host (8 GPUs per host). The curve: all_reduce measured at
  // 0.5 GB/s busbw from 1 KB to 1 GB.
  const SystemModel system = eight_gpu_hosts();
  json file = comm_bench_file();
  file["rows"] = json::array({{{"size_bytes", 1000}, {"busbw_gbps", 0.5}}, {{"size_bytes", 1000000000}, {"busbw_gbps", 0.5}}});
  const MeasuredCurveCost cost(curves_by_collective({parse_collective_curve(file, "half.json")}),
                               std::make_shared<AlphaBetaCost>(system));
  // One 1e6-byte bucket ready at 9 ms of a 10 ms backward, 20 ms step, 2 ms update, on 4 GPUs.
  const MeasuredStep step = one_bucket_step(9);
  // By hand: 2 x 3/4 x 1e6 bytes at 0.5 GB/s = 3 ms, ending at 12 ms: 2 ms exposed. The system
  // file alone: 6 x 10 us + 1.5 ms = 1.56 ms, 0.56 ms exposed.
  // The replicated strategy's schedule of that bucket on 4 GPUs (strategies/replicated.h), with
  // and without the sharded update.
  const ParameterLayout layout;  // not read by the replicated strategy's schedule
  const std::vector<GradientRange> plan = {{0, 250000}};
  StrategyOptions options;
  const StepSchedule all_reduce = ReplicatedStrategy::schedule_for(options, layout, plan, ScheduleShape{4, 4, 1});
  options.sharded_update = true;
  const StepSchedule sharded_update = ReplicatedStrategy::schedule_for(options, layout, plan, ScheduleShape{4, 4, 1});
  const StepPrediction curved = predict_step(step, all_reduce, 4, system, cost);
  CHECK(curved.comm_ms == Approx(3.0));
  CHECK(curved.exposed_comm_ms == Approx(2.0));
  CHECK(curved.step_ms == Approx(22.0));
  const StepPrediction formulas = predict_step(step, all_reduce, 4, system, AlphaBetaCost(system));
  CHECK(formulas.comm_ms == Approx(1.56));
  // No reduce_scatter or all_gather curve: the sharded update stays on the formulas (0.78 ms each).
  const StepPrediction sharded = predict_step(step, sharded_update, 4, system, cost);
  CHECK(sharded.comm_ms == Approx(0.78 + 0.5 + 0.78));
}

TEST_CASE("comm_bench's link kind is intra_host on one host and inter_host across hosts", "[predict]") {
  CHECK(link_kind_of_hosts({"a", "a", "a"}) == LinkKind::intra_host);
  CHECK(link_kind_of_hosts({"a"}) == LinkKind::intra_host);
  CHECK(link_kind_of_hosts({"a", "a", "b", "b"}) == LinkKind::inter_host);
  CHECK(std::string(link_kind_name(LinkKind::inter_host)) == "inter_host");
}

TEST_CASE("predict takes the files after --curves up to the next flag", "[predict]") {
  TempDir dir;
  for (const char* name : {"base.json", "g2.json", "c1.json", "c2.json", "system.json"}) write_file(dir.file(name), "{}");
  const PredictOptions options =
      parse_predict_flags({dir.file("base.json"), dir.file("g2.json"), "--curves", dir.file("c1.json"),
                           dir.file("c2.json"), "--system", dir.file("system.json")});
  CHECK(options.measured_paths == std::vector<std::string>{dir.file("g2.json")});
  CHECK(options.curve_paths == std::vector<std::string>{dir.file("c1.json"), dir.file("c2.json")});
  const PredictOptions repeated = parse_predict_flags({dir.file("base.json"), "--curves=" + dir.file("c1.json"),
                                                       "--system", dir.file("system.json"), "--curves",
                                                       dir.file("c2.json")});
  CHECK(repeated.curve_paths.size() == 2);
  CHECK(repeated.measured_paths.empty());
  CHECK_THROWS_WITH(parse_predict_flags({dir.file("base.json"), "--system", dir.file("system.json"), "--curves"}),
                    "--curves: missing a value; e.g. --curves=FILE");
  CHECK_THROWS_WITH(parse_predict_flags({dir.file("base.json"), "--system", dir.file("system.json"), "--curves",
                                         dir.file("c1.json"), ""}),
                    "--curves: empty value; e.g. --curves=FILE");
  // A list flag given again adds its values; any other flag given twice must say the same both times.
  CHECK_THROWS_WITH(parse_predict_flags({dir.file("base.json"), "--system", dir.file("system.json"), "-system",
                                         dir.file("base.json")}),
                    "--system is given twice, as " + dir.file("system.json") + " and as " + dir.file("base.json") +
                        "; give it once");
  CHECK(parse_predict_flags({dir.file("base.json"), "--system", dir.file("system.json"), "-system=" +
                             dir.file("system.json")}).system_path == dir.file("system.json"));
  CHECK_THROWS_WITH(parse_predict_flags({dir.file("base.json"), "--system", dir.file("system.json"), "--curves",
                                         dir.file("nowhere.json")}),
                    "predict: no such curve file: '" + dir.file("nowhere.json") +
                        "' (give files dpbench comm_bench --json FILE wrote)");
  CHECK(run_cli({"predict", dir.file("base.json"), "--system", dir.file("system.json"), "--curves",
                 dir.file("nowhere.json")}) == 2);
}


TEST_CASE("a curve with a size, bandwidth, rank or host count no measurement has is refused, naming it",
          "[predict]") {
  const std::string prefix = "predict: curve file 'c.json': ";
  auto edited = [](const std::function<void(json&)>& edit) {
    json document = comm_bench_file();
    edit(document);
    return parse_error(document);
  };
  CHECK_THAT(edited([](json& d) { d["rows"][0]["size_bytes"] = 1e300; }),
             Catch::StartsWith(prefix + "row 0 has size_bytes 1e+300; sizes are whole bytes from 1 to 2^53"));
  CHECK_THAT(edited([](json& d) { d["rows"][0]["size_bytes"] = 4096.5; }),
             Catch::StartsWith(prefix + "row 0 has size_bytes 4096.5; sizes are whole bytes"));
  CHECK_THAT(edited([](json& d) { d["rows"][2]["busbw_gbps"] = 1e300; }),
             Catch::StartsWith(prefix + "row 2 (2048 B) has busbw_gbps 1e+300, impossible for a link"));
  CHECK_THAT(edited([](json& d) { d["ranks"] = uint64_t{10000000000000000000u}; }),
             Catch::StartsWith(prefix + "ranks is 10000000000000000000; expected a whole number from 1 to 16777216"));
  CHECK_THAT(edited([](json& d) { d["ranks"] = 2.5; }), Catch::StartsWith(prefix + "ranks is 2.5; expected a whole"));
  CHECK_THAT(edited([](json& d) { d["hosts"] = 5; }),
             Catch::StartsWith(prefix + "hosts 5 is more than its 2 ranks, impossible for a measurement"));
  // A name from the file is quoted escaped, never raw.
  CHECK(edited([](json& d) { d["config"]["op"] = "all\x1b[2J"; }) ==
        prefix + "config.op 'all\\x1B[2J' is no collective dpbench predicts with; accepted: all_reduce, "
                 "reduce_scatter, all_gather, reduce, broadcast");
}

TEST_CASE("a curve file holding a number no double holds is named with the number", "[predict]") {
  TempDir dir;
  json document = comm_bench_file();
  std::string text = document.dump();
  text.replace(text.find("\"time_us\":1.0"), 13, "\"time_us\":1e400");
  write_file(dir.file("huge.json"), text);
  CHECK(error_message_of<RuntimeError>([&] { load_collective_curve(dir.file("huge.json")); }, "error") ==
        "predict: curve file '" + dir.file("huge.json") +
            "': holds the number 1e400, beyond the range of a double (no file dpbench writes); write one with "
            "dpbench comm_bench --op=all_reduce --json FILE");
}

TEST_CASE("predict refuses a curve larger than comm_bench measures, writing nothing", "[predict]") {
  TempDir dir;
  json document = comm_bench_file();
  document["rows"][0]["size_bytes"] = int64_t{1} << 41;  // 2 TiB: past --max_bytes' 1024G
  write_file(dir.file("big.json"), document.dump());
  const std::string system = std::string(DPBENCH_SOURCE_DIR) + "/systems/reference_backend.json";
  // The curves are read before BASE: this fails on the curve, whatever BASE is.
  CHECK(run_cli({"predict", dir.file("big.json"), "--system", system, "--output", dir.file("out.md"), "--curves",
                 dir.file("big.json")}) == 1);
  CHECK_FALSE(std::filesystem::exists(dir.file("out.md")));
}

}  // namespace dpbench

namespace dpbench {

TEST_CASE("a curve's compute slowdown slows backward beside its transfers", "[predict]") {
  const SystemModel system = eight_gpu_hosts();
  json file = comm_bench_file();
  // Times as the rows' busbw gives them; beside compute the collective itself is not slowed.
  auto row = [](int64_t bytes, double time_beside_us) {
    return json{{"size_bytes", bytes},           {"busbw_gbps", 0.5},
                {"compute_slowdown", 0.5},       {"time_us", bytes * 1.5 / 0.5 / 1e3},
                {"time_beside_compute_us", time_beside_us}};
  };
  file["rows"] = json::array({row(1000, 3.0), row(1000000000, 3e6)});
  const MeasuredCurveCost cost(curves_by_collective({parse_collective_curve(file, "slowing.json")}),
                               std::make_shared<AlphaBetaCost>(system));
  // One 1e6-byte bucket ready at 5 ms of a 10 ms backward on 4 GPUs: its all-reduce takes 3 ms
  // (2 x 3/4 x 1e6 bytes at 0.5 GB/s), all inside backward, which does 2 ms of its work beside it
  // and so ends 1 ms late.
  const MeasuredStep step = one_bucket_step(5);
  const StepSchedule all_reduce =
      ReplicatedStrategy::schedule_for(StrategyOptions(), ParameterLayout(), {{0, 250000}}, ScheduleShape{4, 4, 1});
  const StepPrediction slowed = predict_step(step, all_reduce, 4, system, cost);
  CHECK(slowed.comm_ms == Approx(3.0));
  CHECK(slowed.exposed_comm_ms == Approx(1.0));
  CHECK(slowed.step_ms == Approx(21.0));

  // Beside compute the collective takes twice its time alone: from 5 ms both run, backward at 2/3
  // of its pace and the all-reduce at 1/2; the all-reduce ends at 11 ms (6 ms for its 3), backward
  // has done 4 of its last 5 ms by then and ends at 12; the bucket's update (2 ms) follows: 2 ms late.
  file["rows"] = json::array({row(1000, 6.0), row(1000000000, 6e6)});
  const MeasuredCurveCost both(curves_by_collective({parse_collective_curve(file, "both.json")}),
                               std::make_shared<AlphaBetaCost>(system));
  CHECK(both.collective_slowdown(Collective::all_reduce, 1e6, 4, LinkKind::intra_host) == Approx(1.0));
  const StepPrediction slower = predict_step(step, all_reduce, 4, system, both);
  CHECK(slower.comm_ms == Approx(3.0));  // the transfers' times alone
  CHECK(slower.exposed_comm_ms == Approx(2.0));
  CHECK(slower.step_ms == Approx(22.0));
}

}  // namespace dpbench
