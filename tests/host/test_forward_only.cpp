// --forward_only (inference): forward passes only, with batch norm on its running statistics and
// dropout off, so every step of a fixed batch gives the same loss and the parameters never move;
// strategies that exchange are refused; the result and the header say it is inference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/console.h"
#include "engine/backends.h"
#include "engine/reference/reference_backend.h"
#include "engine/reference/reference_device.h"
#include "models/network.h"
#include "tests/host/reference_cnn_test_support.h"
#include "tests/host/test_support.h"

using namespace dpbench;

// What the tests allocate themselves, in the device's memory ledger.
const MemoryTag kTestBuffer{MemoryCategory::scratch, "test"};
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;

TEST_CASE("reference batch norm in inference: the given statistics, by hand, in place too", "[forward_only]") {
  ReferenceBackend ops;
  for (const DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
    // Two channels, two pixels, one image: y = gamma * (x - mean) / sqrt(variance + eps) + beta.
    const Tensor4 t{1, 2, 1, 2, format};
    const std::vector<float> gamma = {2, -1}, beta = {0.5f, 1}, mean = {1, -2}, variance = {3, 0.25f};
    // Logical (c, w) values: c0 = {4, 0}, c1 = {-2, 6}.
    const std::vector<float> x = format == DataFormat::nchw ? std::vector<float>{4, 0, -2, 6}
                                                            : std::vector<float>{4, -2, 0, 6};
    const double eps = 1.0;
    const double c0[] = {2 * (4 - 1) / 2.0 + 0.5, 2 * (0 - 1) / 2.0 + 0.5};  // sqrt(3 + 1) = 2
    const double c1[] = {-1 * (-2 + 2) / std::sqrt(1.25) + 1, -1 * (6 + 2) / std::sqrt(1.25) + 1};
    const std::vector<double> expected = format == DataFormat::nchw ? std::vector<double>{c0[0], c0[1], c1[0], c1[1]}
                                                                    : std::vector<double>{c0[0], c1[0], c0[1], c1[1]};
    const InferenceNorm norm{gamma.data(), beta.data(), mean.data(), variance.data(), static_cast<float>(eps)};
    std::vector<float> y(4);
    ops.batch_norm_inference(t, x.data(), norm, nullptr, nullptr, /*relu=*/false, y.data());
    dpbench::testing::check_close(y, expected, 0, 1e-6, "y");
    // With the ReLU, in place: the negative outputs become 0.
    std::vector<float> in_place = x;
    ops.batch_norm_inference(t, in_place.data(), norm, nullptr, nullptr, /*relu=*/true, in_place.data());
    std::vector<double> rectified = expected;
    for (double& v : rectified) v = v > 0 ? v : 0;
    dpbench::testing::check_close(in_place, rectified, 0, 1e-6, "y with relu, in place");

    // A residual z added, plain or through a second normalisation (the ResNet join), then ReLU.
    const std::vector<float> z = {-10, 1, 2, 3};  // stored in the layout; element-wise, so either
    std::vector<double> plus_z(4), plus_normalised_z(4);
    const std::vector<float> z_gamma = {3, 1}, z_beta = {0, -1}, z_mean = {0, 1}, z_variance = {8, 0};
    const InferenceNorm z_norm{z_gamma.data(), z_beta.data(), z_mean.data(), z_variance.data(), 1.0f};
    for (size_t i = 0; i < 4; ++i) {
      const int c = format == DataFormat::nchw ? static_cast<int>(i / 2) : static_cast<int>(i % 2);
      const double normalised_z = z_gamma[c] * (z[i] - z_mean[c]) / std::sqrt(z_variance[c] + 1.0) + z_beta[c];
      plus_z[i] = std::max(0.0, expected[i] + z[i]);
      plus_normalised_z[i] = std::max(0.0, expected[i] + normalised_z);
    }
    ops.batch_norm_inference(t, x.data(), norm, z.data(), nullptr, /*relu=*/true, y.data());
    dpbench::testing::check_close(y, plus_z, 0, 1e-6, "relu(bn(x) + z)");
    std::vector<float> over_z = z;
    ops.batch_norm_inference(t, x.data(), norm, over_z.data(), &z_norm, /*relu=*/true, over_z.data());
    dpbench::testing::check_close(over_z, plus_normalised_z, 0, 1e-6, "relu(bn(x) + bn'(z)), in place over z");
  }
}

TEST_CASE("forward-only runs refuse strategies that exchange, and say what to use", "[forward_only]") {
  TempDir dir;
  const std::string out = dir.file("out.json");
  for (const std::string strategy : {"replicated", "parameter_server"}) {
    CHECK(run_cli({"--device=cpu", "--model=trivial", "--forward_only", "--num_gpus=2",
                   "--variable_update=" + strategy, "--result_file=" + out}) == 2);
    CHECK_FALSE(std::filesystem::exists(out));
  }
}

namespace {

// Losses of every step of a forward-only run, and its result.
nlohmann::json run_forward_only(const TempDir& dir, std::vector<std::string> args) {
  const std::string out = dir.file("forward.json");
  args.insert(args.end(), {"--device=cpu", "--forward_only", "--num_warmup_batches=1", "--num_batches=3",
                           "--result_file=" + out});
  REQUIRE(run_cli(args) == 0);
  return read_json(out);
}

std::vector<double> losses_of(const nlohmann::json& result) {
  std::vector<double> losses;
  for (const auto& step : result["steps"]) losses.push_back(step["loss"].get<double>());
  return losses;
}

}  // namespace

TEST_CASE("forward-only steps neither train nor drop units: every step's loss is the same", "[forward_only]") {
  TempDir dir;
  // cifar10_cnn has dropout (which would change the loss every step), resnet50 batch norm; both on
  // two devices, whose batches differ.
  for (const std::vector<std::string> model :
       {std::vector<std::string>{"--model=cifar10_cnn", "--batch_size=4"},
        std::vector<std::string>{"--model=resnet50", "--data_name=cifar10", "--batch_size=2"}}) {
    std::vector<std::string> args = model;
    args.push_back("--num_gpus=2");
    const nlohmann::json result = run_forward_only(dir, args);
    CHECK(result["config"]["forward_only"] == true);
    const std::vector<double> losses = losses_of(result);
    REQUIRE(losses.size() == 4);
    CHECK(std::isfinite(losses[0]));
    for (double loss : losses) CHECK(loss == losses[0]);
    CHECK(result["summary"]["items_per_sec"].get<double>() > 0);

    // The parameters are the initial ones: a training run of one step moves them.
    std::vector<std::string> train = model;
    const std::string out = dir.file("train.json");
    train.insert(train.end(), {"--device=cpu", "--num_warmup_batches=0", "--num_batches=1", "--result_file=" + out});
    REQUIRE(run_cli(train) == 0);
    CHECK(read_json(out)["summary"]["param_norm"] != result["summary"]["param_norm"]);
  }
}

TEST_CASE("forward-only: the parameter norm is that of a zero-step run's parameters", "[forward_only]") {
  TempDir dir;
  const nlohmann::json three = run_forward_only(dir, {"--model=trivial", "--batch_size=4"});
  const std::string out = dir.file("one.json");
  REQUIRE(run_cli({"--device=cpu", "--model=trivial", "--batch_size=4", "--forward_only", "--num_warmup_batches=0",
                   "--num_batches=1", "--result_file=" + out}) == 0);
  CHECK(read_json(out)["summary"]["param_norm"] == three["summary"]["param_norm"]);
}

TEST_CASE("the header says a forward-only run is inference", "[forward_only]") {
  RunConfig config;
  config.forward_only = true;
  CHECK_THAT(format_run_header(config, "images", 42, {DeviceDescription{0, "host", 0, ""}}),
             Catch::Contains("\nMode:         inference: forward passes only (--forward_only)\n"));
  config.forward_only = false;
  CHECK_THAT(format_run_header(config, "images", 42, {DeviceDescription{0, "host", 0, ""}}),
             !Catch::Contains("Mode:"));
}

namespace {

Conv2dOptions same_conv(int out_channels, int kernel) {
  Conv2dOptions o;
  o.out_channels = out_channels;
  o.kernel_h = o.kernel_w = kernel;
  o.pad_h = o.pad_w = kernel / 2;
  return o;
}

// Two ResNet-style joins: the first with batch norms on both paths, the second on the main path
// only; then pooling and a classifier.
TensorId build_joins(Network& net) {
  TensorId main = net.batch_norm(net.conv(net.input(), "a", same_conv(16, 3)), "a.bn", 1e-5f);
  TensorId shortcut = net.batch_norm(net.conv(net.input(), "b", same_conv(16, 1)), "b.bn", 1e-3f);
  const TensorId joined = net.add(main, shortcut, "join1", /*relu=*/true);
  main = net.batch_norm(net.conv(joined, "c", same_conv(16, 3)), "c.bn", 1e-5f);
  const TensorId second = net.add(main, joined, "join2", /*relu=*/true);
  return net.fully_connected(net.global_average_pool(second, "pool"), "fc", 10);
}

}  // namespace

TEST_CASE("the fused inference joins compute what the batch norms and the adds compute one by one", "[forward_only]") {
  for (const DataFormat format : {DataFormat::nchw, DataFormat::nhwc}) {
    const Tensor4 input{2, 8, 6, 6, format};
    ParameterLayout fused_layout, plain_layout;
    Network fused(fused_layout, input), plain(plain_layout, input);
    const TensorId fused_logits = build_joins(fused), plain_logits = build_joins(plain);
    fused_layout.finalize();
    plain_layout.finalize();
    fused.prepare_for_inference();
    fused.finalize(fused_logits);
    plain.finalize(plain_logits);
    int fused_away = 0;
    for (const Network::Node& node : fused.nodes()) fused_away += node.fused_away ? 1 : 0;
    CHECK(fused_away == 3);  // a.bn, b.bn, c.bn
    REQUIRE(fused_layout.total_count() == plain_layout.total_count());

    // Random parameters (batch norm's gamma and beta too), the same in both.
    std::vector<float> values(fused_layout.total_count());
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(std::sin(1.7 * static_cast<double>(i) + 0.3));
    std::unique_ptr<Device> device = create_reference_device(0);
    ParameterSet fused_parameters(*device, fused_layout), plain_parameters(*device, plain_layout);
    fused_parameters.upload(values);
    plain_parameters.upload(values);
    const ReplicaShard shard{0, 1, 2, 7};
    NetworkReplica fused_replica(fused, *device, fused_parameters, shard, /*training=*/false);
    NetworkReplica plain_replica(plain, *device, plain_parameters, shard, /*training=*/false);
    std::vector<float> images(input.count());
    for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>(std::cos(0.37 * static_cast<double>(i)));
    device->copy_from_host(fused_replica.values(fused.input()), images.data(), input.bytes());
    device->copy_from_host(plain_replica.values(plain.input()), images.data(), input.bytes());
    Buffer step = device->allocate(sizeof(int32_t), kTestBuffer);
    const int32_t zero = 0;
    device->copy_from_host(step.data(), &zero, sizeof(zero));
    fused_replica.forward(step.as<int32_t>());
    plain_replica.forward(step.as<int32_t>());
    std::vector<float> fused_out(20), plain_out(20);
    device->copy_to_host(fused_out.data(), fused_replica.values(fused_logits), sizeof(float) * 20);
    device->copy_to_host(plain_out.data(), plain_replica.values(plain_logits), sizeof(float) * 20);
    std::vector<double> expected(plain_out.begin(), plain_out.end());
    dpbench::testing::check_close(fused_out, expected, 1e-5, 1e-5, "logits");
    // Inference keeps no gradients but the logits' (the loss writes them there).
    CHECK(fused_replica.gradients(fused.input()) == nullptr);
    CHECK(fused.gradient_buffer(fused_logits) == fused.value_buffer(fused_logits));
  }
}

TEST_CASE("forward-only sequence models compute the training run's first loss every step", "[forward_only]") {
  TempDir dir;
  const std::vector<std::vector<std::string>> models = {
      {"--model=rnnlm", "--vocab_size=50", "--embedding_dim=8", "--num_units=8", "--seq_len=6", "--batch_size=4"},
      {"--model=nmt", "--src_vocab_size=40", "--tgt_vocab_size=30", "--embedding_dim=8", "--num_units=8",
       "--src_max_len=5", "--tgt_max_len=4", "--batch_size=3", "--encoder_type=cudnn_lstm", "--direction=bi"}};
  for (const std::vector<std::string>& model : models) {
    const nlohmann::json forward = run_forward_only(dir, model);
    std::vector<std::string> train = model;
    const std::string out = dir.file("train.json");
    train.insert(train.end(), {"--device=cpu", "--num_warmup_batches=0", "--num_batches=2", "--result_file=" + out});
    REQUIRE(run_cli(train) == 0);
    const double first = read_json(out)["steps"][0]["loss"].get<double>();
    // The loss needs no gradient: the same value with them (training's first step) and without.
    for (double loss : losses_of(forward)) CHECK(loss == first);
  }
}
