// fully_sharded with every model family on the reference backend: each model's parameter units
// tile its layout and its step uses each unit forward and backward, and sharded over 1, 2 and 4
// devices each family trains bit for bit as replicated (both --reshard_after_forward settings,
// bf16, and a CNN recomputing its blocks).
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "models/cnn_model.h"
#include "models/model_registry.h"
#include "models/network.h"
#include "tests/host/strategy_test_support.h"

namespace dpbench {
namespace {

using namespace dpbench::testing;

using ModelBuilder = std::function<std::unique_ptr<Model>(const RunConfig&)>;

RunConfig parse(std::vector<std::string> args) {
  args.insert(args.end(), {"--device=cpu", "--result_file="});
  return parse_run_flags(args, DeviceInventory{}).config;
}

std::unique_ptr<Model> registry_model(const std::vector<std::string>& args) {
  const RunConfig config = parse(args);
  return find_model(config.model)->create(config);
}

// The names of a model's units, in layout order.
std::vector<std::string> unit_names(const Model& model) {
  std::vector<std::string> names;
  for (const ParameterUnit& unit : model.parameter_units().units) names.push_back(unit.name);
  return names;
}

// Note [parameter units]: the units tile the layout in order, and the step's uses name real units,
// each used in forward and written in backward, forward before backward.
void check_units(const Model& model) {
  const ParameterUnits units = model.parameter_units();
  REQUIRE_FALSE(units.empty());
  size_t expected = 0;
  for (const ParameterUnit& unit : units.units) {
    INFO(unit.name);
    CHECK(unit.range.offset == expected);
    CHECK(unit.range.count > 0);
    expected = unit.range.end();
  }
  CHECK(expected == model.layout().total_count());
  std::vector<int> forward(units.units.size(), 0), written(units.units.size(), 0);
  bool backward_began = false;
  for (const UnitUse& use : units.uses) {
    REQUIRE(use.unit >= 0);
    REQUIRE(static_cast<size_t>(use.unit) < units.units.size());
    if (use.pass == UnitPass::forward) {
      CHECK_FALSE(backward_began);
      ++forward[static_cast<size_t>(use.unit)];
    } else {
      backward_began = true;
      written[static_cast<size_t>(use.unit)] += use.writes_gradients ? 1 : 0;
    }
  }
  for (size_t u = 0; u < units.units.size(); ++u) {
    INFO(units.units[u].name);
    CHECK(forward[u] >= 1);
    CHECK(written[u] >= 1);
  }
}

// The number of units the model of `model` (or `build`) publishes.
size_t model_units(const std::vector<std::string>& model, const ModelBuilder& build) {
  const RunConfig config = parse(model);
  const std::unique_ptr<Model> built = build ? build(config) : find_model(config.model)->create(config);
  return built->parameter_units().units.size();
}

// SGD, as the gpt and transformer tests (rounding noise in a zero gradient stays small).
std::vector<std::string> run_args(std::vector<std::string> model, int devices, const std::string& strategy,
                                  const std::vector<std::string>& more) {
  for (const std::string& flag : {std::string("--optimizer=sgd"), std::string("--learning_rate=0.1"),
                                  "--num_gpus=" + std::to_string(devices),
                                  std::string("--num_warmup_batches=1"), std::string("--num_batches=2"),
                                  "--variable_update=" + strategy})
    model.push_back(flag);
  model.insert(model.end(), more.begin(), more.end());
  return model;
}

// On 1, 2 and 4 devices, fully_sharded with each reshard setting holds on every replica exactly
// the parameters replicated holds.
void check_same_as_replicated(const std::vector<std::string>& model, const std::vector<std::string>& more = {},
                              const ModelBuilder& build = {}, const std::vector<int>& device_counts = {1, 2, 4}) {
  for (int n : device_counts) {
    const Trained want = train(run_args(model, n, "replicated", more), {}, BackendKind::reference, build);
    for (const std::string reshard : {"--reshard_after_forward=true", "--reshard_after_forward=false"}) {
      INFO(n << " devices, " << reshard);
      std::vector<std::string> options = more;
      options.push_back(reshard);
      const Trained got = train(run_args(model, n, "fully_sharded", options), {}, BackendKind::reference, build);
      REQUIRE(got.parameters.size() == static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) CHECK(got.parameters[static_cast<size_t>(r)] == want.parameters.front());
      if (n > 1) CHECK(got.comm.at("units") == model_units(model, build));
    }
  }
}

Conv2dOptions conv_options(int out_channels, int kernel, int stride = 1) {
  Conv2dOptions o;
  o.out_channels = out_channels;
  o.kernel_h = o.kernel_w = kernel;
  o.stride = stride;
  o.padding = Padding::same;
  return o;
}

// A ResNet and an Inception network in miniature on 8x8 images: a stem (conv, batch norm, max
// pool), a bottleneck-like block with a strided shortcut (both joins' batch norms fused into the
// add), a plain residual block, an Inception-like module, and the classifier.
TensorId build_small_cnn(Network& net, TensorId images) {
  auto conv_bn = [&](TensorId x, const std::string& name, int channels, int kernel, bool relu, int stride = 1) {
    return net.batch_norm(net.conv(x, name, conv_options(channels, kernel, stride)), name + ".bn", 1e-5f, relu);
  };
  TensorId x = conv_bn(images, "conv1", 6, 3, true);
  x = net.pool(x, "maxpool", PoolOptions{PoolMode::max, 3, 1, Padding::explicit_symmetric, 1});
  net.set_group("layer1.0");
  TensorId shortcut = conv_bn(x, "layer1.0.downsample", 8, 1, false, 2);
  TensorId y = conv_bn(x, "layer1.0.conv1", 4, 1, true);
  y = conv_bn(y, "layer1.0.conv2", 4, 3, true, 2);
  y = conv_bn(y, "layer1.0.conv3", 8, 1, false);
  x = net.add(y, shortcut, "layer1.0.add", /*relu=*/true);
  net.set_group("layer1.1");
  y = conv_bn(conv_bn(x, "layer1.1.conv1", 4, 3, true), "layer1.1.conv2", 8, 3, false);
  x = net.add(y, x, "layer1.1.add", /*relu=*/true);
  net.set_group("Mixed");
  const TensorId b1 = conv_bn(x, "Mixed.branch1x1", 4, 1, true);
  TensorId pooled = net.pool(x, "Mixed.avg_pool", PoolOptions{PoolMode::average_exclude_padding, 3, 1,
                                                               Padding::explicit_symmetric, 1});
  pooled = conv_bn(pooled, "Mixed.branch_pool", 4, 1, true);
  const TensorId b3 = conv_bn(conv_bn(x, "Mixed.branch3x3_1", 4, 1, true), "Mixed.branch3x3_2", 4, 3, true);
  x = net.concat({b1, pooled, b3}, "Mixed");
  net.set_group("");
  x = net.global_average_pool(x, "avgpool");
  x = net.dropout(x, "dropout", 0.5f);
  return net.fully_connected(x, "fc", 5);
}

std::unique_ptr<Model> small_cnn(const RunConfig& config) {
  return std::make_unique<CnnModel>("small_cnn", config, ImageSpec{3, 8, 8, 5}, build_small_cnn);
}

// The miniature stands in for resnet50, whose flags (--activation_checkpointing=blocks above all)
// it takes.
const std::vector<std::string> kSmallCnn = {"--model=resnet50", "--batch_size=2"};

const std::vector<std::string> kTinyRnnlm = {"--model=rnnlm", "--vocab_size=13", "--embedding_dim=4",
                                             "--num_units=6", "--num_layers=2", "--seq_len=4", "--batch_size=2"};

std::vector<std::string> tiny_nmt(const std::string& encoder_type, const std::string& direction) {
  return {"--model=nmt", "--encoder_type=" + encoder_type, "--direction=" + direction, "--src_vocab_size=13",
          "--tgt_vocab_size=11", "--embedding_dim=4", "--num_units=6", "--num_encoder_layers=2",
          "--num_decoder_layers=2", "--src_max_len=5", "--tgt_max_len=4", "--batch_size=2"};
}

}  // namespace

TEST_CASE("every model of the zoo cuts its parameters into units that tile its layout",
          "[fully_sharded][models]") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--model=trivial"}, {"--model=cifar10_cnn"}, {"--model=resnet50", "--batch_size=1"},
        {"--model=resnet152", "--batch_size=1"}, {"--model=inception3", "--batch_size=1"},
        {"--model=vgg16", "--batch_size=1"}, kTinyRnnlm, tiny_nmt("cudnn_lstm", "uni"), tiny_nmt("cudnn_lstm", "bi"),
        tiny_nmt("dynamic", "uni"), tiny_nmt("dynamic", "bi")}) {
    INFO(args.front() << (args.size() > 1 ? " " + args[1] : ""));
    check_units(*registry_model(args));
  }
  check_units(*small_cnn(parse(kSmallCnn)));
}

TEST_CASE("a CNN's units are the blocks its trace shows, with the stem and the classifier",
          "[fully_sharded][models]") {
  const std::vector<std::string> resnet = unit_names(*registry_model({"--model=resnet50", "--batch_size=1"}));
  REQUIRE(resnet.size() == 3 + 4 + 6 + 3 + 2);
  CHECK(resnet.front() == "classifier");
  CHECK(resnet[1] == "layer4.2");
  CHECK(resnet[resnet.size() - 2] == "layer1.0");
  CHECK(resnet.back() == "stem");
  const std::vector<std::string> inception = unit_names(*registry_model({"--model=inception3", "--batch_size=1"}));
  REQUIRE(inception.size() == 11 + 2);
  CHECK(inception[1] == "Mixed_7c");
  CHECK(inception[11] == "Mixed_5b");
  CHECK(unit_names(*registry_model({"--model=vgg16", "--batch_size=1"})) ==
        std::vector<std::string>{"classifier", "features.block5", "features.block4", "features.block3",
                                 "features.block2", "features.block1"});
  CHECK(unit_names(*registry_model({"--model=cifar10_cnn"})) ==
        std::vector<std::string>{"classifier", "block2", "block1"});
  CHECK(unit_names(*small_cnn(parse(kSmallCnn))) ==
        std::vector<std::string>{"classifier", "Mixed", "layer1.1", "layer1.0", "stem"});
}

TEST_CASE("the LSTM models' units: the embeddings, each LSTM stack, the projection", "[fully_sharded][models]") {
  CHECK(unit_names(*registry_model(kTinyRnnlm)) == std::vector<std::string>{"lstm", "projection", "embedding"});
  CHECK(unit_names(*registry_model(tiny_nmt("cudnn_lstm", "bi"))) ==
        std::vector<std::string>{"decoder", "projection", "target embedding", "source embedding", "encoder"});
  CHECK(unit_names(*registry_model(tiny_nmt("dynamic", "bi"))) ==
        std::vector<std::string>{"decoder", "projection", "target embedding", "source embedding",
                                 "encoder backward", "encoder forward"});
  CHECK(unit_names(*registry_model({"--model=trivial"})) == std::vector<std::string>{"dense2", "dense1"});
}

TEST_CASE("fully_sharded trains a small ResNet-Inception CNN bit for bit as replicated",
          "[strategies][fully_sharded][equivalence][models]") {
  check_same_as_replicated(kSmallCnn, {}, small_cnn);
  SECTION("in bf16") { check_same_as_replicated(kSmallCnn, {"--precision=bf16"}, small_cnn, {2}); }
  SECTION("recomputing its blocks") {
    check_same_as_replicated(kSmallCnn, {"--activation_checkpointing=blocks"}, small_cnn, {2, 4});
    // And the same as keeping the activations: recomputation changes no bit.
    const Trained kept = train(run_args(kSmallCnn, 2, "replicated", {}), {}, BackendKind::reference, small_cnn);
    const Trained recomputed = train(run_args(kSmallCnn, 2, "fully_sharded", {"--activation_checkpointing=blocks"}),
                                     {}, BackendKind::reference, small_cnn);
    CHECK(recomputed.parameters.front() == kept.parameters.front());
  }
}

TEST_CASE("fully_sharded trains cifar10_cnn and trivial bit for bit as replicated",
          "[strategies][fully_sharded][equivalence][models]") {
  check_same_as_replicated({"--model=cifar10_cnn", "--batch_size=1"}, {}, {}, {1, 2});
  check_same_as_replicated({"--model=trivial", "--batch_size=2"});
}

TEST_CASE("fully_sharded trains rnnlm bit for bit as replicated", "[strategies][fully_sharded][equivalence][models]") {
  for (const std::string implementation : {"--encoder_type=cudnn_lstm", "--encoder_type=dynamic"}) {
    INFO(implementation);
    std::vector<std::string> model = kTinyRnnlm;
    model.push_back(implementation);
    check_same_as_replicated(model);
  }
  check_same_as_replicated(kTinyRnnlm, {"--precision=bf16"}, {}, {2});
}

TEST_CASE("fully_sharded trains the LSTM nmt bit for bit as replicated",
          "[strategies][fully_sharded][equivalence][models]") {
  for (const std::string implementation : {"cudnn_lstm", "dynamic"})
    for (const std::string direction : {"uni", "bi"}) {
      INFO(implementation << ", " << direction);
      check_same_as_replicated(tiny_nmt(implementation, direction));
    }
  check_same_as_replicated(tiny_nmt("dynamic", "bi"), {"--precision=bf16"}, {}, {2, 4});
  check_same_as_replicated(tiny_nmt("cudnn_lstm", "bi"), {"--precision=bf16"}, {}, {2});
}

}  // namespace dpbench
