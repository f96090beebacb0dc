// [gpu] fully_sharded on real GPUs: with one GPU it is one device training alone (Note [a group
// of one] in strategies/fully_sharded.h) and holds replicated's parameters bit for bit, replayed
// as CUDA graphs; on 2 and 4 GPUs (where present) its gathers and reduce-scatters through NCCL,
// captured into the step's graph, train the same gpt and Transformer as replicated, and skip the
// same overflowing steps under fp16's automatic loss scaling.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/backends.h"
#include "tests/host/reference_cnn_test_support.h"  // check_same_bits
#include "tests/host/strategy_test_support.h"

namespace dpbench {
namespace {

using namespace dpbench::testing;

const std::vector<std::string> kSmallGpt = {"--model=gpt", "--vocab_size=256", "--seq_len=64", "--num_layers=4",
                                            "--num_heads=4", "--hidden_size=128", "--num_warmup_batches=2",
                                            "--num_batches=3", "--deterministic=true", "--optimizer=adamw"};

Trained train_gpu(std::vector<std::string> args, int gpus, const std::string& strategy,
                  std::vector<std::string> more = {}) {
  args.push_back("--num_gpus=" + std::to_string(gpus));
  args.push_back("--batch_size=4");
  args.push_back("--variable_update=" + strategy);
  args.insert(args.end(), more.begin(), more.end());
  return train(args, {}, BackendKind::cuda);
}

}  // namespace

TEST_CASE("[gpu] fully_sharded on one GPU trains gpt as replicated, replayed as a CUDA graph",
          "[gpu][strategies][fully_sharded]") {
  for (const std::string& precision : {"--precision=fp32", "--precision=bf16"}) {
    INFO(precision);
    const Trained want = train_gpu(kSmallGpt, 1, "replicated", {precision});
    const Trained got = train_gpu(kSmallGpt, 1, "fully_sharded", {precision});
    check_same_bits(got.parameters.front(), want.parameters.front(), "fully_sharded against replicated");
    CHECK(got.cuda_graph);
    // Nothing to gather or reduce: the strategy adds no kernel to the step.
    CHECK(got.kernels_per_step == want.kernels_per_step);
  }
}

TEST_CASE("[gpu] fully_sharded on 2 and 4 GPUs trains gpt and the Transformer as replicated",
          "[gpu][strategies][fully_sharded][multi_gpu]") {
  const int available = cuda_device_count();
  REQUIRE(available >= 2);  // [multi_gpu]: main() leaves it out where fewer than 2 GPUs are
  const std::vector<std::string> transformer = {"--model=nmt", "--encoder_type=transformer", "--src_vocab_size=64",
                                                "--tgt_vocab_size=48", "--num_units=64", "--num_heads=4",
                                                "--ffn_units=128", "--num_encoder_layers=2", "--num_decoder_layers=2",
                                                "--src_max_len=12", "--tgt_max_len=10", "--dropout=0",
                                                "--num_warmup_batches=1", "--num_batches=2", "--deterministic=true"};
  for (int n : {2, 4}) {
    if (n > available) continue;
    for (const std::vector<std::string>& model : {kSmallGpt, transformer}) {
      const Trained want = train_gpu(model, n, "replicated");
      for (const std::vector<std::string>& options :
           {std::vector<std::string>{}, {"--reshard_after_forward=false"}, {"--shard_group_size=2"}}) {
        INFO(model.front() << " on " << n << " GPUs " << (options.empty() ? "" : options.front()));
        const Trained got = train_gpu(model, n, "fully_sharded", options);
        // The same kernels on the same values; the reduce-scatter's sums and the all-reduce's may
        // run in different orders inside NCCL, so the last bits may differ (rtol as the strategies' test).
        check_close(got.parameters.front(), want.parameters.front(), 1e-4, 1e-5);
        CHECK(got.cuda_graph);
        CHECK(got.comm.at("transfer_ms_per_step").get<double>() > 0);
      }
    }
  }
}

TEST_CASE("[gpu] fully_sharded under fp16's automatic loss scaling skips the steps replicated skips",
          "[gpu][strategies][fully_sharded][multi_gpu][loss_scaling]") {
  const int available = cuda_device_count();
  REQUIRE(available >= 2);
  // From 2^24 the first steps overflow: every GPU must skip them (and halve its scale) together.
  const std::vector<std::string> fp16 = {"--precision=fp16", "--fp16_enable_auto_loss_scale=true",
                                         "--fp16_loss_scale=16777216"};
  for (int n : {2, 4}) {
    if (n > available) continue;
    INFO(n << " GPUs");
    const Trained want = train_gpu(kSmallGpt, n, "replicated", fp16);
    const Trained got = train_gpu(kSmallGpt, n, "fully_sharded", fp16);
    CHECK(got.final_loss_scale == want.final_loss_scale);
    CHECK(got.final_loss_scale < 16777216.0f);
    check_close(got.parameters.front(), want.parameters.front(), 1e-4, 1e-5);
  }
}

}  // namespace dpbench
