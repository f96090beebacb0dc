// [gpu] gpt on a GPU: the loss and every gradient match the reference backend in fp32 (TF32 off),
// bf16 and fp16, with and without dropout; it learns its fixed batch through the CLI with the step
// replayed as a CUDA graph, in fp32, tf32 and bf16.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backends.h"
#include "engine/cuda/cuda_controls.h"
#include "tests/gpu/model_gpu_test_support.h"
#include "tests/host/sequence_test_support.h"
#include "tests/host/test_support.h"

using namespace dpbench::testing;  // build_model, check_gpu_matches_reference, run_cli, TempDir, ...

namespace {

// An odd vocabulary (the logits padded to a multiple of 16), 70 positions (one attention tile and
// a part), heads of 16, three blocks, two loss chunks.
dpbench::RunConfig small_gpt(const std::string& dropout) {
  return sequence_config("gpt", 3,
                         {{"gpt_size", "custom"}, {"vocab_size", "301"}, {"seq_len", "70"}, {"num_layers", "3"},
                          {"num_heads", "2"}, {"hidden_size", "32"}, {"loss_chunk_rows", "128"},
                          {"dropout", dropout}});
}

}  // namespace

// Tolerances as the Transformer's (tests/gpu/test_transformer_model_gpu.cpp).
TEST_CASE("gpt on the GPU matches the reference backend", "[gpu][gpt]") {
  for (const std::string dropout : {"0", "0.1"}) {
    for (const auto& [precision, type, tolerance] :
         {std::tuple{dpbench::Precision::fp32, dpbench::DataType::f32, 2e-5},
          std::tuple{dpbench::Precision::bf16, dpbench::DataType::bf16, 4e-2},
          std::tuple{dpbench::Precision::fp16, dpbench::DataType::f16, 6e-3}}) {
      INFO("dropout " << dropout << ", " << dpbench::precision_name(precision));
      dpbench::RunConfig config = small_gpt(dropout);
      config.precision = precision;
      check_gpu_matches_reference(*build_model(config), config.batch_size, type, std::max(1e-5, tolerance / 4),
                                  tolerance);
    }
  }
}

TEST_CASE("gpt matches the reference backend with cuBLASLt's fused linear passes and without", "[gpu][gpt]") {
  for (const std::string path : {"plain", "cublaslt"}) {
    for (const auto& [precision, type, tolerance] :
         {std::tuple{dpbench::Precision::bf16, dpbench::DataType::bf16, 4e-2},
          std::tuple{dpbench::Precision::fp16, dpbench::DataType::f16, 6e-3}}) {
      INFO("linear path " << path << ", " << dpbench::precision_name(precision));
      dpbench::RunConfig config = small_gpt("0");
      config.precision = precision;
      check_gpu_matches_reference(*build_model(config), config.batch_size, type, std::max(1e-5, tolerance / 4),
                                  tolerance, {}, path);
    }
  }
}

TEST_CASE("gpt learns its fixed batch on the GPU replayed as a graph", "[gpu][gpt]") {
  TempDir dir;
  int index = 0;
  for (const std::string precision : {"fp32", "tf32", "bf16", "fp16"}) {
    const std::string file = dir.file("gpt" + std::to_string(index++) + ".json");
    REQUIRE(run_cli({"--model=gpt", "--batch_size=8", "--vocab_size=512", "--seq_len=128", "--num_layers=2",
                     "--num_heads=4", "--hidden_size=128", "--precision=" + precision, "--device=gpu",
                     "--num_batches=60", "--num_warmup_batches=0", "--learning_rate=0.002", "--display_every=1000",
                     "--result_file=" + file}) == 0);
    const nlohmann::json result = read_json(file);
    const auto& steps = result["steps"];
    INFO(precision);
    CHECK(result["summary"]["cuda_graph"] == true);
    const double first = steps[0]["loss"], last = steps[59]["loss"];
    INFO("first loss " << first << ", last " << last);
    CHECK(first == Approx(std::log(512.0)).margin(0.2));
    CHECK(last < 0.6 * first);
  }
}
