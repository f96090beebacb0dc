// [gpu] The sequence models on a GPU: cudnn_lstm (cuDNN's fused RNN) and dynamic (our GEMMs and
// cell kernels) compute the same network; both match the reference backend; nmt and rnnlm learn
// their fixed batch through the CLI with Adam replayed as CUDA graphs, and the result counts the
// kernels of a step; in bf16 and fp16 they match the reference backend's 16-bit ops and learn too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backends.h"
#include "tests/gpu/model_gpu_test_support.h"
#include "tests/host/model_probe.h"
#include "tests/host/sequence_test_support.h"
#include "tests/host/test_support.h"

using dpbench::testing::build_model;
using dpbench::testing::check_gpu_matches_reference;
using dpbench::testing::largest_magnitude;
using dpbench::testing::ModelProbe;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::sequence_config;
using dpbench::testing::TempDir;

namespace {

// A small nmt with shapes no kernel can special-case: odd sizes, a vocabulary that is not a
// multiple of any tile, three loss chunks.
dpbench::RunConfig small_nmt(const std::string& encoder_type, const std::string& direction) {
  return sequence_config("nmt", 5,
                         {{"encoder_type", encoder_type}, {"direction", direction},
                          {"src_vocab_size", "301"}, {"tgt_vocab_size", "257"}, {"embedding_dim", "24"},
                          {"num_units", "20"}, {"num_encoder_layers", "2"}, {"num_decoder_layers", "2"},
                          {"src_max_len", "7"}, {"tgt_max_len", "6"}, {"loss_chunk_rows", "12"}});
}

// small_nmt in each encoder and direction, and a small rnnlm of each encoder (odd sizes, two loss
// chunks).
std::vector<dpbench::RunConfig> every_small_variant() {
  std::vector<dpbench::RunConfig> configs;
  for (const char* type : {"cudnn_lstm", "dynamic"})
    for (const char* direction : {"uni", "bi"}) configs.push_back(small_nmt(type, direction));
  for (const char* type : {"cudnn_lstm", "dynamic"})
    configs.push_back(sequence_config("rnnlm", 6, {{"encoder_type", type}, {"vocab_size", "333"},
                                                   {"embedding_dim", "12"}, {"num_units", "36"},
                                                   {"seq_len", "9"}, {"loss_chunk_rows", "20"}}));
  return configs;
}

// fp32 everywhere (TF32 is off unless --precision=tf32): the implementations differ only in the
// order they sum, about 1e-7 relative per addition, which T steps of recurrence and the layers
// compound to ~1e-5 of the largest gradient; a wrong gate, bias or state slot is off by O(1).
void check_same(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  const double largest = largest_magnitude(b);
  REQUIRE(largest > 0);
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::abs(a[i] - b[i]) > 2e-5 * largest + 1e-3 * std::abs(b[i])) {
      if (++bad <= 5) FAIL_CHECK("gradient " << i << ": " << a[i] << " vs " << b[i]);
    }
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("cudnn_lstm and dynamic give the same nmt loss and gradients on the GPU", "[gpu]") {
  const auto fused = build_model(small_nmt("cudnn_lstm", "uni"));
  const auto unrolled = build_model(small_nmt("dynamic", "uni"));
  const std::vector<float> values = fused->initial_parameters(5);
  REQUIRE(values == unrolled->initial_parameters(5));
  ModelProbe a(*fused, dpbench::create_cuda_device(0), 5);
  ModelProbe b(*unrolled, dpbench::create_cuda_device(0), 5);
  const double loss_a = a.loss_at(values), loss_b = b.loss_at(values);
  CHECK(loss_a == Approx(loss_b).epsilon(1e-5));
  check_same(a.gradients(), b.gradients());
}

TEST_CASE("nmt and rnnlm on the GPU match the reference backend in every variant", "[gpu]") {
  const std::vector<dpbench::RunConfig> configs = every_small_variant();
  for (const dpbench::RunConfig& config : configs) {
    INFO(config.model << " " << config.sequence.encoder_type << " " << config.sequence.direction);
    const auto model = build_model(config);
    const std::vector<float> values = model->initial_parameters(9);
    ModelProbe gpu(*model, dpbench::create_cuda_device(0), config.batch_size);
    ModelProbe reference(*model, dpbench::create_reference_device(0), config.batch_size);
    CHECK(gpu.loss_at(values) == Approx(reference.loss_at(values)).epsilon(1e-5));
    check_same(gpu.gradients(), reference.gradients());
  }
}

TEST_CASE("nmt and rnnlm learn their fixed batch on the GPU, Adam replayed as a graph", "[gpu]") {
  TempDir dir;
  struct Case {
    std::vector<std::string> flags;
    int64_t unrolled_steps;  // time steps x layers the dynamic LSTMs unroll (0: cudnn_lstm)
  };
  const std::vector<std::string> nmt = {"--model=nmt", "--batch_size=16", "--src_vocab_size=500",
                                        "--tgt_vocab_size=400", "--embedding_dim=32", "--num_units=32",
                                        "--num_encoder_layers=2", "--num_decoder_layers=2",
                                        "--src_max_len=10", "--tgt_max_len=10"};
  auto with = [](std::vector<std::string> flags, const std::string& extra) {
    flags.push_back(extra);
    return flags;
  };
  const Case cases[] = {
      {with(nmt, "--encoder_type=cudnn_lstm"), 0},
      {with(nmt, "--encoder_type=dynamic"), 10 * 2 + 10 * 2},  // bi: 2 stacks of 1 layer + 2 decoder layers
      {{"--model=rnnlm", "--batch_size=16", "--vocab_size=300", "--seq_len=12"}, 0},
      {{"--model=rnnlm", "--batch_size=16", "--vocab_size=300", "--seq_len=12", "--encoder_type=dynamic"}, 12 * 2},
  };
  int index = 0;
  for (const Case& c : cases) {
    std::vector<std::string> args = c.flags;
    const std::string file = dir.file("run" + std::to_string(index++) + ".json");
    args.insert(args.end(), {"--device=gpu", "--num_batches=60", "--num_warmup_batches=0",
                             "--learning_rate=0.02", "--display_every=1000", "--result_file=" + file});
    REQUIRE(run_cli(args) == 0);
    const nlohmann::json result = read_json(file);
    const auto& steps = result["steps"];
    INFO(args[0] << " " << args.back());
    CHECK(result["summary"]["cuda_graph"] == true);
    const double first = steps[0]["loss"], last = steps[59]["loss"];
    INFO("first loss " << first << ", last " << last);
    CHECK(last < 0.6 * first);
    const int64_t kernels = result["summary"]["kernel_launches_per_step"];
    CHECK(kernels > 10);
    // Each unrolled step and layer runs at least a GEMM and a cell kernel forward and a cell
    // kernel and (but for the first step) a GEMM backward.
    if (c.unrolled_steps > 0) CHECK(kernels >= 4 * c.unrolled_steps - 4 * 4);
  }
}

// Mixed precision: the GPU's 16-bit sequence ops against the reference backend's (the fp32 op on
// the rounded inputs, rounded once). Both round at the same places, but cuBLAS, cuDNN and our
// kernels sum in other orders than the host, and a rounding boundary crossed differently moves a
// value by a whole 16-bit unit, which the next ops carry along: so the bound is a few units of
// the type relative to the largest gradient (bf16 2^-8, fp16 2^-11), not the fp32 bound above.
TEST_CASE("nmt and rnnlm in bf16 and fp16 on the GPU match the reference backend", "[gpu]") {
  const std::vector<dpbench::RunConfig> configs = every_small_variant();
  for (dpbench::RunConfig config : configs) {  // a copy: its precision is set below
    for (const auto& [precision, type, tolerance] :
         {std::tuple{dpbench::Precision::bf16, dpbench::DataType::bf16, 4e-2}, std::tuple{dpbench::Precision::fp16, dpbench::DataType::f16, 6e-3}}) {
      INFO(config.model << " " << config.sequence.encoder_type << " " << config.sequence.direction << " "
                        << dpbench::precision_name(precision));
      config.precision = precision;
      check_gpu_matches_reference(*build_model(config), config.batch_size, type, tolerance / 4, tolerance);
    }
  }
}

TEST_CASE("nmt and rnnlm learn their fixed batch on the GPU in bf16 and fp16", "[gpu]") {
  TempDir dir;
  const std::vector<std::string> nmt = {"--model=nmt", "--batch_size=16", "--src_vocab_size=500",
                                        "--tgt_vocab_size=400", "--embedding_dim=32", "--num_units=32",
                                        "--num_encoder_layers=2", "--num_decoder_layers=2",
                                        "--src_max_len=10", "--tgt_max_len=10"};
  const std::vector<std::string> rnnlm = {"--model=rnnlm", "--batch_size=16", "--vocab_size=300", "--seq_len=12"};
  int index = 0;
  for (const auto* base : {&nmt, &rnnlm}) {
    for (const std::string encoder : {"cudnn_lstm", "dynamic"}) {
      for (const std::string precision : {"bf16", "fp16"}) {
        std::vector<std::string> args = *base;
        const std::string file = dir.file("mixed" + std::to_string(index++) + ".json");
        args.insert(args.end(), {"--encoder_type=" + encoder, "--precision=" + precision, "--device=gpu",
                                 "--num_batches=60", "--num_warmup_batches=0", "--learning_rate=0.02",
                                 "--display_every=1000", "--result_file=" + file});
        if (precision == "fp16") args.push_back("--fp16_enable_auto_loss_scale");
        REQUIRE(run_cli(args) == 0);
        const nlohmann::json result = read_json(file);
        const auto& steps = result["steps"];
        INFO(args[0] << " " << encoder << " " << precision);
        CHECK(result["summary"]["math"] == precision);
        CHECK(result["summary"]["cuda_graph"] == true);
        // cuDNN's LSTM plans, and their algorithms, only where cudnn_lstm runs.
        const nlohmann::json& lstm = result["summary"]["math_paths"]["lstm"];
        CHECK((lstm["shapes"].get<int>() > 0) == (encoder == "cudnn_lstm"));
        const double first = steps[0]["loss"], last = steps[59]["loss"];
        INFO("first loss " << first << ", last " << last);
        CHECK(last < 0.6 * first);
      }
    }
  }
}

// Note [persistent LSTM]: rnnlm's 128 units on dpbench's own persistent kernels, forced, learn
// through the CLI as cuDNN's do, replayed as CUDA graphs, and the result says which ran.
TEST_CASE("rnnlm learns its fixed batch on the GPU on the own persistent LSTM in bf16 and fp16", "[gpu]") {
  TempDir dir;
  for (const std::string precision : {"bf16", "fp16"}) {
    const std::string file = dir.file("own_persistent_" + precision + ".json");
    std::vector<std::string> args = {"--model=rnnlm", "--batch_size=40", "--vocab_size=300", "--seq_len=12",
                                     "--lstm_algorithm=own_persistent", "--precision=" + precision,
                                     "--device=gpu", "--num_batches=60", "--num_warmup_batches=0",
                                     "--learning_rate=0.02", "--display_every=1000", "--result_file=" + file};
    if (precision == "fp16") args.push_back("--fp16_enable_auto_loss_scale");
    REQUIRE(run_cli(args) == 0);
    const nlohmann::json result = read_json(file);
    INFO(precision);
    CHECK(result["summary"]["cuda_graph"] == true);
    const nlohmann::json& algorithms = result["summary"]["math_paths"]["lstm"]["algorithms"];
    CHECK(algorithms.size() == 1);
    CHECK(algorithms.value("own_persistent", 0) > 0);
    const double first = result["steps"][0]["loss"], last = result["steps"][59]["loss"];
    INFO("first loss " << first << ", last " << last);
    CHECK(last < 0.6 * first);
  }
}
