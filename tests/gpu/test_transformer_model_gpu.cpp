// [gpu] nmt's Transformer on a GPU: the loss and every gradient match the reference backend in
// fp32 (TF32 off), bf16 and fp16, with dropout (the masks are the same counter-based draws on
// both backends); it learns its fixed batch through the CLI with the step replayed as a CUDA
// graph, in fp32 and bf16.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backends.h"
#include "tests/gpu/model_gpu_test_support.h"
#include "tests/host/sequence_test_support.h"
#include "tests/host/test_support.h"

using namespace dpbench::testing;  // build_model, check_gpu_matches_reference, run_cli, TempDir, ...

namespace {

// Odd lengths and vocabularies, a cross-attention of 6 queries by 7 keys, heads of 12, two loss
// chunks.
dpbench::RunConfig small_transformer(const std::string& dropout) {
  return sequence_config("nmt", 5,
                         {{"encoder_type", "transformer"}, {"direction", ""}, {"src_vocab_size", "301"},
                          {"tgt_vocab_size", "257"}, {"embedding_dim", "24"}, {"num_units", "24"},
                          {"num_heads", "2"}, {"ffn_units", "40"}, {"num_encoder_layers", "2"},
                          {"num_decoder_layers", "2"}, {"src_max_len", "7"}, {"tgt_max_len", "6"},
                          {"loss_chunk_rows", "16"}, {"dropout", dropout}});
}

}  // namespace

// fp32: the backends differ in the order they sum (~1e-7 relative per addition, compounded over
// 4 layers and the softmaxes to ~1e-5 of the largest gradient); 16-bit: a few units of the type,
// as the LSTM models' bound (tests/gpu/test_sequence_models_gpu.cpp).
TEST_CASE("the transformer on the GPU matches the reference backend", "[gpu][transformer]") {
  for (const std::string dropout : {"0", "0.1"}) {
    for (const auto& [precision, type, tolerance] :
         {std::tuple{dpbench::Precision::fp32, dpbench::DataType::f32, 2e-5}, std::tuple{dpbench::Precision::bf16, dpbench::DataType::bf16, 4e-2},
          std::tuple{dpbench::Precision::fp16, dpbench::DataType::f16, 6e-3}}) {
      INFO("dropout " << dropout << ", " << dpbench::precision_name(precision));
      dpbench::RunConfig config = small_transformer(dropout);
      config.precision = precision;
      check_gpu_matches_reference(*build_model(config), config.batch_size, type, std::max(1e-5, tolerance / 4),
                                  tolerance);
    }
  }
}

// Without dropout each sub-layer's residual joins its output projection's epilogue: fused, the
// sum is rounded once (the reference then rounds as the fused matmul does), plain three times.
TEST_CASE("the transformer matches the reference backend with cuBLASLt's fused linear passes and without",
          "[gpu][transformer]") {
  for (const std::string path : {"plain", "cublaslt"}) {
    for (const auto& [precision, type, tolerance] :
         {std::tuple{dpbench::Precision::bf16, dpbench::DataType::bf16, 4e-2},
          std::tuple{dpbench::Precision::fp16, dpbench::DataType::f16, 6e-3}}) {
      INFO("linear path " << path << ", " << dpbench::precision_name(precision));
      dpbench::RunConfig config = small_transformer("0");
      config.precision = precision;
      check_gpu_matches_reference(*build_model(config), config.batch_size, type, std::max(1e-5, tolerance / 4),
                                  tolerance, {}, path);
    }
  }
}

TEST_CASE("the transformer learns its fixed batch on the GPU replayed as a graph", "[gpu][transformer]") {
  TempDir dir;
  int index = 0;
  for (const std::string precision : {"fp32", "bf16"}) {
    const std::string file = dir.file("transformer" + std::to_string(index++) + ".json");
    REQUIRE(run_cli({"--model=nmt", "--encoder_type=transformer", "--batch_size=16", "--src_vocab_size=500",
                     "--tgt_vocab_size=400", "--num_units=64", "--num_heads=4", "--ffn_units=128",
                     "--num_encoder_layers=2", "--num_decoder_layers=2", "--src_max_len=10", "--tgt_max_len=10",
                     "--precision=" + precision, "--device=gpu", "--num_batches=60", "--num_warmup_batches=0",
                     "--learning_rate=0.002", "--display_every=1000", "--result_file=" + file}) == 0);
    const nlohmann::json result = read_json(file);
    const auto& steps = result["steps"];
    INFO(precision);
    CHECK(result["summary"]["cuda_graph"] == true);
    CHECK(result["summary"]["math"] == precision);
    const double first = steps[0]["loss"], last = steps[59]["loss"];
    INFO("first loss " << first << ", last " << last);
    CHECK(last < 0.6 * first);
  }
}
