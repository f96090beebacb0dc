// Host feeding on the GPUs: prefetched (copy stream, events, replayed CUDA graphs) and
// synchronous feeding train what on-device synthetic data trains, and a real CIFAR-10 data set
// trains on the GPU what it trains on the reference backend.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "engine/backends.h"
#include "tests/host/data_test_support.h"
#include "tests/host/test_support.h"

using dpbench::testing::DataTempDir;
using dpbench::testing::write_bytes;

namespace {

using Args = dpbench::testing::CliArgs;
using dpbench::testing::run_result;

Args with(const Args& a, const Args& b) { return dpbench::testing::joined(a, b); }

}  // namespace

TEST_CASE("GPU host feeding, prefetched and synchronous, trains what on-device data trains", "[gpu]") {
  const int gpus = std::min(2, dpbench::cuda_device_count());
  REQUIRE(gpus > 0);
  const std::vector<Args> models = {
      {"--model=trivial", "--batch_size=64"},
      {"--model=cifar10_cnn", "--batch_size=32", "--data_format=NHWC", "--precision=bf16"},
      {"--model=rnnlm", "--vocab_size=500", "--seq_len=12", "--batch_size=16"},
      {"--model=nmt", "--src_vocab_size=300", "--tgt_vocab_size=200", "--embedding_dim=64", "--num_units=64",
       "--src_max_len=9", "--tgt_max_len=7", "--batch_size=16"},
      {"--model=nmt", "--encoder_type=cudnn_lstm", "--src_vocab_size=300", "--tgt_vocab_size=200",
       "--embedding_dim=64", "--num_units=64", "--src_max_len=9", "--tgt_max_len=7", "--batch_size=16"},
  };
  for (const Args& model : models) {
    INFO(model.front());
    DataTempDir dir;
    const Args common = with(model, {"--device=gpu", "--num_gpus=" + std::to_string(gpus), "--variable_update=replicated",
                                     "--num_batches=8", "--num_warmup_batches=2", "--cudnn_benchmark=false"});
    const nlohmann::json on_device = run_result(with(common, {"--data_feed=on_device"}), dir, "a.json");
    const nlohmann::json prefetch = run_result(with(common, {"--data_feed=host"}), dir, "b.json");
    const nlohmann::json synchronous =
        run_result(with(common, {"--data_feed=host", "--prefetch_data_to_device=false"}), dir, "c.json");
    CHECK(prefetch["summary"]["cuda_graph"] == true);
    // Embedding gradients are summed with atomics, so runs agree to rounding, not to the bit.
    const double expected = on_device["summary"]["param_norm"];
    CHECK(prefetch["summary"]["param_norm"].get<double>() == Approx(expected).epsilon(1e-5));
    CHECK(synchronous["summary"]["param_norm"].get<double>() == Approx(expected).epsilon(1e-5));
    for (size_t step = 0; step < 10; ++step) {
      const double want = on_device["steps"][step]["loss"];
      CHECK(prefetch["steps"][step]["loss"].get<double>() == Approx(want).epsilon(1e-4));
    }
    CHECK(prefetch["summary"]["data"]["feed"] == "host_prefetch");
    CHECK(synchronous["summary"]["data"]["wait_ms_per_step"].get<double>() > 0);
  }
}

TEST_CASE("a CIFAR-10 data set trains on the GPU what it trains on the reference backend", "[gpu]") {
  DataTempDir dir;
  std::mt19937 random(11);
  for (int file = 1; file <= 5; ++file) {
    std::vector<uint8_t> bytes;
    for (int record = 0; record < 40; ++record) {
      bytes.push_back(static_cast<uint8_t>(random() % 10));
      for (int pixel = 0; pixel < 3072; ++pixel) bytes.push_back(static_cast<uint8_t>(random() % 256));
    }
    write_bytes(dir.file("cifar/data_batch_" + std::to_string(file) + ".bin"), bytes);
  }
  const Args common = {"--model=trivial", "--data_dir=" + dir.file("cifar"), "--batch_size=16", "--num_epochs=2",
                       "--timed_epochs=1", "--optimizer=sgd", "--learning_rate=0.01"};
  const nlohmann::json gpu = run_result(with(common, {"--device=gpu", "--num_gpus=1"}), dir, "gpu.json");
  const nlohmann::json cpu = run_result(with(common, {"--device=cpu", "--num_gpus=1"}), dir, "cpu.json");
  REQUIRE(gpu["steps"].size() == 24);  // 200 images / 16: 12 per epoch
  CHECK(gpu["summary"]["data"]["epochs"].size() == 2);
  CHECK(gpu["summary"]["measured_steps"] == 12);
  for (size_t step = 0; step < 24; ++step) {
    const double g = gpu["steps"][step]["loss"], c = cpu["steps"][step]["loss"];
    INFO("step " << step);
    CHECK(std::abs(g - c) <= 1e-4 + 1e-3 * std::abs(c));
  }
  CHECK(gpu["summary"]["param_norm"].get<double>() == Approx(cpu["summary"]["param_norm"].get<double>()).epsilon(1e-4));
}
