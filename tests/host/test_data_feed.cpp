// Feeding real and host-built data, end to end on the reference backend: host feeding (prefetched
// and synchronous) trains exactly what on-device data trains, real data sets shard so that N
// devices train what one device with N times the batch trains, epochs and timed epochs, shuffling
// from the seed, and every bad data flag or data set ends in one error line and no result.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "cli/run_config.h"
#include "models/cnn_model.h"
#include "tests/host/data_test_support.h"
#include "tests/host/test_support.h"

using dpbench::testing::DataTempDir;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::write_bytes;
using dpbench::testing::write_text;

namespace {

using Args = dpbench::testing::CliArgs;
using dpbench::testing::joined;

// On the reference backend; the run must succeed.
nlohmann::json run_to_json(const Args& args, const DataTempDir& dir, const std::string& name = "result.json") {
  return dpbench::testing::run_result(joined(args, {"--device=cpu"}), dir, name);
}

// Five training files of `per_file` records each: random labels and pixels from a fixed seed.
void write_cifar10(const std::string& directory, int per_file, uint32_t seed = 7) {
  std::mt19937 random(seed);
  for (int file = 1; file <= 5; ++file) {
    std::vector<uint8_t> bytes;
    for (int record = 0; record < per_file; ++record) {
      bytes.push_back(static_cast<uint8_t>(random() % 10));
      for (int pixel = 0; pixel < 3072; ++pixel) bytes.push_back(static_cast<uint8_t>(random() % 256));
    }
    write_bytes(directory + "/data_batch_" + std::to_string(file) + ".bin", bytes);
  }
}

// Sentences of 1 to max_words words drawn from `vocabulary` words w0, w1, ...
std::string random_text(int sentences, int max_words, int vocabulary, uint32_t seed) {
  std::mt19937 random(seed);
  std::string text;
  for (int s = 0; s < sentences; ++s) {
    const int words = 1 + static_cast<int>(random() % max_words);
    for (int w = 0; w < words; ++w) text += (w ? " w" : "w") + std::to_string(random() % vocabulary);
    text += "\n";
  }
  return text;
}

const Args kSmallRnnlm = {"--model=rnnlm", "--embedding_dim=8", "--num_units=8", "--seq_len=6"};
const Args kSmallNmt = {"--model=nmt", "--embedding_dim=8", "--num_units=8", "--num_encoder_layers=2",
                        "--num_decoder_layers=2", "--src_max_len=12", "--tgt_max_len=10"};

double param_norm(const nlohmann::json& result) { return result["summary"]["param_norm"].get<double>(); }

}  // namespace

TEST_CASE("host feeding trains bit for bit what on-device synthetic data trains", "[data_feed]") {
  const std::vector<Args> models = {
      {"--model=trivial", "--batch_size=8"},
      {"--model=cifar10_cnn", "--batch_size=4", "--data_format=NHWC", "--precision=bf16"},
      joined(kSmallRnnlm, {"--vocab_size=50", "--batch_size=4"}),
      joined(kSmallNmt, {"--src_vocab_size=40", "--tgt_vocab_size=30", "--batch_size=4"}),  // reversed source
      joined(kSmallNmt, {"--src_vocab_size=40", "--tgt_vocab_size=30", "--batch_size=4", "--encoder_type=cudnn_lstm"}),
      {"--model=gpt", "--vocab_size=50", "--seq_len=6", "--num_layers=1", "--num_heads=2", "--hidden_size=8",
       "--batch_size=4"},
  };
  for (const Args& model : models) {
    INFO(model.front());
    DataTempDir dir;
    const Args common = joined(model, {"--num_gpus=2", "--variable_update=replicated", "--num_batches=3",
                                       "--num_warmup_batches=1"});
    const nlohmann::json on_device = run_to_json(joined(common, {"--data_feed=on_device"}), dir, "a.json");
    const nlohmann::json prefetch = run_to_json(joined(common, {"--data_feed=host", "--prefetch_depth=3"}), dir, "b.json");
    const nlohmann::json synchronous =
        run_to_json(joined(common, {"--data_feed=host", "--prefetch_data_to_device=false"}), dir, "c.json");
    CHECK(param_norm(prefetch) == param_norm(on_device));
    CHECK(param_norm(synchronous) == param_norm(on_device));
    for (size_t step = 0; step < on_device["steps"].size(); ++step)
      CHECK(prefetch["steps"][step]["loss"] == on_device["steps"][step]["loss"]);
    CHECK(on_device["summary"]["data"]["feed"] == "on_device");
    CHECK(prefetch["summary"]["data"]["feed"] == "host_prefetch");
    CHECK(prefetch["summary"]["data"]["prefetch_depth"] == 3);
    CHECK(synchronous["summary"]["data"]["feed"] == "host_synchronous");
    // Host-fed steps carry their wait and items; the on-device ones do not.
    CHECK(prefetch["steps"][0].contains("data_wait_ms"));
    CHECK(prefetch["steps"][0]["items"] == prefetch["summary"]["items_per_step"]);
    CHECK(prefetch["summary"]["data"]["wait_ms_per_step"].get<double>() >= 0);
    CHECK_FALSE(on_device["steps"][0].contains("data_wait_ms"));
  }
}

TEST_CASE("CIFAR-10 epochs: steps per epoch, dropped remainder, timed epochs and per-epoch times", "[data_feed]") {
  DataTempDir dir;
  write_cifar10(dir.file("cifar"), 10);  // 50 images; 2 devices x 4 = 8 per step: 6 steps, 2 dropped
  const nlohmann::json result =
      run_to_json({"--model=trivial", "--data_dir=" + dir.file("cifar"), "--num_gpus=2", "--batch_size=4",
                   "--num_epochs=3", "--timed_epochs=1:1", "--variable_update=replicated"},
                  dir);
  const nlohmann::json& data = result["summary"]["data"];
  CHECK(data["feed"] == "host_prefetch");
  CHECK(data["batches_per_epoch"] == 6);
  CHECK(data["dropped_examples_per_epoch"] == 2);
  REQUIRE(data["epochs"].size() == 3);
  CHECK(data["epochs"][0]["timed"] == false);
  CHECK(data["epochs"][1]["timed"] == true);
  CHECK(data["epochs"][2]["timed"] == false);
  CHECK(data["timed_epochs_time_s"] == data["epochs"][1]["time_s"]);
  CHECK(result["summary"]["warmup_steps"] == 6);
  CHECK(result["summary"]["measured_steps"] == 6);
  REQUIRE(result["steps"].size() == 18);
  CHECK_FALSE(result["steps"][11].contains("after_measurement"));
  CHECK(result["steps"][12]["after_measurement"] == true);
  CHECK(result["config"]["num_batches"] == 6);
  CHECK(result["config"]["timed_epochs"] == "1:1");
  CHECK(result["config"]["data_name"] == "cifar10");
}

TEST_CASE("real data sets shard: N devices train what one device with N times the batch trains", "[data_feed]") {
  DataTempDir dir;
  write_cifar10(dir.file("cifar"), 8);
  std::filesystem::create_directories(dir.file("ptb"));
  write_text(dir.file("ptb/ptb.train.txt"), random_text(40, 8, 30, 1));
  std::filesystem::create_directories(dir.file("nmt"));
  write_text(dir.file("nmt/train.src"), random_text(60, 24, 30, 2));
  write_text(dir.file("nmt/train.tgt"), random_text(60, 24, 20, 3));
  const std::vector<Args> runs = {
      {"--model=trivial", "--data_dir=" + dir.file("cifar")},
      joined(kSmallRnnlm, {"--vocab_size=33", "--data_dir=" + dir.file("ptb")}),
      joined(kSmallNmt, {"--src_vocab_size=33", "--tgt_vocab_size=23", "--data_dir=" + dir.file("nmt")}),
  };
  for (const Args& run : runs) {
    INFO(run.front());
    const Args common = joined(run, {"--optimizer=sgd", "--learning_rate=0.5", "--num_batches=4",
                                     "--num_warmup_batches=0", "--variable_update=replicated"});
    const nlohmann::json one = run_to_json(joined(common, {"--num_gpus=1", "--batch_size=8"}), dir, "one.json");
    const nlohmann::json two = run_to_json(joined(common, {"--num_gpus=2", "--batch_size=4"}), dir, "two.json");
    const nlohmann::json four = run_to_json(joined(common, {"--num_gpus=4", "--batch_size=2"}), dir, "four.json");
    CHECK(param_norm(two) == Approx(param_norm(one)).epsilon(1e-6));
    CHECK(param_norm(four) == Approx(param_norm(one)).epsilon(1e-6));
    for (size_t step = 0; step < one["steps"].size(); ++step) {
      CHECK(two["steps"][step]["items"] == one["steps"][step]["items"]);
      CHECK(two["steps"][step]["loss"].get<double>() == Approx(one["steps"][step]["loss"].get<double>()).epsilon(1e-5));
    }
  }
}

TEST_CASE("real data: feeds agree, words vary per batch, shuffling follows the seed", "[data_feed]") {
  DataTempDir dir;
  std::filesystem::create_directories(dir.file("nmt"));
  write_text(dir.file("nmt/train.src"), random_text(60, 24, 30, 2));
  write_text(dir.file("nmt/train.tgt"), random_text(60, 24, 20, 3));
  const Args common = joined(kSmallNmt, {"--src_vocab_size=33", "--tgt_vocab_size=23", "--data_dir=" + dir.file("nmt"),
                                         "--num_gpus=2", "--batch_size=4", "--num_batches=5", "--num_warmup_batches=0",
                                         "--variable_update=replicated"});
  const nlohmann::json prefetch = run_to_json(common, dir, "a.json");
  const nlohmann::json synchronous = run_to_json(joined(common, {"--prefetch_data_to_device=false"}), dir, "b.json");
  const nlohmann::json again = run_to_json(common, dir, "c.json");
  const nlohmann::json unshuffled = run_to_json(joined(common, {"--shuffle=false"}), dir, "d.json");
  const nlohmann::json constant = run_to_json(joined(common, {"--data_feed=on_device"}), dir, "e.json");
  CHECK(param_norm(synchronous) == param_norm(prefetch));
  CHECK(param_norm(again) == param_norm(prefetch));
  CHECK(param_norm(unshuffled) != param_norm(prefetch));
  CHECK(param_norm(constant) != param_norm(prefetch));  // one batch over and over
  std::set<int64_t> words;
  int64_t total = 0;
  for (const auto& step : prefetch["steps"]) {
    words.insert(step["items"].get<int64_t>());
    total += step["items"].get<int64_t>();
  }
  CHECK(words.size() > 1);
  const nlohmann::json& summary = prefetch["summary"];
  CHECK(summary["items_per_sec"].get<double>() == Approx(total / summary["total_time_s"].get<double>()));
  // The constant batch counts its own words every step.
  CHECK(constant["steps"][0]["items"] == constant["steps"][4]["items"]);
}

TEST_CASE("bad data flags and data sets: one error, exit 2, no result", "[data_feed]") {
  DataTempDir dir;
  write_cifar10(dir.file("cifar"), 1);  // 5 images
  write_cifar10(dir.file("big"), 4);
  std::filesystem::create_directories(dir.file("ptb"));
  write_text(dir.file("ptb/ptb.train.txt"), random_text(20, 5, 10, 4));
  // A truncated record in the last file.
  std::filesystem::copy(dir.file("big"), dir.file("corrupt"));
  std::filesystem::resize_file(dir.file("corrupt/data_batch_5.bin"), 3073 * 4 - 10);
  const std::string out = dir.file("never.json");
  const std::vector<Args> bad = {
      {"--data_dir=" + dir.file("nowhere")},
      {"--model=rnnlm", "--data_name=ptb"},                                             // no data_dir
      {"--model=trivial", "--data_name=ptb", "--data_dir=" + dir.file("ptb")},         // wrong reader
      {"--model=inception3", "--data_name=cifar10"},                                    // cannot be 32x32
      {"--model=trivial", "--data_dir=" + dir.file("cifar"), "--num_gpus=2", "--batch_size=4"},  // 5 < 8
      {"--model=trivial", "--data_dir=" + dir.file("corrupt")},
      {"--model=trivial", "--data_dir=" + dir.file("ptb")},                             // no CIFAR files
      joined(kSmallRnnlm, {"--data_dir=" + dir.file("ptb")}),                           // vocabulary 10001
      joined(kSmallRnnlm, {"--vocab_size=13", "--data_dir=" + dir.file("ptb"), "--vocab_file=missing.txt"}),
      {"--model=trivial", "--num_epochs=2"},                                            // nothing to pass over
      {"--model=trivial", "--data_dir=" + dir.file("big"), "--num_epochs=2", "--num_batches=5"},
      {"--model=trivial", "--data_dir=" + dir.file("big"), "--num_epochs=2", "--timed_epochs=1:2"},
      {"--model=trivial", "--data_dir=" + dir.file("big"), "--timed_epochs=0:0"},      // no --num_epochs
      {"--model=trivial", "--prefetch_data_to_device=false"},                          // on_device
      {"--model=trivial", "--data_feed=disk"},
      {"--model=trivial", "--data_dir=" + dir.file("big"), "--num_buckets=3"},         // parallel_text only
      {"--model=trivial", "--data_feed=host", "--prefetch_depth=0"},
  };
  for (const Args& args : bad) {
    INFO(args.back());
    CHECK(run_cli(joined(args, {"--device=cpu", "--result_file=" + out})) == 2);
    CHECK_FALSE(std::filesystem::exists(out));
  }
}

TEST_CASE("with --data_name=cifar10 the ResNets are built for 32x32 images and 10 classes", "[data_feed]") {
  dpbench::RunConfig config;
  config.batch_size = 2;
  const size_t imagenet = dpbench::create_resnet50_model(config)->layout().parameter_count();
  config.data.data_name = "cifar10";
  const auto cifar = dpbench::create_resnet50_model(config);
  CHECK(cifar->images().height == 32);
  CHECK(cifar->images().classes == 10);
  // Only the classifier changes: 2048 x 1000 + 1000 weights become 2048 x 10 + 10.
  CHECK(imagenet - cifar->layout().parameter_count() == 2048 * 990 + 990);
}
