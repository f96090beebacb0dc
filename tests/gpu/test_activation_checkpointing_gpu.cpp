// [gpu] --activation_checkpointing=blocks on a GPU: gpt, the Transformer and resnet50 recomputing
// their blocks give the same loss and gradients to the bit as without (fp32 and bf16, dropout on),
// and through the CLI, the step a replayed CUDA graph, the same losses and param_norm with at most
// half the activation bytes in summary.memory. Both sides run deterministically (--deterministic:
// dpbench's attention kernels, the ordered embedding scatter-add), so the only difference between
// them is the recomputation.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/backends.h"
#include "engine/cuda/cuda_controls.h"
#include "tests/gpu/model_gpu_test_support.h"
#include "tests/host/sequence_test_support.h"
#include "tests/host/test_support.h"

using namespace dpbench::testing;  // build_model, probe_one_step, same_bits, run_cli, TempDir, ...

namespace {

dpbench::RunConfig small_gpt(const std::string& dropout) {
  return sequence_config("gpt", 3,
                         {{"gpt_size", "custom"}, {"vocab_size", "301"}, {"seq_len", "70"}, {"num_layers", "4"},
                          {"num_heads", "2"}, {"hidden_size", "32"}, {"loss_chunk_rows", "128"},
                          {"dropout", dropout}});
}

dpbench::RunConfig small_transformer(const std::string& dropout) {
  return sequence_config("nmt", 5,
                         {{"encoder_type", "transformer"}, {"direction", ""}, {"src_vocab_size", "301"},
                          {"tgt_vocab_size", "257"}, {"embedding_dim", "24"}, {"num_units", "24"},
                          {"num_heads", "2"}, {"ffn_units", "40"}, {"num_encoder_layers", "3"},
                          {"num_decoder_layers", "3"}, {"src_max_len", "7"}, {"tgt_max_len", "6"},
                          {"loss_chunk_rows", "16"}, {"dropout", dropout}});
}

std::unique_ptr<dpbench::Device> deterministic_gpu() {
  std::unique_ptr<dpbench::Device> device = dpbench::create_cuda_device(0);
  dpbench::set_deterministic(*device, true);
  return device;
}

// One step with and one without recomputation on the GPU: the same bits; the activation bytes of both.
std::pair<uint64_t, uint64_t> check_same_bits_on_gpu(const dpbench::RunConfig& kept, dpbench::DataType type) {
  dpbench::RunConfig recomputed = kept;
  recomputed.activation_checkpointing = "blocks";
  const auto kept_model = build_model(kept);
  const auto recomputed_model = build_model(recomputed);
  const std::vector<float> values = kept_model->initial_parameters(9);
  const ProbedStep without = probe_one_step(*kept_model, deterministic_gpu(), kept.batch_size, type, values);
  const ProbedStep with = probe_one_step(*recomputed_model, deterministic_gpu(), kept.batch_size, type, values);
  CHECK(with.loss == without.loss);
  CHECK(same_bits(with.gradients, without.gradients));
  INFO("activation bytes: " << without.activation_bytes << " kept, " << with.activation_bytes << " recomputed");
  CHECK(with.activation_bytes < without.activation_bytes);
  return {without.activation_bytes, with.activation_bytes};
}

void check_sequence_model(const std::function<dpbench::RunConfig(const std::string&)>& config_of) {
  for (const std::string dropout : {"0", "0.1"}) {
    for (const auto& [precision, type] : {std::pair{dpbench::Precision::fp32, dpbench::DataType::f32},
                                          std::pair{dpbench::Precision::bf16, dpbench::DataType::bf16}}) {
      INFO("dropout " << dropout << ", " << dpbench::precision_name(precision));
      dpbench::RunConfig config = config_of(dropout);
      config.precision = precision;
      const auto [without, with] = check_same_bits_on_gpu(config, type);
      CHECK(with * 2 <= without);
    }
  }
}

nlohmann::json run(const TempDir& dir, const std::string& name, std::vector<std::string> flags) {
  flags.insert(flags.end(), {"--device=gpu", "--deterministic=true", "--display_every=1000",
                             "--num_batches=4", "--num_warmup_batches=2", "--result_file=" + dir.file(name)});
  REQUIRE(run_cli(flags) == 0);
  return read_json(dir.file(name));
}

}  // namespace

TEST_CASE("gpt recomputing its blocks on the GPU gives the same bits with half the activations",
          "[gpu][activation_checkpointing]") {
  check_sequence_model(small_gpt);
}

TEST_CASE("the Transformer recomputing its layers on the GPU gives the same bits with half the activations",
          "[gpu][activation_checkpointing]") {
  check_sequence_model(small_transformer);
}

TEST_CASE("resnet50 recomputing its bottlenecks on the GPU gives the same bits with fewer activations",
          "[gpu][activation_checkpointing]") {
  for (const auto& [format, precision, type] :
       {std::tuple{"NCHW", dpbench::Precision::fp32, dpbench::DataType::f32},
        std::tuple{"NHWC", dpbench::Precision::bf16, dpbench::DataType::bf16}}) {
    INFO(format << ", " << dpbench::precision_name(precision));
    dpbench::RunConfig config;
    config.model = "resnet50";
    config.batch_size = 4;
    config.data_format = format;
    config.precision = precision;
    check_same_bits_on_gpu(config, type);
  }
}

TEST_CASE("recomputing blocks through the CLI on the GPU: the same training, replayed as a graph, half the activations",
          "[gpu][activation_checkpointing]") {
  TempDir dir;
  const std::vector<std::vector<std::string>> workloads = {
      {"--model=gpt", "--batch_size=4", "--vocab_size=512", "--seq_len=128", "--num_layers=4", "--num_heads=4",
       "--hidden_size=128", "--dropout=0.1"},
      {"--model=nmt", "--encoder_type=transformer", "--batch_size=16", "--src_vocab_size=500", "--tgt_vocab_size=400",
       "--num_units=64", "--num_heads=4", "--ffn_units=256", "--num_encoder_layers=3", "--num_decoder_layers=3",
       "--src_max_len=20", "--tgt_max_len=20"},
  };
  int index = 0;
  for (const auto& workload : workloads) {
    for (const std::string precision : {"fp32", "bf16"}) {
      INFO(workload[0] << " " << precision);
      std::vector<std::string> flags = workload;
      flags.push_back("--precision=" + precision);
      const nlohmann::json kept = run(dir, "kept" + std::to_string(index) + ".json", flags);
      flags.push_back("--activation_checkpointing=blocks");
      const nlohmann::json recomputed = run(dir, "recomputed" + std::to_string(index) + ".json", flags);
      ++index;
      CHECK(recomputed["summary"]["cuda_graph"] == true);
      CHECK(kept["summary"]["param_norm"].get<double>() == recomputed["summary"]["param_norm"].get<double>());
      for (size_t step = 0; step < kept["steps"].size(); ++step)
        CHECK(kept["steps"][step]["loss"].get<double>() == recomputed["steps"][step]["loss"].get<double>());
      const uint64_t kept_bytes = kept["summary"]["memory"]["devices"][0]["at_step_peak"]["activations"];
      const uint64_t recomputed_bytes = recomputed["summary"]["memory"]["devices"][0]["at_step_peak"]["activations"];
      INFO("activations " << kept_bytes << " kept, " << recomputed_bytes << " recomputed");
      CHECK(recomputed_bytes * 2 <= kept_bytes);
      CHECK(recomputed["summary"]["flops"]["recompute_flops_per_step_per_device"].get<double>() > 0);
    }
  }
}
