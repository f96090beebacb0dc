// FLOP counts (Model::flops_per_sample) against hand calculations made here from the published
// architectures, independent of the model code; the peak table; and summary.flops in a result.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "engine/machine/gpu_peaks.h"
#include "models/model_registry.h"
#include "tests/host/test_support.h"

using namespace dpbench;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;

namespace {

StepFlops flops_of(std::vector<std::string> args) {
  args.push_back("--device=cpu");
  const RunConfig config = parse_run_flags(args, DeviceInventory{}).config;
  return find_model(config.model)->create(config)->flops_per_sample();
}

// Multiply-adds of a convolution producing an out x out map of k channels from c channels.
double conv_macs(double out, double k, double c, double kernel) { return out * out * k * c * kernel * kernel; }

}  // namespace

TEST_CASE("resnet50's FLOPs are those of its convolutions and classifier, about 4.09 G multiply-adds an image",
          "[flops]") {
  const double stem = conv_macs(112, 64, 3, 7);
  double macs = stem;
  // Bottlenecks per stage: width, blocks, output size; a stage's first block takes the previous
  // stage's channels (64 after the stem) and has the 1x1 downsampling shortcut.
  const double widths[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3}, sizes[] = {56, 28, 14, 7};
  double channels = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const double w = widths[stage], out = sizes[stage], in_size = stage == 0 ? 56 : 2 * out;
    for (int block = 0; block < blocks[stage]; ++block) {
      const double in_channels = block == 0 ? channels : 4 * w;
      // v1.5: the 1x1 reduction runs at the input's size, the stride sits in the 3x3.
      macs += conv_macs(block == 0 ? in_size : out, w, in_channels, 1);
      macs += conv_macs(out, w, w, 3) + conv_macs(out, 4 * w, w, 1);
      if (block == 0) macs += conv_macs(out, 4 * w, in_channels, 1);
    }
    channels = 4 * w;
  }
  macs += 2048.0 * 1000;  // the classifier
  const StepFlops flops = flops_of({"--model=resnet50", "--batch_size=2"});
  CHECK(flops.forward == Approx(2 * macs).epsilon(1e-12));
  CHECK(macs == Approx(4.0892e9).epsilon(1e-3));  // the figure usually quoted (torchvision: 4.09 GFLOPS)
  // Backward: weight and input gradients of every product, but no input gradient for the stem,
  // whose input is the images.
  CHECK(flops.backward == Approx(2 * flops.forward - 2 * stem).epsilon(1e-12));
}

TEST_CASE("vgg16's FLOPs: 13 convolutions and 3 dense layers, about 15.5 G multiply-adds an image", "[flops]") {
  // (output size, channels) of each 3x3 convolution, in order.
  const std::vector<std::pair<double, double>> convs = {{224, 64}, {224, 64}, {112, 128}, {112, 128}, {56, 256},
                                                        {56, 256}, {56, 256}, {28, 512},  {28, 512},  {28, 512},
                                                        {14, 512}, {14, 512}, {14, 512}};
  double macs = 0, channels = 3;
  for (const auto& [size, out_channels] : convs) {
    macs += conv_macs(size, out_channels, channels, 3);
    channels = out_channels;
  }
  const double first = conv_macs(224, 64, 3, 3);
  macs += 25088.0 * 4096 + 4096.0 * 4096 + 4096.0 * 1000;
  const StepFlops flops = flops_of({"--model=vgg16", "--batch_size=2"});
  CHECK(flops.forward == Approx(2 * macs).epsilon(1e-12));
  CHECK(macs == Approx(15.47e9).epsilon(2e-3));  // torchvision: 15.47 GFLOPS
  CHECK(flops.backward == Approx(2 * flops.forward - 2 * first).epsilon(1e-12));
}

TEST_CASE("inception3's FLOPs at 299x299 match torchvision's published 5.71 G multiply-adds", "[flops]") {
  const StepFlops flops = flops_of({"--model=inception3", "--batch_size=2"});
  CHECK(flops.forward / 2 == Approx(5.713e9).epsilon(5e-3));
  CHECK(flops.backward > 1.9 * flops.forward);  // all but the stem's input gradient
  CHECK(flops.backward < 2.0 * flops.forward);
}

TEST_CASE("nmt's FLOPs: the gates of every LSTM layer and the vocabulary projection, per sentence", "[flops]") {
  // Defaults: embeddings 512, units 512, 100 + 100 tokens, vocabulary 50,000. An LSTM layer reading
  // `in` features costs 4H (in + H) multiply-adds per token and direction.
  const double H = 512, E = 512, T = 100, V = 50000;
  auto layer = [&](double in) { return 4 * H * (in + H); };
  // cudnn_lstm bi: 2 bidirectional layers (the second reads both directions, 2H), then a
  // 4-layer decoder and the projection.
  const double encoder_bi = T * 2 * (layer(E) + layer(2 * H));
  const double decoder = T * (layer(E) + 3 * layer(H));
  const double projection = T * H * V;
  const StepFlops bi = flops_of({"--model=nmt", "--encoder_type=cudnn_lstm", "--direction=bi", "--batch_size=4"});
  CHECK(bi.forward == Approx(2 * (encoder_bi + decoder + projection)).epsilon(1e-12));
  CHECK(bi.backward == Approx(2 * bi.forward).epsilon(1e-12));  // the embeddings need every input gradient
  // uni: 4 layers of H.
  const double encoder_uni = T * (layer(E) + 3 * layer(H));
  const StepFlops uni = flops_of({"--model=nmt", "--encoder_type=cudnn_lstm", "--direction=uni", "--batch_size=4"});
  CHECK(uni.forward == Approx(2 * (encoder_uni + decoder + projection)).epsilon(1e-12));
  // dynamic bi: two independent 2-layer stacks of H, one reading backwards.
  const double encoder_two_stacks = 2 * T * (layer(E) + layer(H));
  const StepFlops dynamic = flops_of({"--model=nmt", "--encoder_type=dynamic", "--direction=bi", "--batch_size=4"});
  CHECK(dynamic.forward == Approx(2 * (encoder_two_stacks + decoder + projection)).epsilon(1e-12));
}

TEST_CASE("rnnlm's and trivial's FLOPs by hand", "[flops]") {
  // rnnlm: embedding 32, 2 layers of 128, 50 tokens, vocabulary 10,001.
  const double per_token = 4 * 128 * (32 + 128) + 4 * 128 * (128 + 128) + 128 * 10001;
  const StepFlops rnnlm = flops_of({"--model=rnnlm", "--batch_size=8"});
  CHECK(rnnlm.forward == Approx(2 * 50 * per_token).epsilon(1e-12));
  CHECK(rnnlm.backward == Approx(2 * rnnlm.forward).epsilon(1e-12));
  // trivial: 3072 -> 256 -> 10; the first layer has no input gradient.
  const StepFlops trivial = flops_of({"--model=trivial"});
  CHECK(trivial.forward == 2 * (3072.0 * 256 + 256.0 * 10));
  CHECK(trivial.backward == 2 * (3072.0 * 256 + 2 * 256.0 * 10));
}

TEST_CASE("the peak table: dense figures by GPU and math, the more specific name first", "[flops]") {
  CHECK(gpu_peak_tflops("NVIDIA H200", dpbench::Precision::bf16)->tflops == 989.5);
  CHECK(gpu_peak_tflops("NVIDIA H200", dpbench::Precision::fp16)->tflops == 989.5);
  CHECK(gpu_peak_tflops("NVIDIA H100 80GB HBM3", dpbench::Precision::tf32)->tflops == 494.5);
  CHECK(gpu_peak_tflops("NVIDIA H100 80GB HBM3", dpbench::Precision::fp32)->tflops == 67);
  CHECK(gpu_peak_tflops("NVIDIA H100 PCIe", dpbench::Precision::bf16)->tflops == 756.5);
  CHECK(gpu_peak_tflops("NVIDIA A100-SXM4-80GB", dpbench::Precision::tf32)->tflops == 156);
  CHECK_THAT(gpu_peak_tflops("NVIDIA H200", dpbench::Precision::tf32)->source, Catch::Contains("dense"));
  CHECK_FALSE(gpu_peak_tflops("NVIDIA GeForce RTX 4090", dpbench::Precision::bf16).has_value());
}

TEST_CASE("every result carries its FLOPs per step, TFLOP/s per device and MFU or why there is none", "[flops]") {
  TempDir dir;
  const std::string out = dir.file("out.json");
  REQUIRE(run_cli({"--device=cpu", "--model=trivial", "--num_gpus=2", "--batch_size=8", "--num_batches=3",
                   "--num_warmup_batches=1", "--result_file=" + out}) == 0);
  nlohmann::json flops = read_json(out)["summary"]["flops"];
  const double per_step = 8 * 2 * (3072.0 * 256 + 256.0 * 10 + 3072.0 * 256 + 2 * 256.0 * 10);
  CHECK(flops["model_flops_per_step_per_device"].get<double>() == per_step);
  CHECK(flops["model_flops_per_step"].get<double>() == 2 * per_step);
  CHECK(flops["mfu"].is_null());
  CHECK_THAT(flops["mfu_reason"].get<std::string>(), Catch::Contains("reference backend"));
  const nlohmann::json summary = read_json(out)["summary"];
  const double steps_per_sec = summary["items_per_sec"].get<double>() / summary["items_per_step"].get<double>();
  CHECK(flops["tflops_per_sec_per_device"].get<double>() == Approx(per_step * steps_per_sec / 1e12));

  // A peak given: MFU against it. Forward-only runs count the forward pass alone.
  REQUIRE(run_cli({"--device=cpu", "--model=trivial", "--batch_size=8", "--num_batches=3", "--forward_only",
                   "--peak_tflops=0.5", "--result_file=" + out}) == 0);
  flops = read_json(out)["summary"]["flops"];
  CHECK(flops["model_flops_per_step_per_device"].get<double>() == 8 * 2 * (3072.0 * 256 + 256.0 * 10));
  CHECK(flops["peak_tflops_per_device"] == 0.5);
  CHECK(flops["peak_source"] == "--peak_tflops");
  CHECK(flops["mfu"].get<double>() == Approx(flops["tflops_per_sec_per_device"].get<double>() / 0.5));
  CHECK(run_cli({"--device=cpu", "--model=trivial", "--peak_tflops=-1", "--result_file=" + out}) == 2);
}
