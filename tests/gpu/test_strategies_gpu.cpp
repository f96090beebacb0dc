// [gpu] The strategies on real GPUs: on 2 and 4 GPUs (as many as the machine has), every
// averaging strategy trains the same model as one GPU running N times the per-device batch, with
// NCCL steps replayed as CUDA graphs; and the exchange reports what it measured. rnnlm also with
// sparse embedding gradients (touched rows all-gathered instead of the table all-reduced).
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "engine/backends.h"
#include "tests/host/strategy_test_support.h"

namespace dpbench {
namespace {

using namespace dpbench::testing;

struct GpuVariant {
  std::string name;
  std::function<void(RunConfig&)> adjust;
  double rtol, atol;
};

// One GPU with the whole batch computes its GEMMs and reductions over N times the rows, in
// another order than N GPUs do: fp32 results differ in the last bits of each gradient, which
// three SGD steps (lr 0.01) keep well inside rtol 1e-4 / atol 1e-5. Compact transfers add the
// rounding of the exchanged values (see the host test): 2 x 2^-11 relative for fp16.
std::vector<GpuVariant> gpu_variants() {
  return {
      {"replicated nccl", replicated("nccl"), 1e-4, 1e-5},
      {"replicated nccl#2, no overlap", replicated("nccl#2", [](RunConfig& c) { c.overlap_comm = false; }), 1e-4, 1e-5},
      {"replicated nccl, per tensor, small batched",
       replicated("nccl", [](RunConfig& c) { c.bucket_cap_mb = 0; c.agg_small_grads_max_bytes = 2048; }), 1e-4, 1e-5},
      {"replicated nccl, sharded update", replicated("nccl", [](RunConfig& c) { c.sharded_update = true; }), 1e-4, 1e-5},
      {"replicated nccl#2, sharded update, per tensor, no overlap",
       replicated("nccl#2", [](RunConfig& c) { c.sharded_update = true; c.bucket_cap_mb = 0; c.overlap_comm = false; }),
       1e-4, 1e-5},
      {"replicated xring", replicated("xring"), 1e-4, 1e-5},
      {"replicated xring#2, tiny buckets", replicated("xring#2", [](RunConfig& c) { c.bucket_cap_mb = 0.01; }), 1e-4, 1e-5},
      {"replicated psgpu", replicated("psgpu"), 1e-4, 1e-5},
      {"replicated pscpu, repacking 2", replicated("pscpu", [](RunConfig& c) { c.gradient_repacking = 2; }), 1e-4, 1e-5},
      {"replicated nccl fp16 transfer", replicated("nccl", [](RunConfig& c) { c.compact_gradient_transfer = TransferWidth::fp16; }), 2e-3, 5e-5},
      {"replicated psgpu bf16 transfer", replicated("psgpu", [](RunConfig& c) { c.compact_gradient_transfer = TransferWidth::bf16; }), 1.6e-2, 4e-4},
      {"replicated pscpu fp16 transfer", replicated("pscpu", [](RunConfig& c) { c.compact_gradient_transfer = TransferWidth::fp16; }), 2e-3, 5e-5},
      {"parameter_server gpu", parameter_server("gpu"), 1e-4, 1e-5},
      {"parameter_server gpu, per tensor", parameter_server("gpu", [](RunConfig& c) { c.bucket_cap_mb = 0; }), 1e-4, 1e-5},
      {"parameter_server cpu", parameter_server("cpu"), 1e-4, 1e-5},
  };
}

std::vector<int> gpu_counts() {
  const int available = cuda_device_count();
  std::vector<int> counts;
  for (int n : {2, 4})
    if (n <= available) counts.push_back(n);
  return counts;
}

// Trains `common` on one GPU with n x batch, then each variant on n GPUs with `batch` each: replica
// 0 holds the one-GPU parameters within the variant's tolerance, every replica holds replica 0's
// bit for bit, and `more` checks what else the variant promises.
void check_like_one_gpu(const std::vector<std::string>& common, int batch, int n,
                        const std::vector<GpuVariant>& variants,
                        const std::function<void(const Trained&)>& more) {
  std::vector<std::string> one = common;
  one.push_back("--num_gpus=1");
  one.push_back("--batch_size=" + std::to_string(batch * n));
  const std::vector<float> want = train(one, {}, BackendKind::cuda).parameters.front();
  for (const GpuVariant& variant : variants) {
    std::vector<std::string> args = common;
    args.push_back("--num_gpus=" + std::to_string(n));
    args.push_back("--batch_size=" + std::to_string(batch));
    INFO(variant.name << " on " << n << " GPUs");
    const Trained trained = train(args, variant.adjust, BackendKind::cuda);
    check_close(trained.parameters.front(), want, variant.rtol, variant.atol);
    for (int r = 1; r < n; ++r) CHECK(trained.parameters[r] == trained.parameters.front());
    CHECK(trained.comm.at("transfer_ms_per_step").get<double>() > 0);
    CHECK(trained.kernels_per_step > 0);
    if (more) more(trained);
  }
}

const std::vector<std::string> kTinyRnnlm = {"--model=rnnlm", "--vocab_size=64", "--embedding_dim=8",
                                             "--num_units=16", "--num_layers=2", "--seq_len=6",
                                             "--num_warmup_batches=1", "--num_batches=2"};

// Adam moves each parameter by up to its learning rate (1e-3) per step whatever the gradient's
// size, so an element whose gradient is near zero and differs in its last bits (one GPU reduces
// over N times the rows) may move differently: atol = one step's move.
constexpr double kAdamRtol = 1e-3, kAdamAtol = 1e-3;

}  // namespace

TEST_CASE("[gpu] every averaging strategy trains trivial as one GPU with N times the batch",
          "[gpu][strategies][multi_gpu]") {
  const std::vector<int> counts = gpu_counts();
  REQUIRE_FALSE(counts.empty());  // [multi_gpu]: main() leaves it out where fewer than 2 GPUs are
  for (int n : counts)
    check_like_one_gpu({"--model=trivial", "--precision=fp32", "--num_warmup_batches=1", "--num_batches=2"}, 2, n,
                       gpu_variants(), {});
}

TEST_CASE("[gpu] rnnlm (cuDNN LSTM, Adam) trains alike under replicated nccl (sharded update too) and parameter_server gpu",
          "[gpu][strategies][multi_gpu]") {
  REQUIRE_FALSE(gpu_counts().empty());
  for (int n : gpu_counts())
    check_like_one_gpu(kTinyRnnlm, 4, n,
                       {{"replicated nccl", replicated("nccl"), kAdamRtol, kAdamAtol},
                        {"parameter_server gpu", parameter_server("gpu"), kAdamRtol, kAdamAtol},
                        {"replicated nccl, sharded update", replicated("nccl", [](RunConfig& c) { c.sharded_update = true; }),
                         kAdamRtol, kAdamAtol},
                        {"replicated xring", replicated("xring"), kAdamRtol, kAdamAtol}},
                       {});
}

TEST_CASE("[gpu] rnnlm with sparse embedding gradients trains as one GPU with N times the batch",
          "[gpu][strategies][sparse][multi_gpu]") {
  REQUIRE_FALSE(gpu_counts().empty());
  auto sparse = [](std::function<void(RunConfig&)> more = {}) {
    return [more](RunConfig& config) {
      config.sparse_embedding_grads = true;
      if (more) more(config);
    };
  };
  // 64 rows, 4 x 6 = 24 ids per GPU and step: the GPUs touch different, overlapping rows. Each GPU
  // scatter-adds the gathered packs rank by rank, one rank's distinct rows per launch, so the
  // atomic adds of a row happen in rank order: replicas agree bit for bit.
  for (int n : gpu_counts())
    check_like_one_gpu(
        kTinyRnnlm, 4, n,
        {{"replicated nccl, sparse", replicated("nccl", sparse()), kAdamRtol, kAdamAtol},
         {"replicated nccl, per tensor, sparse", replicated("nccl", sparse([](RunConfig& c) { c.bucket_cap_mb = 0; })),
          kAdamRtol, kAdamAtol},
         {"replicated nccl, repacking 3, no overlap, sparse",
          replicated("nccl", sparse([](RunConfig& c) { c.gradient_repacking = 3; c.overlap_comm = false; })),
          kAdamRtol, kAdamAtol}},
        [](const Trained& trained) {
          CHECK(trained.comm.at("embedding_exchange") == "sparse");
          // The exchange reads nothing back on the host: the whole step, exchange included, was
          // captured once and replayed as a CUDA graph (--cuda_graph defaults to true).
          CHECK(trained.cuda_graph);
        });
}

}  // namespace dpbench
