// nmt's Transformer (--encoder_type=transformer) on the reference backend: the parameter count of
// nn.Transformer(512, 8, 6, 6, 2048) with its embeddings and projection, backward against finite
// differences of the loss, 16-bit storage against fp32, training end to end through the CLI,
// every averaging strategy equal to one device with the whole batch, and its flags' validation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backends.h"
#include "engine/reference/reference_device.h"
#include "models/model_registry.h"
#include "tests/host/model_probe.h"
#include "tests/host/sequence_test_support.h"
#include "tests/host/test_support.h"

using dpbench::testing::build_model;
using dpbench::testing::check_16bit_matches_fp32;
using dpbench::testing::check_every_tensor_has_a_gradient;
using dpbench::testing::missed_finite_differences;
using dpbench::testing::ModelProbe;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::sequence_config;
using dpbench::testing::mean_loss;
using dpbench::testing::TempDir;
using dpbench::testing::train_on_reference;
using dpbench::testing::tiny_transformer;

namespace {

// nn.MultiheadAttention: in_proj (3d, d) + (3d), out_proj (d, d) + (d).
int64_t attention(int64_t d) { return 3 * d * d + 3 * d + d * d + d; }
// linear1 (ffn, d) + (ffn), linear2 (d, ffn) + (d).
int64_t feed_forward(int64_t d, int64_t ffn) { return 2 * d * ffn + ffn + d; }
int64_t layer_norm(int64_t d) { return 2 * d; }

}  // namespace

TEST_CASE("the transformer has nn.Transformer's parameters plus two embeddings and the projection",
          "[transformer][sequence_models]") {
  const int64_t d = 512, ffn = 2048, vocab = 50000;
  const int64_t encoder_layer = attention(d) + feed_forward(d, ffn) + 2 * layer_norm(d);
  const int64_t decoder_layer = 2 * attention(d) + feed_forward(d, ffn) + 3 * layer_norm(d);
  CHECK(encoder_layer == 3152384);
  CHECK(decoder_layer == 4204032);
  // sum(p.numel() for p in nn.Transformer(512, 8, 6, 6, 2048).parameters()): the stacks and
  // their final norms.
  const int64_t transformer = 6 * encoder_layer + 6 * decoder_layer + 2 * layer_norm(d);
  CHECK(transformer == 44140544);
  const int64_t total = transformer + 3 * vocab * d;  // two nn.Embedding(50000, 512), nn.Linear(512, 50000, bias=False)
  CHECK(total == 120940544);  // "121 M parameters"

  auto config = sequence_config("nmt", 128,
                                {{"encoder_type", "transformer"}, {"direction", ""}, {"num_encoder_layers", "6"},
                                 {"num_decoder_layers", "6"}});
  const auto model = build_model(config);
  CHECK(static_cast<int64_t>(model->layout().parameter_count()) == total);
  CHECK(model->unit() == "words");
  CHECK(model->items_per_sample() == 200);
  // The three vocabulary-sized matrices, the exchange's bulk: 25.6 M each.
  int large = 0;
  for (const dpbench::TensorView& tensor : model->layout().tensors()) large += tensor.count == 25600000;
  CHECK(large == 3);
  // Per sentence pair at the defaults, forward: every token through 6 layers' projections of
  // 4 d^2 + 2 d ffn multiply-adds (encoder) or 4 d^2 + 2 d^2 + 2 d ffn (decoder, its keys and
  // values from 100 source tokens), the attentions, and the projection.
  const double tokens = 100;
  const double linear = tokens * 6 * (4 * d * d + 2 * d * ffn) + tokens * 6 * (6 * d * d + 2 * d * ffn) +
                        tokens * 6 * 2 * d * d + tokens * d * vocab;
  const double attention_products = 6 * (2 * tokens * tokens * d) + 6 * (tokens * tokens * d) +
                                    6 * (2 * tokens * tokens * d);  // encoder, causal (half), cross
  const dpbench::StepFlops flops = model->flops_per_sample();
  CHECK(flops.forward == Approx(2 * (linear + attention_products)).epsilon(1e-12));
  CHECK(flops.backward == Approx(2 * flops.forward).epsilon(1e-12));
}

TEST_CASE("the transformer's backward matches finite differences of its loss", "[transformer][sequence_models]") {
  const auto model = build_model(tiny_transformer());
  ModelProbe probe(*model, dpbench::create_reference_device(0), 3);
  const std::vector<float> values = model->initial_parameters(11);
  const double loss = probe.loss_at(values);
  // 4 target tokens per sentence, each near log(11) at initialisation.
  CHECK(loss == Approx(4 * std::log(11.0)).margin(1.5));
  const std::vector<float> gradients = probe.gradients();
  // Central differences in double-checked fp32: h = 1e-2 on a loss near 10 rounds to about
  // 1e-5 per estimate; a ReLU input within h of its kink bends the difference, so a few
  // elements may miss: at most 2% of them, and the rest within the tolerance.
  int checked = 0;
  const int missed = missed_finite_differences(probe, model->layout(), values, gradients, 1e-2, 5e-4, 2e-2, 200, &checked);
  CHECK(missed <= checked / 50);
  // Every tensor has a gradient: the masks and the causal attention leave none out.
  check_every_tensor_has_a_gradient(model->layout(), gradients);
}

TEST_CASE("the transformer in bf16 and fp16 computes the fp32 network's loss and gradients",
          "[transformer][sequence_models][precision]") {
  dpbench::testing::check_16bit_sequence_model([](const std::string& dropout) { return tiny_transformer(dropout); },
                                               4e-2, 6e-3);
}

namespace {

const std::vector<std::string> kSmallTransformer = {
    "--model=nmt", "--encoder_type=transformer", "--batch_size=4", "--src_vocab_size=20", "--tgt_vocab_size=20",
    "--num_units=16", "--num_heads=2", "--ffn_units=32", "--num_encoder_layers=2", "--num_decoder_layers=2",
    "--src_max_len=5", "--tgt_max_len=5", "--learning_rate=0.01"};

}  // namespace

TEST_CASE("the transformer learns its fixed batch end to end on the reference backend",
          "[transformer][sequence_models]") {
  TempDir dir;
  std::vector<std::string> args = kSmallTransformer;
  args.push_back("--num_batches=60");
  const nlohmann::json result = train_on_reference(dir, "transformer", args);
  const auto& steps = result["steps"];
  REQUIRE(steps.size() == 60);
  for (const auto& step : steps) CHECK(std::isfinite(step["loss"].get<double>()));
  // 5 target tokens of a 20-word vocabulary: about 5 ln 20 = 15 at first; with dropout 0.1 the
  // four sentences are still learned well within 60 steps.
  CHECK(mean_loss(steps, 0, 3) == Approx(5 * std::log(20.0)).margin(2.5));
  CHECK(mean_loss(steps, 55, 5) < 0.6 * mean_loss(steps, 0, 3));
  CHECK(result["summary"]["unit"] == "words/s");
  CHECK(result["summary"]["items_per_step"] == 4 * 10);
  const auto& config = result["config"];
  CHECK(config["encoder_type"] == "transformer");
  CHECK(config["direction"] == "");
  CHECK(config["num_heads"] == 2);
  CHECK(config["ffn_units"] == 32);
  CHECK(config["dropout"].get<double>() == Approx(0.1));
  CHECK(config["num_encoder_layers"] == 2);
}

TEST_CASE("the transformer's defaults are Transformer-base at batch 128", "[transformer][sequence_models]") {
  TempDir dir;
  // Only the defaults are checked: the shape is too large to train here, so --forward_only
  // with one tiny step would still build 121 M parameters; the resolved config is enough.
  const std::string result = dir.file("defaults.json");
  REQUIRE(run_cli({"--model=nmt", "--encoder_type=transformer", "--device=cpu", "--num_batches=1",
                   "--num_warmup_batches=0", "--src_vocab_size=16", "--tgt_vocab_size=16", "--src_max_len=2",
                   "--tgt_max_len=2", "--num_units=16", "--num_heads=2", "--ffn_units=8", "--batch_size=2",
                   "--result_file=" + result}) == 0);
  const nlohmann::json config = read_json(result)["config"];
  CHECK(config["num_encoder_layers"] == 6);
  CHECK(config["num_decoder_layers"] == 6);
  CHECK(config["embedding_dim"] == 16);  // follows --num_units
  const dpbench::ModelEntry* nmt = dpbench::find_model("nmt");
  REQUIRE(nmt != nullptr);
  dpbench::SequenceConfig transformer;
  transformer.encoder_type = "transformer";
  CHECK(dpbench::default_batch_size(*nmt, transformer) == 128);
  dpbench::SequenceConfig lstm;
  lstm.encoder_type = "cudnn_lstm";
  CHECK(dpbench::default_batch_size(*nmt, lstm) == 384);
}

TEST_CASE("transformer flags that do not fit are refused with one line and no result",
          "[transformer][sequence_models]") {
  TempDir dir;
  const std::string result = dir.file("never.json");
  auto refused = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--device=cpu", "--num_batches=1", "--result_file=" + result});
    return run_cli(args) == 2 && !std::filesystem::exists(result);
  };
  CHECK(refused({"--model=rnnlm", "--encoder_type=transformer"}));
  CHECK(refused({"--model=nmt", "--encoder_type=transformer", "--direction=bi"}));
  CHECK(refused({"--model=nmt", "--encoder_type=transformer", "--num_heads=3"}));  // 512 / 3
  CHECK(refused({"--model=nmt", "--encoder_type=transformer", "--num_heads=2"}));  // heads of 256
  CHECK(refused({"--model=nmt", "--encoder_type=transformer", "--embedding_dim=256"}));
  CHECK(refused({"--model=nmt", "--encoder_type=transformer", "--dropout=1"}));
  CHECK(refused({"--model=nmt", "--encoder_type=transformer", "--dropout=-0.1"}));
  CHECK(refused({"--model=nmt", "--encoder_type=transformer", "--lstm_algorithm=standard"}));
  CHECK(refused({"--model=nmt", "--num_heads=8"}));  // the LSTM encoder has no heads
  CHECK(refused({"--model=nmt", "--encoder_type=cudnn_lstm", "--dropout=0.1"}));
}
