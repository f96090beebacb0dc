// End-to-end runs of the whole command line on the reference backend (what CI can run): result
// files, step records, warm-up marking, determinism, and bad input leaving no result behind.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "tests/host/test_support.h"

using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;

TEST_CASE("5 batches after 2 warm-up batches on 2 devices write 7 step records, 2 of them warm-up",
          "[end_to_end]") {
  TempDir dir;
  const std::string out = dir.file("out.json");
  REQUIRE(run_cli({"--device=cpu", "--model=trivial", "--num_gpus=2", "--num_batches=5",
                   "--num_warmup_batches=2", "--result_file=" + out}) == 0);
  const nlohmann::json result = read_json(out);
  REQUIRE(result["schema_version"] == 3);
  REQUIRE(result["steps"].size() == 7);
  int warmup = 0;
  for (size_t i = 0; i < result["steps"].size(); ++i) {
    const auto& step = result["steps"][i];
    CHECK(step["step"] == static_cast<int>(i));
    CHECK(step["warmup"] == (i < 2));
    CHECK(step["time_ms"].get<double>() > 0);
    warmup += step["warmup"].get<bool>() ? 1 : 0;
  }
  CHECK(warmup == 2);
  CHECK(result["summary"]["measured_steps"] == 5);
  CHECK(result["summary"]["warmup_steps"] == 2);
  CHECK(result["summary"]["num_devices"] == 2);
  CHECK(result["environment"]["backend"] == "reference");
  CHECK(result["environment"]["devices"].size() == 2);
  CHECK(result["config"]["num_gpus"] == 2);
  CHECK(result["config"]["model"] == "trivial");
  CHECK(result["summary"]["unit"] == "images/s");
  CHECK(result["summary"]["items_per_sec"].get<double>() > 0);
  CHECK(result["summary"]["num_parameters"] == 3072 * 256 + 256 + 256 * 10 + 10);
  CHECK(std::filesystem::directory_iterator(dir.path()) != std::filesystem::directory_iterator());
}

TEST_CASE("runs on 1, 2 and 4 reference devices measure exactly num_batches steps", "[end_to_end]") {
  for (int devices : {1, 2, 4}) {
    TempDir dir;
    const std::string out = dir.file("result.json");
    REQUIRE(run_cli({"--device=cpu", "--num_gpus=" + std::to_string(devices), "--batch_size=4",
                     "--num_batches=6", "--num_warmup_batches=3", "--display_every=2",
                     "--result_file=" + out}) == 0);
    const nlohmann::json result = read_json(out);
    INFO("devices " << devices);
    CHECK(result["summary"]["measured_steps"] == 6);
    CHECK(result["summary"]["num_devices"] == devices);
    CHECK(result["summary"]["global_batch_size"] == 4 * devices);
    CHECK(result["summary"]["items_per_step"] == 4 * devices);
    CHECK(result["steps"].size() == 9);
    CHECK(result["summary"]["step_time_ms"]["count"] == 6);
    CHECK(result["summary"]["jitter"].is_number());
    CHECK(result["summary"]["total_time_s"].get<double>() > 0);
  }
}

TEST_CASE("trivial's loss falls when trained on its fixed synthetic batch", "[end_to_end]") {
  TempDir dir;
  const std::string out = dir.file("result.json");
  REQUIRE(run_cli({"--device=cpu", "--batch_size=8", "--num_batches=30", "--num_warmup_batches=0",
                   "--learning_rate=0.1", "--result_file=" + out}) == 0);
  const nlohmann::json result = read_json(out);
  const double first = result["steps"].front()["loss"];
  const double last = result["steps"].back()["loss"];
  INFO("first loss " << first << ", last loss " << last);
  CHECK(first > 1.5);         // about ln(10) = 2.30 for random labels at initialisation
  CHECK(last < 0.5 * first);  // 8 samples are easy to memorise
  CHECK(result["summary"]["final_loss"].get<double>() == Approx(last));
}

TEST_CASE("independent replica 0 trains exactly as a single device does", "[end_to_end]") {
  // Replica 0 of N sees samples [0, B) of the global batch whatever N is, and independent
  // exchanges nothing, so its final parameters cannot depend on N.
  TempDir dir;
  REQUIRE(run_cli({"--device=cpu", "--num_gpus=1", "--batch_size=4", "--num_batches=4",
                   "--num_warmup_batches=1", "--result_file=" + dir.file("one.json")}) == 0);
  REQUIRE(run_cli({"--device=cpu", "--num_gpus=3", "--batch_size=4", "--num_batches=4",
                   "--num_warmup_batches=1", "--result_file=" + dir.file("three.json")}) == 0);
  const double one = read_json(dir.file("one.json"))["summary"]["param_norm"];
  const double three = read_json(dir.file("three.json"))["summary"]["param_norm"];
  CHECK(one > 0);
  CHECK(one == three);  // same ops, same order, same data: bit-identical
}

TEST_CASE("the same seed gives the same losses and another seed does not", "[end_to_end]") {
  TempDir dir;
  auto run = [&](const std::string& name, const std::string& seed) {
    REQUIRE(run_cli({"--device=cpu", "--batch_size=4", "--num_batches=3", "--num_warmup_batches=0",
                     "--seed=" + seed, "--result_file=" + dir.file(name)}) == 0);
    return read_json(dir.file(name))["summary"]["final_loss"].get<double>();
  };
  const double a = run("a.json", "7"), b = run("b.json", "7"), c = run("c.json", "8");
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("bad input exits 2 and leaves no result file", "[end_to_end]") {
  TempDir dir;
  const std::string out = dir.file("never.json");
  CHECK(run_cli({"--device=cpu", "--model=nosuchmodel", "--result_file=" + out}) == 2);
  CHECK(run_cli({"--device=cpu", "--num_gpus=0", "--result_file=" + out}) == 2);
  CHECK(run_cli({"--device=cpu", "--batch_size=-1", "--result_file=" + out}) == 2);
  CHECK(run_cli({"--device=cpu", "--num_gpus=4", "--total_batch_size=10", "--result_file=" + out}) == 2);
  CHECK(run_cli({"--device=cpu", "--variable_update=bogus", "--result_file=" + out}) == 2);
  CHECK(run_cli({"--device=cpu", "--result_file=" + dir.file("missing/dir/out.json")}) == 2);
  CHECK(run_cli({"report"}) == 2);
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("flags --help and --version succeed without running", "[end_to_end]") {
  CHECK(run_cli({"--help"}) == 0);
  CHECK(run_cli({"--version"}) == 0);
}

TEST_CASE("the reference backend records that it launched steps op by op", "[end_to_end]") {
  TempDir dir;
  REQUIRE(run_cli({"--device=cpu", "--batch_size=2", "--num_batches=3", "--num_warmup_batches=2",
                   "--cuda_graph=true", "--result_file=" + dir.file("r.json")}) == 0);
  const nlohmann::json result = read_json(dir.file("r.json"));
  CHECK(result["config"]["cuda_graph"] == true);
  CHECK(result["summary"]["cuda_graph"] == false);
  // Each step's loss is filed under its own step by the device-side cursor.
  for (const auto& step : result["steps"]) CHECK(std::isfinite(step["loss"].get<double>()));
  CHECK(run_cli({"--device=cpu", "--cuda_graph=maybe", "--result_file="}) == 2);
}

TEST_CASE("a tf32 run on the reference backend computes, and reports, plain fp32", "[end_to_end]") {
  TempDir dir;
  REQUIRE(run_cli({"--device=cpu", "--batch_size=2", "--num_batches=2", "--num_warmup_batches=0",
                   "--precision=tf32", "--result_file=" + dir.file("r.json")}) == 0);
  const nlohmann::json result = read_json(dir.file("r.json"));
  CHECK(result["config"]["precision"] == "tf32");
  CHECK(result["summary"]["math"] == "fp32");
}

TEST_CASE("rnnlm with sparse embedding gradients runs end to end and says so", "[end_to_end]") {
  // The README's reference command with --sparse_embedding_grads, on a small rnnlm (the default
  // shapes take minutes on the reference backend); exit code 2 for a spec it does not run on.
  TempDir dir;
  const std::vector<std::string> args = {"--device=cpu", "--model=rnnlm", "--num_gpus=2",
                                         "--variable_update=replicated", "--sparse_embedding_grads",
                                         "--num_batches=3", "--num_warmup_batches=1", "--vocab_size=101",
                                         "--batch_size=8", "--seq_len=5"};
  std::vector<std::string> with_file = args;
  with_file.push_back("--result_file=" + dir.file("r.json"));
  REQUIRE(run_cli(with_file) == 0);
  const nlohmann::json result = read_json(dir.file("r.json"));
  CHECK(result["config"]["sparse_embedding_grads"] == true);
  CHECK(result["summary"]["comm"]["embedding_exchange"] == "sparse");
  CHECK(result["steps"].size() == 4);
  CHECK(std::isfinite(result["summary"]["final_loss"].get<double>()));
  std::vector<std::string> on_xring = args;
  on_xring.push_back("--all_reduce_spec=xring");
  on_xring.push_back("--result_file=" + dir.file("x.json"));
  CHECK(run_cli(on_xring) == 2);
  CHECK_FALSE(std::filesystem::exists(dir.file("x.json")));
}

TEST_CASE("the deterministic flag is recorded and changes nothing on the reference backend", "[end_to_end]") {
  // The reference backend sums in a fixed order already: the flag must leave its bits alone.
  TempDir dir;
  const std::vector<std::string> args = {"--device=cpu", "--model=rnnlm", "--num_gpus=2",
                                         "--variable_update=replicated", "--num_batches=2",
                                         "--num_warmup_batches=1", "--vocab_size=101",
                                         "--batch_size=8", "--seq_len=5"};
  std::vector<std::string> plain = args, deterministic = args;
  plain.push_back("--result_file=" + dir.file("plain.json"));
  deterministic.insert(deterministic.end(), {"--deterministic", "--result_file=" + dir.file("det.json")});
  REQUIRE(run_cli(plain) == 0);
  REQUIRE(run_cli(deterministic) == 0);
  const nlohmann::json a = read_json(dir.file("plain.json")), b = read_json(dir.file("det.json"));
  CHECK(a["config"]["deterministic"] == false);
  CHECK(b["config"]["deterministic"] == true);
  CHECK(a["summary"]["param_norm"].get<double>() == b["summary"]["param_norm"].get<double>());
}

TEST_CASE("a result records the arguments that made it and the run tag a sweep gave it", "[end_to_end]") {
  TempDir dir;
  const std::string out = dir.file("out.json");
  const std::vector<std::string> args = {"--device=cpu", "--model=trivial", "--num_batches=2",
                                         "--num_warmup_batches=0", "--result_file=" + out};
  ::setenv("DPBENCH_RUN_TAG", "4242-1700000000000000000-3", 1);
  const int code = run_cli(args);
  ::unsetenv("DPBENCH_RUN_TAG");
  REQUIRE(code == 0);
  const nlohmann::json invocation = read_json(out)["invocation"];
  CHECK(invocation["argv"] == nlohmann::json(args));
  CHECK(invocation["run_tag"] == "4242-1700000000000000000-3");

  // Without the variable there is no tag: a sweep's rerun cannot mistake this result for its own.
  REQUIRE(run_cli(args) == 0);
  CHECK_FALSE(read_json(out)["invocation"].contains("run_tag"));
}
