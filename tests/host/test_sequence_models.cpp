// The sequence models (nmt, rnnlm) on the reference backend: exact parameter counts at the seed
// defaults, backward against finite differences of the loss for every encoder variant, the
// fused (cudnn_lstm) and unrolled (dynamic) LSTMs computing the same network, training end to
// end through the CLI, mixed precision (bf16, fp16 with loss scaling) against fp32, and the
// sequence flags' validation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cli/run_config.h"
#include "engine/backends.h"
#include "engine/errors.h"
#include "engine/reference/reference_device.h"
#include "models/model_registry.h"
#include "tests/host/model_probe.h"
#include "tests/host/sequence_test_support.h"
#include "tests/host/test_support.h"

using dpbench::testing::build_model;
using dpbench::testing::check_16bit_matches_fp32;
using dpbench::testing::gradient_difference;
using dpbench::testing::GradientDifference;
using dpbench::testing::largest_magnitude;
using dpbench::testing::ModelProbe;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::sampled_finite_differences;
using dpbench::testing::sequence_config;
using dpbench::testing::tiny_nmt;
using dpbench::testing::mean_loss;
using dpbench::testing::TempDir;
using dpbench::testing::train_on_reference;

namespace {

// One LSTM layer: W (4H, in), R (4H, H), two biases (4H).
int64_t lstm_layer(int64_t in, int64_t hidden) { return 4 * hidden * (in + hidden) + 8 * hidden; }

}  // namespace

TEST_CASE("nmt and rnnlm have the parameter counts of their definitions", "[sequence_models]") {
  const int64_t embeddings = 3 * 50000 * 512;  // source and target tables, the projection
  // cuDNN's bidirectional encoder: 2 layers x 2 directions, the second layer reading 1024 wide.
  const int64_t fused_bi = embeddings + 2 * lstm_layer(512, 512) + 2 * lstm_layer(1024, 512) +
                           4 * lstm_layer(512, 512);
  // dynamic_rnn's: two stacks of 2 layers each, every layer reading 512 wide; and any uni one.
  const int64_t eight_layers = embeddings + 8 * lstm_layer(512, 512);
  CHECK(fused_bi == 95707136);      // "about 95.7M"
  CHECK(eight_layers == 93609984);  // "about 93.6M"
  const std::vector<std::pair<std::map<std::string, std::string>, int64_t>> cases = {
      {{{"encoder_type", "cudnn_lstm"}, {"direction", "bi"}}, fused_bi},
      {{{"encoder_type", "dynamic"}, {"direction", "bi"}}, eight_layers},
      {{{"encoder_type", "cudnn_lstm"}, {"direction", "uni"}}, eight_layers},
      {{{"encoder_type", "dynamic"}, {"direction", "uni"}}, eight_layers}};
  for (const auto& [overrides, expected] : cases) {
    const auto model = build_model(sequence_config("nmt", 384, overrides));
    INFO(overrides.at("encoder_type") << " " << overrides.at("direction"));
    CHECK(static_cast<int64_t>(model->layout().parameter_count()) == expected);
    CHECK(model->unit() == "words");
    CHECK(model->items_per_sample() == 200);  // 100 source + 100 target tokens
  }
  for (const char* implementation : {"cudnn_lstm", "dynamic"}) {
    const auto rnnlm = build_model(sequence_config("rnnlm", 512, {{"encoder_type", implementation}}));
    CHECK(static_cast<int64_t>(rnnlm->layout().parameter_count()) ==
          2 * 10001 * 32 + 10001 * 128 - 10001 * 32 + lstm_layer(32, 128) + lstm_layer(128, 128));
    CHECK(rnnlm->layout().parameter_count() == 1815200);  // "about 1.8M"
    CHECK(rnnlm->unit() == "tokens");
    CHECK(rnnlm->items_per_sample() == 50);
  }
}

TEST_CASE("nmt's backward matches finite differences of the loss in every encoder variant",
          "[sequence_models]") {
  for (const char* encoder_type : {"cudnn_lstm", "dynamic"}) {
    for (const char* direction : {"uni", "bi"}) {
      INFO(encoder_type << " " << direction);
      const auto model = build_model(tiny_nmt(encoder_type, direction));
      ModelProbe probe(*model, dpbench::create_reference_device(0), 3);
      const std::vector<float> values = model->initial_parameters(7);
      const double loss = probe.loss_at(values);
      // Summed over 3 target tokens per sentence, each near log(11) at initialisation.
      CHECK(loss == Approx(3 * std::log(11.0)).margin(0.5));
      const std::vector<float> gradients = probe.gradients();
      // Central differences in fp32 with h = 1e-2: the loss is smooth (no ReLU or pooling switches)
      // and near 7, so rounding adds about 7 * 2^-24 / h ~ 1e-5 per estimate and the h^2 term
      // of the tanh/sigmoid curvature stays below 1e-4 for parameters of size 0.1.
      const double h = 1e-2;
      int checked = 0;
      for (const auto& d : sampled_finite_differences(probe, model->layout(), values, gradients, h, 7)) {
        INFO(d.tensor << "[" << d.index << "]: numeric " << d.numeric << ", backward " << d.backward);
        CHECK(std::abs(d.numeric - d.backward) <= 2e-4 + 1e-2 * std::abs(d.numeric));
        ++checked;
      }
      CHECK(checked >= 30);
    }
  }
}

TEST_CASE("nmt announces its source embedding before the encoder stacks' weights", "[sequence_models]") {
  // The embedding's gradient is final once the stacks' input gradients are: announced then, its
  // exchange runs beside the stacks' weight pass instead of after the step's last kernel.
  for (const char* encoder_type : {"cudnn_lstm", "dynamic"}) {
    for (const char* direction : {"uni", "bi"}) {
      INFO(encoder_type << " " << direction);
      const auto model = build_model(tiny_nmt(encoder_type, direction));
      ModelProbe probe(*model, dpbench::create_reference_device(0), 3);
      probe.loss_at(model->initial_parameters(7));
      probe.gradients();
      auto announced_at = [&](const dpbench::TensorView& tensor) {
        const auto& ranges = probe.announced();
        for (size_t i = 0; i < ranges.size(); ++i)
          if (ranges[i].offset <= tensor.offset && tensor.offset < ranges[i].end()) return i;
        FAIL("no announcement holds " << tensor.name);
        return ranges.size();
      };
      size_t embedding = 0;
      std::vector<size_t> stacks;
      for (const dpbench::TensorView& tensor : model->layout().tensors()) {
        if (tensor.name == "encoder/embedding") embedding = announced_at(tensor);
        if (tensor.name.rfind("encoder/", 0) == 0 && tensor.name.find("lstm") != std::string::npos)
          stacks.push_back(announced_at(tensor));
      }
      CHECK(stacks.size() == (std::string(encoder_type) == "dynamic" && std::string(direction) == "bi" ? 2u : 1u));
      for (size_t stack : stacks) CHECK(embedding < stack);
    }
  }
}

TEST_CASE("cudnn_lstm and dynamic are the same network: same parameters, loss and gradients",
          "[sequence_models]") {
  struct Pair {
    dpbench::RunConfig fused, unrolled;
    int batch;
  };
  std::vector<Pair> pairs = {
      {tiny_nmt("cudnn_lstm", "uni"), tiny_nmt("dynamic", "uni"), 3},
      {sequence_config("rnnlm", 4, {{"encoder_type", "cudnn_lstm"}, {"vocab_size", "17"},
                                    {"embedding_dim", "6"}, {"num_units", "5"}, {"seq_len", "5"}}),
       sequence_config("rnnlm", 4, {{"encoder_type", "dynamic"}, {"vocab_size", "17"},
                                    {"embedding_dim", "6"}, {"num_units", "5"}, {"seq_len", "5"}}),
       4}};
  for (const Pair& pair : pairs) {
    INFO(pair.fused.model);
    const auto fused = build_model(pair.fused);
    const auto unrolled = build_model(pair.unrolled);
    REQUIRE(fused->layout().total_count() == unrolled->layout().total_count());
    for (size_t t = 0; t < fused->layout().tensors().size(); ++t) {
      CHECK(fused->layout().tensor(t).name == unrolled->layout().tensor(t).name);
      CHECK(fused->layout().tensor(t).offset == unrolled->layout().tensor(t).offset);
    }
    const std::vector<float> values = fused->initial_parameters(3);
    CHECK(values == unrolled->initial_parameters(3));
    ModelProbe fused_probe(*fused, dpbench::create_reference_device(0), pair.batch);
    ModelProbe unrolled_probe(*unrolled, dpbench::create_reference_device(0), pair.batch);
    // Two independent implementations on the host, summing in different orders in fp32.
    CHECK(fused_probe.loss_at(values) == Approx(unrolled_probe.loss_at(values)).epsilon(1e-5));
    const std::vector<float> a = fused_probe.gradients(), b = unrolled_probe.gradients();
    const double largest = largest_magnitude(a);
    REQUIRE(largest > 0);
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("gradient " << i);
      CHECK(std::abs(a[i] - b[i]) <= 1e-6 * largest + 1e-4 * std::abs(a[i]));
    }
  }
}

namespace {

// A small nmt and rnnlm that learn their fixed batch in 60 steps on the reference backend.
const std::vector<std::string> kSmallNmt = {
    "--model=nmt", "--batch_size=4", "--src_vocab_size=20", "--tgt_vocab_size=20",
    "--embedding_dim=8", "--num_units=8", "--num_encoder_layers=2", "--num_decoder_layers=2",
    "--src_max_len=5", "--tgt_max_len=5", "--num_batches=60", "--learning_rate=0.05"};
const std::vector<std::string> kSmallRnnlm = {"--model=rnnlm", "--batch_size=4", "--vocab_size=30",
                                              "--seq_len=6", "--num_units=16", "--embedding_dim=8",
                                              "--num_batches=60", "--learning_rate=0.05"};

}  // namespace

TEST_CASE("nmt and rnnlm learn their fixed batch end to end on the reference backend",
          "[sequence_models]") {
  TempDir dir;
  for (const std::string encoder : {"cudnn_lstm", "dynamic", "uni", "bi"}) {
    std::vector<std::string> args = kSmallNmt;
    args.push_back("--encoder_type=" + encoder);
    const nlohmann::json result = train_on_reference(dir, "nmt_" + encoder, args);
    INFO(encoder);
    const auto& steps = result["steps"];
    REQUIRE(steps.size() == 60);
    for (const auto& step : steps) CHECK(std::isfinite(step["loss"].get<double>()));
    // 5 target tokens of a 20-word vocabulary: about 5 ln 20 = 15 at first; four sentences
    // are memorised within 60 steps.
    CHECK(mean_loss(steps, 0, 3) == Approx(5 * std::log(20.0)).margin(1.5));
    CHECK(mean_loss(steps, 55, 5) < 0.6 * mean_loss(steps, 0, 3));
    CHECK(result["summary"]["unit"] == "words/s");
    CHECK(result["summary"]["items_per_step"] == 4 * 10);
    CHECK(result["config"]["encoder_type"] == (encoder == "uni" || encoder == "bi" ? "dynamic" : encoder));
    if (encoder == "uni" || encoder == "bi") CHECK(result["config"]["direction"] == encoder);
  }
  const nlohmann::json rnnlm = train_on_reference(dir, "rnnlm", kSmallRnnlm);
  const auto& steps = rnnlm["steps"];
  CHECK(mean_loss(steps, 0, 3) == Approx(std::log(30.0)).margin(0.3));  // mean per token
  CHECK(mean_loss(steps, 55, 5) < 0.5 * mean_loss(steps, 0, 3));
  CHECK(rnnlm["summary"]["unit"] == "tokens/s");
  CHECK(rnnlm["summary"]["items_per_step"] == 4 * 6);
  CHECK(rnnlm["config"]["num_layers"] == 2);
  CHECK(rnnlm["config"]["lstm_algorithm"] == "fastest");
  CHECK_FALSE(rnnlm["config"].contains("src_vocab_size"));
  CHECK(rnnlm["summary"]["kernel_launches_per_step"].is_null());  // reference: nothing captured
}

TEST_CASE("sequence flags that do not fit are refused with one line and no result", "[sequence_models]") {
  TempDir dir;
  const std::string result = dir.file("never.json");
  auto refused = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--device=cpu", "--num_batches=1", "--result_file=" + result});
    return run_cli(args) == 2 && !std::filesystem::exists(result);
  };
  CHECK(refused({"--model=resnet50", "--num_units=8"}));          // not a sequence model
  CHECK(refused({"--model=rnnlm", "--src_vocab_size=8"}));        // an nmt flag
  CHECK(refused({"--model=rnnlm", "--encoder_type=bi"}));         // rnnlm has no direction
  CHECK(refused({"--model=nmt", "--encoder_type=gru"}));
  CHECK(refused({"--model=nmt", "--encoder_type=bi", "--direction=uni"}));
  CHECK(refused({"--model=nmt", "--direction=sideways"}));
  CHECK(refused({"--model=nmt", "--num_encoder_layers=3", "--num_decoder_layers=3"}));  // odd, bi
  CHECK(refused({"--model=nmt", "--num_decoder_layers=2"}));      // 4 encoder layers
  CHECK(refused({"--model=nmt", "--num_units=0"}));
  CHECK(refused({"--model=rnnlm", "--loss_chunk_rows=-1"}));
  CHECK(refused({"--model=rnnlm", "--lstm_algorithm=persistent"}));
  CHECK(refused({"--model=nmt", "--lstm_algorithm=standard"}));  // nmt's default encoder is dynamic
  CHECK(refused({"--model=resnet50", "--lstm_algorithm=standard"}));
  // dpbench's persistent LSTM: 16-bit, one direction, 32, 64 or 128 units.
  CHECK(refused({"--model=rnnlm", "--lstm_algorithm=own_persistent"}));  // fp32
  CHECK(refused({"--model=rnnlm", "--lstm_algorithm=own_persistent", "--precision=bf16", "--num_units=96"}));
  CHECK(refused({"--model=nmt", "--encoder_type=cudnn_lstm", "--lstm_algorithm=own_persistent", "--precision=bf16",
                 "--num_units=128", "--direction=bi"}));
  // What it takes runs (on the reference backend the fused LSTM is the reference's).
  CHECK(run_cli({"--model=rnnlm", "--lstm_algorithm=own_persistent", "--precision=bf16", "--device=cpu",
                 "--batch_size=2", "--seq_len=3", "--vocab_size=50", "--num_batches=1", "--num_warmup_batches=0",
                 "--result_file=" + result}) == 0);
}

namespace {

struct PrecisionCase {
  std::string name;
  dpbench::RunConfig config;
  int batch;
};

std::vector<PrecisionCase> precision_cases() {
  const std::map<std::string, std::string> rnnlm_shape = {{"vocab_size", "17"}, {"embedding_dim", "6"},
                                                          {"num_units", "8"}, {"seq_len", "5"}};
  std::vector<PrecisionCase> cases;
  for (const char* encoder : {"cudnn_lstm", "dynamic"}) {
    for (const char* direction : {"uni", "bi"})
      cases.push_back({std::string("nmt ") + encoder + " " + direction, tiny_nmt(encoder, direction), 3});
    std::map<std::string, std::string> shape = rnnlm_shape;
    shape["encoder_type"] = encoder;
    cases.push_back({std::string("rnnlm ") + encoder, sequence_config("rnnlm", 4, shape), 4});
  }
  return cases;
}

}  // namespace

// 16-bit storage changes the numbers by its rounding and nothing else: the loss and every
// gradient of each encoder variant stay within a few roundings of the fp32 network's (bf16 keeps
// 8 significant bits, relative 2^-9 per rounding; fp16 11, 2^-12), and most gradients differ from
// them (the 16-bit path really ran; a loss averaged over a few tokens can round to the same float).
// The weight gradient is fp32 in every precision.
TEST_CASE("nmt and rnnlm in bf16 and fp16 compute the fp32 network's loss and gradients",
          "[sequence_models][precision]") {
  for (const PrecisionCase& c : precision_cases()) {
    const auto fp32_model = build_model(c.config);
    ModelProbe fp32_probe(*fp32_model, dpbench::create_reference_device(0), c.batch);
    const std::vector<float> values = fp32_model->initial_parameters(5);
    const double fp32_loss = fp32_probe.loss_at(values);
    const std::vector<float> fp32_gradients = fp32_probe.gradients();
    for (const auto& [precision, type, tolerance] :
         {std::tuple{dpbench::Precision::bf16, dpbench::DataType::bf16, 2e-2}, std::tuple{dpbench::Precision::fp16, dpbench::DataType::f16, 3e-3}}) {
      INFO(c.name << " " << dpbench::precision_name(precision));
      dpbench::RunConfig config = c.config;
      config.precision = precision;
      check_16bit_matches_fp32(*build_model(config), c.batch, type, values, fp32_loss, fp32_gradients, tolerance,
                               dpbench::create_reference_device(0));
    }
  }
}

TEST_CASE("nmt and rnnlm train in bf16 and in fp16 with automatic loss scaling as in fp32",
          "[sequence_models][precision]") {
  TempDir dir;
  for (const std::string encoder : {"cudnn_lstm", "dynamic"}) {
    for (const auto* base : {&kSmallNmt, &kSmallRnnlm}) {
      std::vector<std::string> args = *base;
      args.push_back("--encoder_type=" + encoder);
      const std::string model = (*base)[0].substr(8);
      const nlohmann::json fp32 = train_on_reference(dir, model + encoder + "fp32", args);
      std::vector<std::string> bf16_args = args, fp16_args = args;
      bf16_args.push_back("--precision=bf16");
      fp16_args.insert(fp16_args.end(), {"--use_fp16", "--fp16_enable_auto_loss_scale", "--fp16_loss_scale=1024",
                                         "--fp16_inc_loss_scale_every_n=20"});
      const nlohmann::json bf16 = train_on_reference(dir, model + encoder + "bf16", bf16_args);
      const nlohmann::json fp16 = train_on_reference(dir, model + encoder + "fp16", fp16_args);
      INFO(model << " " << encoder);
      CHECK(bf16["summary"]["math"] == "bf16");
      CHECK(fp16["summary"]["math"] == "fp16");
      CHECK(fp16["summary"]["loss_scaling"] == "automatic");
      // 60 steps without an overflow double the scale three times (every 20 good steps).
      CHECK(fp16["summary"]["final_loss_scale"] == 8192.0);
      const double fp32_first = mean_loss(fp32["steps"], 0, 3), fp32_last = mean_loss(fp32["steps"], 55, 5);
      for (const nlohmann::json* result : {&bf16, &fp16}) {
        const auto& steps = (*result)["steps"];
        REQUIRE(steps.size() == 60);
        for (const auto& step : steps) CHECK(std::isfinite(step["loss"].get<double>()));
        INFO((*result)["summary"]["math"] << ": first " << mean_loss(steps, 0, 3) << ", last "
                                          << mean_loss(steps, 55, 5) << "; fp32 " << fp32_first << ", "
                                          << fp32_last);
        CHECK(mean_loss(steps, 0, 3) == Approx(fp32_first).epsilon(0.02));
        // Learned as fp32 learned: the loss falls as far, give or take a tenth of the way.
        CHECK(mean_loss(steps, 55, 5) < fp32_last + 0.1 * (fp32_first - fp32_last));
      }
    }
  }
}
