// [gpu] A real GPU run against dpbench's own reference results (README, "Is my number normal?"):
// gpt 124m at batch 16 in bf16, a workload the checkout's references measured on an H200, gets
// summary.reference with the reference named and a ratio; the same model at a batch no reference
// has gets none, naming the nearest and its batch. The ratio's value is a measurement, not
// something a test may assert (it is printed for the record).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli/reference_lookup.h"
#include "tests/host/test_support.h"

namespace dpbench {

TEST_CASE("[gpu] a GPU run finds the shipped reference of its workload, and one of another batch finds none",
          "[gpu][reference_results]") {
  unsetenv(kReferenceFolderVariable);  // the checkout's references, as a build-tree dpbench reads them
  testing::TempDir dir;
  const std::string matched = dir.file("gpt_b16.json"), unmatched = dir.file("gpt_b2.json");
  REQUIRE(testing::run_cli({"--device=gpu", "--model=gpt", "--batch_size=16", "--precision=bf16", "--num_batches=10",
                            "--num_warmup_batches=3", "--result_file=" + matched}) == 0);
  const nlohmann::json result = testing::read_json(matched);
  const nlohmann::json& reference = result["summary"]["reference"];
  INFO(reference.dump(1));
  REQUIRE(reference["matched"] == true);
  const std::filesystem::path folder = reference["folder"].get<std::string>();
  CHECK(std::filesystem::is_regular_file(folder / "2026-11-29_h200" / "gpt_124m_b16_bf16_1gpu.json"));
  // Where the build tree is still in its checkout, that checkout's folder (a carried copy finds its own).
  const std::filesystem::path built_in = std::string(DPBENCH_SOURCE_DIR) + "/reference_results";
  if (std::filesystem::is_directory(built_in)) CHECK(std::filesystem::equivalent(folder, built_in));
  CHECK(reference["files"] == nlohmann::json::array({"2026-11-29_h200/gpt_124m_b16_bf16_1gpu.json"}));
  CHECK(reference["label"] == "H200 reference (2026-11-29, 700 W)");
  REQUIRE(reference["ratio"].is_number());
  CHECK(reference["ratio"].get<double>() > 0);
  CHECK(reference["run_speed"].get<double>() > 0);
  WARN("this GPU at " << reference["ratio"].get<double>() << " of the H200 reference ("
                      << reference["machine_differences"].dump() << ")");
  // On an H200 SXM the GPU itself is no difference.
  if (result["environment"]["devices"][0]["name"] == "NVIDIA H200")
    for (const nlohmann::json& difference : reference["machine_differences"])
      CHECK(difference.get<std::string>().rfind("another GPU", 0) != 0);

  REQUIRE(testing::run_cli({"--device=gpu", "--model=gpt", "--batch_size=2", "--precision=bf16", "--num_batches=3",
                            "--num_warmup_batches=1", "--result_file=" + unmatched}) == 0);
  const nlohmann::json none = testing::read_json(unmatched)["summary"]["reference"];
  INFO(none.dump(1));
  CHECK(none["matched"] == false);
  CHECK(none["nearest"]["file"] == "2026-11-29_h200/gpt_124m_b16_bf16_1gpu.json");
  CHECK(none["nearest"]["differs_in"] == nlohmann::json::array({"batch_size (this run 2; reference 16)"}));
}

}  // namespace dpbench
