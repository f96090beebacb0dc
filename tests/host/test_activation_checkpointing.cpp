// --activation_checkpointing=blocks on the reference backend: the models that take it compute the
// same loss and gradients to the bit as without it (fp32 and 16-bit, with dropout), hold at most
// half the activation bytes, count the recomputed forward in their FLOPs, show it in the trace,
// and record it; the flag's validation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cli/flags.h"
#include "cli/strategies_command.h"
#include "engine/errors.h"
#include "engine/reference/reference_device.h"
#include "models/cnn_model.h"
#include "models/model_registry.h"
#include "models/network.h"
#include "models/sequence/gpt.h"
#include "reports/report_series.h"
#include "reports/result_json.h"
#include "tests/host/model_probe.h"
#include "tests/host/sequence_test_support.h"
#include "tests/host/test_support.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Contains;

namespace {

// Vocabulary 17, 6 positions, 4 blocks of width 8 in 2 heads, 3 sequences.
RunConfig four_block_gpt(const std::string& dropout) {
  return sequence_config("gpt", 3,
                         {{"vocab_size", "17"}, {"seq_len", "6"}, {"num_layers", "4"}, {"num_heads", "2"},
                          {"hidden_size", "8"}, {"gpt_size", "custom"}, {"loss_chunk_rows", "7"},
                          {"dropout", dropout}});
}

// tiny_transformer with 3 + 3 layers.
RunConfig three_layer_transformer(const std::string& dropout) {
  RunConfig config = tiny_transformer(dropout);
  config.sequence.num_encoder_layers = 3;
  config.sequence.num_decoder_layers = 3;
  return config;
}

const std::pair<Precision, DataType> kPrecisions[] = {
    {Precision::fp32, DataType::f32}, {Precision::bf16, DataType::bf16}, {Precision::fp16, DataType::f16}};

// One step of `kept` and of the same model recomputing its blocks, each from the same parameters
// on a fresh reference device: the same loss and gradients to the bit, and the activation bytes
// of both.
std::pair<uint64_t, uint64_t> check_same_bits(const RunConfig& kept, DataType copy_type,
                                              const std::function<std::unique_ptr<Model>(const RunConfig&)>& build) {
  RunConfig recomputed = kept;
  recomputed.activation_checkpointing = "blocks";
  const auto kept_model = build(kept);
  const auto recomputed_model = build(recomputed);
  const std::vector<float> values = kept_model->initial_parameters(5);
  const ProbedStep without =
      probe_one_step(*kept_model, create_reference_device(0), kept.batch_size, copy_type, values);
  const ProbedStep with =
      probe_one_step(*recomputed_model, create_reference_device(0), kept.batch_size, copy_type, values);
  CHECK(with.loss == without.loss);
  CHECK(same_bits(with.gradients, without.gradients));
  INFO("activation bytes: " << without.activation_bytes << " kept, " << with.activation_bytes << " recomputed");
  CHECK(with.activation_bytes < without.activation_bytes);
  return {without.activation_bytes, with.activation_bytes};
}

// A sequence model in fp32, bf16 and fp16, with dropout off and on: same bits, and blocks at most
// half the activation bytes.
void check_recomputation_changes_no_bit(const std::function<RunConfig(const std::string&)>& fp32_config) {
  for (const std::string dropout : {"0", "0.1"}) {
    for (const auto& [precision, copy_type] : kPrecisions) {
      INFO("dropout " << dropout << ", " << precision_name(precision));
      RunConfig kept = fp32_config(dropout);
      kept.precision = precision;
      const auto [without, with] = check_same_bits(kept, copy_type, build_model);
      CHECK(with * 2 <= without);
    }
  }
}

Conv2dOptions conv_options(int out_channels, int kernel) {
  Conv2dOptions o;
  o.out_channels = out_channels;
  o.kernel_h = o.kernel_w = kernel;
  o.padding = Padding::same;
  return o;
}

// A stem, an Inception-like module (a 1x1 branch, a pooled branch, a 1x1 then 3x3 branch,
// concatenated) and a ResNet-like block over it (its join fused with the batch norm before it),
// on 8x8 images of 3 channels, 4 classes.
TensorId build_module_and_block(Network& net, TensorId images) {
  auto conv_bn = [&](TensorId x, const std::string& name, int channels, int kernel, bool relu = true) {
    return net.batch_norm(net.conv(x, name, conv_options(channels, kernel)), name + ".bn", 1e-3f, relu);
  };
  const TensorId stem = conv_bn(images, "stem", 8, 3);
  net.set_group("module");
  const TensorId b1 = conv_bn(stem, "module.b1", 4, 1);
  TensorId pooled = net.pool(stem, "module.pool", PoolOptions{PoolMode::max, 3, 1, Padding::explicit_symmetric, 1});
  pooled = conv_bn(pooled, "module.b2", 4, 1);
  const TensorId b3 = conv_bn(conv_bn(stem, "module.b3a", 4, 1), "module.b3b", 4, 3);
  const TensorId module = net.concat({b1, pooled, b3}, "module");
  net.set_group("block");
  const TensorId main_path = conv_bn(conv_bn(module, "block.c1", 12, 3), "block.c2", 12, 3, false);
  const TensorId block = net.add(main_path, module, "block.add", /*relu=*/true);
  net.set_group("");
  return net.fully_connected(net.global_average_pool(block, "pool"), "fc", 4);
}

std::unique_ptr<Model> module_and_block_model(const RunConfig& config) {
  return std::make_unique<CnnModel>("module_and_block", config, ImageSpec{3, 8, 8, 4}, build_module_and_block);
}

// `dpbench run` on the reference backend; the result.
nlohmann::json run_reference(const TempDir& dir, const std::string& name, std::vector<std::string> args) {
  args.insert(args.end(), {"--device=cpu", "--display_every=1000", "--num_warmup_batches=1",
                           "--result_file=" + dir.file(name + ".json")});
  REQUIRE(run_cli(args) == 0);
  return read_json(dir.file(name + ".json"));
}

// Spans of category `category` in a Chrome trace.
std::vector<std::string> span_names(const nlohmann::json& trace, const std::string& category) {
  std::vector<std::string> names;
  for (const nlohmann::json& event : trace["traceEvents"])
    if (event.value("cat", std::string()) == category && event.value("ph", std::string()) == "X")
      names.push_back(event["name"]);
  return names;
}

// Trains `args` for 3 steps on 2 devices with and without recomputation, traced: the same losses
// and parameters, the recomputed forward in the FLOPs and the trace, at most half the activations.
void check_trains_alike_through_the_cli(std::vector<std::string> args, const std::string& first_span,
                                        bool halves_activations = true) {
  TempDir dir;
  args.insert(args.end(), {"--num_gpus=2", "--variable_update=replicated", "--num_batches=3"});
  std::vector<std::string> recomputing = args;
  recomputing.insert(recomputing.end(), {"--activation_checkpointing=blocks", "--trace_file=" + dir.file("trace.json")});
  const nlohmann::json kept = run_reference(dir, "kept", args);
  const nlohmann::json recomputed = run_reference(dir, "recomputed", recomputing);
  CHECK(kept["config"]["activation_checkpointing"] == "none");
  CHECK(recomputed["config"]["activation_checkpointing"] == "blocks");
  REQUIRE(kept["steps"].size() == recomputed["steps"].size());
  for (size_t s = 0; s < kept["steps"].size(); ++s)
    CHECK(kept["steps"][s]["loss"].get<double>() == recomputed["steps"][s]["loss"].get<double>());
  CHECK(kept["summary"]["param_norm"].get<double>() == recomputed["summary"]["param_norm"].get<double>());

  const nlohmann::json& kept_flops = kept["summary"]["flops"];
  const nlohmann::json& recomputed_flops = recomputed["summary"]["flops"];
  CHECK_FALSE(kept_flops.contains("recompute_flops_per_step_per_device"));
  const double recompute = recomputed_flops["recompute_flops_per_step_per_device"].get<double>();
  CHECK(recompute > 0);
  CHECK(recomputed_flops["model_flops_per_step_per_device"].get<double>() ==
        Approx(kept_flops["model_flops_per_step_per_device"].get<double>() + recompute).epsilon(1e-12));
  CHECK_THAT(recomputed_flops["counted"].get<std::string>(), Contains("--activation_checkpointing=blocks"));

  for (size_t d = 0; d < 2; ++d) {
    const uint64_t kept_bytes = kept["summary"]["memory"]["devices"][d]["steady"]["activations"];
    const uint64_t recomputed_bytes = recomputed["summary"]["memory"]["devices"][d]["steady"]["activations"];
    INFO("device " << d << ": activations " << kept_bytes << " kept, " << recomputed_bytes << " recomputed");
    CHECK(recomputed_bytes < kept_bytes);
    if (halves_activations) CHECK(recomputed_bytes * 2 <= kept_bytes);
  }

  // The breakdown gives the recomputation's share of backward (the reference backend times every step).
  CHECK_FALSE(kept["summary"]["breakdown"].contains("recompute_in_backward_ms"));
  const nlohmann::json& breakdown = recomputed["summary"]["breakdown"];
  const double recompute_ms = breakdown["recompute_in_backward_ms"].get<double>();
  CHECK(recompute_ms > 0);
  CHECK(recompute_ms < breakdown["ms_per_step"]["backward_ms"].get<double>());
  for (const nlohmann::json& device : breakdown["per_device"]) CHECK(device["recompute_in_backward_ms"] > 0);

  const std::vector<std::string> recomputes = span_names(read_json(dir.file("trace.json")), "recompute");
  CHECK(std::find(recomputes.begin(), recomputes.end(), first_span) != recomputes.end());
}

}  // namespace

TEST_CASE("gpt recomputing its blocks computes the same loss and gradients to the bit with half the activations",
          "[activation_checkpointing][gpt]") {
  check_recomputation_changes_no_bit(four_block_gpt);
}

TEST_CASE("the Transformer recomputing its layers computes the same loss and gradients to the bit with half the "
          "activations",
          "[activation_checkpointing][transformer]") {
  check_recomputation_changes_no_bit(three_layer_transformer);
}

TEST_CASE("CNN blocks and modules recomputed compute the same loss and gradients to the bit with fewer activations",
          "[activation_checkpointing][cnn_models]") {
  for (const std::string format : {"NCHW", "NHWC"}) {
    for (const auto& [precision, copy_type] : kPrecisions) {
      INFO(format << ", " << precision_name(precision));
      RunConfig config;
      config.model = "module_and_block";
      config.batch_size = 2;
      config.data_format = format;
      config.precision = precision;
      check_same_bits(config, copy_type, module_and_block_model);
    }
  }
  RunConfig config;
  config.batch_size = 2;
  RunConfig recomputing = config;
  recomputing.activation_checkpointing = "blocks";
  const auto kept = module_and_block_model(config), recomputed = module_and_block_model(recomputing);
  const StepFlops without = kept->flops_per_sample(), with = recomputed->flops_per_sample();
  CHECK(without.recompute == 0);
  CHECK(with.forward == without.forward);
  CHECK(with.backward == without.backward);
  // Every convolution of the module and the block runs again (the join's batch norm and the
  // concatenation do no products); the stem's and the classifier's do not.
  const Network& network = dynamic_cast<const CnnModel&>(*recomputed).network();
  double convolutions = 0;
  for (const Network::Node& node : network.nodes()) {
    if (node.block_first < 0) continue;
    CHECK(node.recomputed == (node.layer->name() != "block.add" && node.layer->name() != "module" &&
                              node.layer->name() != "block.c2.bn"));
    convolutions += node.layer->flops(true).forward;
  }
  CHECK(with.recompute * 2 == Approx(convolutions).epsilon(1e-12));
}

TEST_CASE("resnet50 recomputing its bottlenecks computes the same loss and gradients to the bit",
          "[activation_checkpointing][cnn_models]") {
  for (const auto& [format, precision, copy_type] : {std::tuple{"NCHW", Precision::fp32, DataType::f32},
                                                     std::tuple{"NHWC", Precision::bf16, DataType::bf16}}) {
    INFO(format << ", " << precision_name(precision));
    RunConfig config;
    config.model = "resnet50";
    config.batch_size = 2;
    config.data_format = format;
    config.precision = precision;
    config.data.data_name = "cifar10";  // 32x32 images: the network whole, at a size the host runs quickly
    check_same_bits(config, copy_type, build_model);
  }
}

TEST_CASE("at ImageNet sizes recomputed blocks plan at most half of ResNet's activation arena and 60% of Inception's",
          "[activation_checkpointing][cnn_models]") {
  // The planned arena only (no device): the layer outputs and their gradients, placed by when
  // each is live (Note [one arena for activations and their gradients] in models/network_arena.cpp);
  // the batch norms' per-channel statistics are a few KiB beside it. Inception-v3's stem (five
  // convolutions at 147 to 71 pixels a side before the first module) is in no module, and its
  // outputs are the largest: they stay.
  for (const auto& [name, share] : {std::pair{"resnet50", 0.5}, std::pair{"resnet152", 0.5},
                                    std::pair{"inception3", 0.6}}) {
    uint64_t planned[2] = {0, 0};
    for (const bool recompute : {false, true}) {
      RunConfig config;
      config.model = name;
      config.batch_size = 32;
      config.activation_checkpointing = recompute ? "blocks" : "none";
      const auto model = build_model(config);
      const Network& network = dynamic_cast<const CnnModel&>(*model).network();
      planned[recompute ? 1 : 0] = network.arena().bytes;
    }
    INFO(std::string(name) << ": an arena of " << planned[0] << " bytes kept, " << planned[1] << " recomputed");
    CHECK(static_cast<double>(planned[1]) <= share * static_cast<double>(planned[0]));
  }
}

// A model's FLOPs per sample without and with its blocks recomputed, checked for what recomputing
// must leave alone: no recompute without it, the same forward and backward with it.
static std::pair<StepFlops, StepFlops> flops_kept_and_recomputed(const RunConfig& kept) {
  RunConfig recomputed = kept;
  recomputed.activation_checkpointing = "blocks";
  const StepFlops without = build_model(kept)->flops_per_sample();
  const StepFlops with = build_model(recomputed)->flops_per_sample();
  CHECK(without.recompute == 0);
  CHECK(with.forward == without.forward);
  CHECK(with.backward == without.backward);
  return {without, with};
}

TEST_CASE("recomputed blocks add their forward to the step's FLOPs and nothing else", "[activation_checkpointing][flops]") {
  SECTION("gpt: every block's products but the MLP's output projection, L (16 d^2 + 2 T d) per token") {
    const auto [without, with] = flops_kept_and_recomputed(four_block_gpt("0"));
    // 4 blocks, width 8, 6 positions: 4 (16 x 64 + 2 x 6 x 8) = 4480 per token, 6 tokens.
    CHECK(with.recompute == Approx(6 * 4480.0).epsilon(1e-12));
    CHECK(gpt_recompute_flops_per_token(12, 1024, 768) == Approx(12 * (16.0 * 768 * 768 + 2.0 * 1024 * 768)));
    CHECK(with.training() == Approx(without.training() + with.recompute).epsilon(1e-12));
  }
  SECTION("the Transformer: every layer's forward, the vocabulary projection's not") {
    const auto [without, with] = flops_kept_and_recomputed(three_layer_transformer("0"));
    // The projection's forward: 2 x 4 target tokens x width 8 x vocabulary 11 per sentence pair.
    CHECK(with.recompute == Approx(without.forward - 2.0 * 4 * 8 * 11).epsilon(1e-12));
  }
}

TEST_CASE("gpt recomputing its blocks trains as without, through the CLI, with the cost in FLOPs and the trace",
          "[activation_checkpointing][gpt][end_to_end]") {
  const std::vector<std::string> gpt = {"--model=gpt",      "--vocab_size=23", "--seq_len=8",  "--num_layers=4",
                                        "--num_heads=2",    "--hidden_size=16", "--batch_size=2", "--dropout=0.1",
                                        "--learning_rate=1e-2"};
  for (const std::string precision : {"fp32", "bf16"}) {
    INFO(precision);
    std::vector<std::string> args = gpt;
    args.push_back("--precision=" + precision);
    check_trains_alike_through_the_cli(args, "block 0");
  }
}

TEST_CASE("the Transformer recomputing its layers trains as without, through the CLI, with the cost in FLOPs and the "
          "trace",
          "[activation_checkpointing][transformer][end_to_end]") {
  const std::vector<std::string> transformer = {
      "--model=nmt",        "--encoder_type=transformer", "--src_vocab_size=13", "--tgt_vocab_size=11",
      "--num_units=8",      "--num_heads=2",              "--ffn_units=12",      "--num_encoder_layers=3",
      "--num_decoder_layers=3", "--src_max_len=5",        "--tgt_max_len=4",     "--batch_size=3"};
  for (const std::string precision : {"fp32", "bf16"}) {
    INFO(precision);
    std::vector<std::string> args = transformer;
    args.push_back("--precision=" + precision);
    check_trains_alike_through_the_cli(args, "encoder layer 0");
  }
}

// At 32x32 and two images the batch norms' per-channel statistics (kept) weigh as much as the
// layer outputs: fewer activations, not half (at ImageNet sizes, half: the test above).
TEST_CASE("resnet50 recomputing its bottlenecks trains as without, through the CLI, with the cost in FLOPs and the trace",
          "[activation_checkpointing][cnn_models][end_to_end]") {
  check_trains_alike_through_the_cli({"--model=resnet50", "--data_name=cifar10", "--batch_size=2",
                                      "--data_format=NHWC", "--precision=bf16", "--learning_rate=1e-3"},
                                     "layer4.2", /*halves_activations=*/false);
}

TEST_CASE("activation checkpointing is none by default, blocks only where a model has blocks to recompute",
          "[activation_checkpointing][flags]") {
  auto parse = [](std::vector<std::string> args) {
    args.insert(args.end(), {"--device=cpu", "--result_file="});
    return parse_run_flags(args, DeviceInventory{}).config;
  };
  auto error_of = [&](std::vector<std::string> args) {
    return error_message_of<ConfigError>([&] { parse(args); }, "error");
  };
  CHECK(parse({"--model=gpt"}).activation_checkpointing == "none");
  CHECK(parse({"--model=gpt", "--activation_checkpointing=blocks"}).recomputes_blocks());
  CHECK(parse({"--model=nmt", "--encoder_type=transformer", "--activation_checkpointing=blocks"}).recomputes_blocks());
  CHECK(parse({"--model=resnet50", "--activation_checkpointing=none"}).activation_checkpointing == "none");
  CHECK(parse({"--model=resnet152", "--activation_checkpointing=blocks"}).recomputes_blocks());
  CHECK(parse({"--model=inception3", "--activation_checkpointing=blocks"}).recomputes_blocks());
  CHECK_THAT(error_of({"--model=gpt", "--activation_checkpointing=layers"}),
             Contains("--activation_checkpointing=layers: unknown activation checkpointing; accepted: none, blocks"));
  const std::string takers =
      "it is taken by resnet50 (its bottleneck blocks); resnet101 (its bottleneck blocks); resnet152 (its bottleneck "
      "blocks); inception3 (its Inception modules); nmt with --encoder_type=transformer (its encoder and decoder "
      "layers); gpt (its blocks)";
  CHECK(error_of({"--model=rnnlm", "--activation_checkpointing=blocks"}) ==
        "--activation_checkpointing=blocks: --model=rnnlm has no blocks it recomputes; " + takers);
  CHECK(error_of({"--model=nmt", "--encoder_type=dynamic", "--activation_checkpointing=blocks"}) ==
        "--activation_checkpointing=blocks: --model=nmt with --encoder_type=dynamic has no blocks it recomputes; " +
            takers);
  for (const std::string model : {"trivial", "vgg16", "cifar10_cnn"})
    CHECK_THAT(error_of({"--model=" + model, "--activation_checkpointing=blocks"}),
               Contains("--model=" + model + " has no blocks it recomputes; " + takers));
  CHECK(error_of({"--model=gpt", "--activation_checkpointing=blocks", "--forward_only"}) ==
        "--activation_checkpointing=blocks: recomputes blocks in the backward pass, and --forward_only runs none; "
        "drop one of them");
}

TEST_CASE("a run that recomputes its blocks is a series of its own, labelled so", "[activation_checkpointing][report]") {
  TempDir dir;
  const nlohmann::json json = run_reference(dir, "gpt", {"--model=gpt", "--vocab_size=23", "--seq_len=8",
                                                         "--num_layers=2", "--num_heads=2", "--hidden_size=16",
                                                         "--batch_size=2", "--num_batches=2",
                                                         "--activation_checkpointing=blocks"});
  const Result recomputed = result_from_json(json);
  Result kept = recomputed;
  kept.config["activation_checkpointing"] = "none";
  Result older = recomputed;  // before the flag existed
  older.config.erase("activation_checkpointing");
  const StrategyCatalog catalog = strategy_catalog_for_reports();
  const SeriesKey with = series_key_of(recomputed, catalog), without = series_key_of(kept, catalog);
  CHECK_THAT(workload_label(with), Contains("blocks recomputed"));
  CHECK_THAT(workload_label(without), !Contains("recomputed"));
  CHECK(series_key_of(older, catalog).activation_checkpointing == "none");
  const SeriesKeyLess less;
  CHECK((less(with, without) || less(without, with)));
  CHECK_FALSE((less(without, series_key_of(older, catalog)) || less(series_key_of(older, catalog), without)));
}
