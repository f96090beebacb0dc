// What a result records of the machine beyond its devices (the hosts and their ranks, the CPU, the
// NCCL_* and CUDA_* variables that were set), read back from JSON, and the report's notes when
// the runs of one series ran on different topologies.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "engine/machine/environment.h"
#include "reports/report_tables.h"
#include "reports/result_json.h"
#include "tests/host/report_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;

TEST_CASE("the environment's hosts, CPU and NCCL and CUDA variables survive the JSON round trip", "[topology]") {
  Result result = make_fixture_result(replicated_run(4, 1000));
  result.environment.launcher = "torchrun";
  result.environment.ranks_per_host = {{"hostA", 2}, {"hostB", 2}};
  result.environment.cpu_model = "Some CPU @ 2.0GHz";
  result.environment.variables = {{"NCCL_ALGO", "Ring"}, {"CUDA_VISIBLE_DEVICES", "0,1"}};
  const Result back = result_from_json(result_to_json(result));
  CHECK(back.environment.launcher == "torchrun");
  CHECK(back.environment.ranks_per_host == result.environment.ranks_per_host);
  CHECK(back.environment.cpu_model == "Some CPU @ 2.0GHz");
  CHECK(back.environment.variables == result.environment.variables);
  nlohmann::json wrong = result_to_json(result);
  wrong["environment"]["ranks_per_host"]["hostA"] = "two";
  CHECK_THROWS_WITH(result_from_json(wrong), Catch::Matchers::Contains("environment.ranks_per_host.hostA"));
}

TEST_CASE("the NCCL_ and CUDA_ variables set, and the CPU's model, come from this process", "[topology]") {
  ::setenv("NCCL_DPBENCH_TEST_VARIABLE", "42", 1);
  const auto found = variables_with_prefixes({"NCCL_", "CUDA_"});
  ::unsetenv("NCCL_DPBENCH_TEST_VARIABLE");
  REQUIRE(found.count("NCCL_DPBENCH_TEST_VARIABLE") == 1);
  CHECK(found.at("NCCL_DPBENCH_TEST_VARIABLE") == "42");
  for (const auto& [name, value] : found) CHECK((name.rfind("NCCL_", 0) == 0 || name.rfind("CUDA_", 0) == 0));
  CHECK(cpu_model_name().find('\n') == std::string::npos);
}

TEST_CASE("a series whose runs span different numbers of hosts, or NCCL settings, says so", "[topology]") {
  TempDir dir;
  Result one = make_fixture_result(replicated_run(1, 1000));
  Result two = make_fixture_result(replicated_run(2, 1900));
  Result four = make_fixture_result(replicated_run(4, 3600));
  four.environment.ranks_per_host = {{"hostA", 2}, {"hostB", 2}};
  write_result_atomically(one, dir.file("one.json"));
  write_result_atomically(two, dir.file("two.json"));
  write_result_atomically(four, dir.file("four.json"));
  std::string markdown = render_markdown(report_of({dir.path().string()}));
  CHECK_THAT(markdown, Catch::Matchers::Contains(
                           "The runs span different numbers of hosts: 1 host (1, 2 GPUs); 2 hosts (4 GPUs)"));
  CHECK_THAT(markdown, !Catch::Matchers::Contains("The runs differ in NCCL_"));
  two.environment.variables = {{"NCCL_ALGO", "Tree"}};
  write_result_atomically(two, dir.file("two.json"));
  markdown = render_markdown(report_of({dir.path().string()}));
  CHECK_THAT(markdown, Catch::Matchers::Contains("The runs differ in NCCL_ALGO ((unset), Tree)"));
}

TEST_CASE("a sweep's N-GPU runs on the first N GPUs of one list are like for like, runs on other GPUs are not", "[topology]") {
  TempDir dir;
  Result one = make_fixture_result(replicated_run(1, 1000));
  Result two = make_fixture_result(replicated_run(2, 1900));
  Result four = make_fixture_result(replicated_run(4, 3600));
  one.environment.variables = {{"CUDA_VISIBLE_DEVICES", "2"}};
  two.environment.variables = {{"CUDA_VISIBLE_DEVICES", "2,3"}};
  four.environment.variables = {{"CUDA_VISIBLE_DEVICES", "2,3,0,1"}};
  write_result_atomically(one, dir.file("one.json"));
  write_result_atomically(two, dir.file("two.json"));
  write_result_atomically(four, dir.file("four.json"));
  CHECK_THAT(render_markdown(report_of({dir.path().string()})), !Catch::Matchers::Contains("CUDA_VISIBLE_DEVICES"));
  // The 1-GPU run on a GPU the others do not start with: said.
  one.environment.variables = {{"CUDA_VISIBLE_DEVICES", "1"}};
  write_result_atomically(one, dir.file("one.json"));
  CHECK_THAT(render_markdown(report_of({dir.path().string()})),
             Catch::Matchers::Contains("The runs differ in CUDA_VISIBLE_DEVICES (1, 2,3, 2,3,0,1)"));
}
