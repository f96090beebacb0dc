// System files (reports/system_description.h): the shipped ones parse, and a file with an unknown,
// missing, unsourced or out-of-range field is refused with a line naming the field.
#include <catch2/catch.hpp>

#include <filesystem>

#include "engine/errors.h"
#include "reports/system_description.h"

namespace dpbench {
namespace {

nlohmann::json minimal_system() {
  nlohmann::json system = {{"name", "test"}};
  for (const char* field : {"intra_host_bandwidth_GBps", "intra_host_latency_us", "inter_host_bandwidth_GBps",
                            "inter_host_latency_us", "host_copy_bandwidth_GBps", "host_copy_latency_us"})
    system[field] = {{"value", 1.5}, {"source", "made up"}};
  system["gpus_per_host"] = {{"value", 8}, {"source", "made up"}};
  system["algorithm"] = {{"value", "tree"}, {"source", "made up"}};
  system["communication_overlaps_compute"] = {{"value", true}, {"source", "made up"}};
  return system;
}

}  // namespace

TEST_CASE("every shipped system file parses", "[predict]") {
  const std::filesystem::path systems = std::filesystem::path(DPBENCH_SOURCE_DIR) / "systems";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(systems)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    INFO(entry.path().string());
    const SystemDescription system = load_system_description(entry.path().string());
    CHECK(system.model.gpus_per_host >= 1);
    CHECK(system.sources.size() >= 9);  // the required fields, and any optional one given
  }
  CHECK(files >= 4);
}

TEST_CASE("a system file's values land in the model", "[predict]") {
  const SystemDescription system = parse_system_description(minimal_system(), "test.json");
  CHECK(system.model.gpus_per_host == 8);
  CHECK(system.model.algorithm == CollectiveAlgorithm::tree);
  CHECK(system.model.inter_host.latency_us == 1.5);
  CHECK(system.sources.at("algorithm") == "made up");
}

TEST_CASE("a system file with an unknown missing or unsourced field is refused", "[predict]") {
  nlohmann::json unknown = minimal_system();
  unknown["nvlink_generation"] = {{"value", 4}, {"source", "made up"}};
  CHECK_THROWS_WITH(parse_system_description(unknown, "x.json"),
                    Catch::Contains("system file 'x.json': unknown field 'nvlink_generation'; accepted: name"));
  nlohmann::json missing = minimal_system();
  missing.erase("host_copy_latency_us");
  CHECK_THROWS_WITH(parse_system_description(missing, "x.json"), Catch::Contains("missing 'host_copy_latency_us'"));
  nlohmann::json unsourced = minimal_system();
  unsourced["gpus_per_host"] = {{"value", 8}};
  CHECK_THROWS_WITH(parse_system_description(unsourced, "x.json"), Catch::Contains("'gpus_per_host' must be"));
  nlohmann::json zero = minimal_system();
  zero["intra_host_bandwidth_GBps"]["value"] = 0;
  CHECK_THROWS_WITH(parse_system_description(zero, "x.json"), Catch::Contains("value 0 not accepted"));
  nlohmann::json algorithm = minimal_system();
  algorithm["algorithm"]["value"] = "nvls";
  CHECK_THROWS_WITH(parse_system_description(algorithm, "x.json"), Catch::Contains("accepted: \"ring\" or \"tree\""));
}

}  // namespace dpbench

namespace dpbench {

TEST_CASE("compute's slowdown beside communication is optional in a system file, a fraction from 0 below 5",
          "[predict]") {
  CHECK(parse_system_description(minimal_system(), "x.json").model.compute_slowdown_beside_communication == 0);
  nlohmann::json slowed = minimal_system();
  slowed["compute_slowdown_beside_communication"] = {{"value", 0.08}, {"source", "measured: comm_bench"}};
  const SystemDescription system = parse_system_description(slowed, "x.json");
  CHECK(system.model.compute_slowdown_beside_communication == 0.08);
  CHECK(system.sources.at("compute_slowdown_beside_communication") == "measured: comm_bench");
  CHECK(AlphaBetaCost(system.model).compute_slowdown(Collective::all_gather, 1e6, 2, LinkKind::intra_host) == 0.08);
  CHECK(AlphaBetaCost(system.model).compute_slowdown(Collective::copy_to_host, 1e6, 1, LinkKind::intra_host) == 0);
  for (const nlohmann::json& bad : {nlohmann::json(-0.1), nlohmann::json(5), nlohmann::json("0.1")}) {
    INFO(bad.dump());
    slowed["compute_slowdown_beside_communication"]["value"] = bad;
    CHECK_THROWS_WITH(parse_system_description(slowed, "x.json"),
                      Catch::Contains("'compute_slowdown_beside_communication': value") &&
                          Catch::Contains("accepted: a fraction >= 0 and < 5"));
  }
}

}  // namespace dpbench
