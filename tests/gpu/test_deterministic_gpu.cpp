// [gpu] --deterministic: the ordered embedding scatter-add sums exactly as the reference backend
// does (position order), and whole runs of convolutional and sequence models, replayed as CUDA
// graphs, give the same bits twice: the property that lets param_norm compare strategies and
// launches (one process or mpirun) with the real models.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backends.h"
#include "engine/cuda/cuda_controls.h"
#include "engine/reference/reference_backend.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/host/test_support.h"

using namespace dpbench;
using namespace dpbench::gpu_test;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;

namespace {

// n ids in [0, vocab), about a third of them one hot id (as Zipf text makes "the" and "</s>"),
// the rest spread uniformly: long runs and short ones, unsorted.
std::vector<int32_t> skewed_ids(size_t n, int vocab, uint64_t stream) {
  const std::vector<float> u = random_vector(n, stream, 0.0f, 1.0f);
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) {
    const float x = u[i];
    ids[i] = x < 0.33f ? 7 : std::min(vocab - 1, static_cast<int>((x - 0.33f) / 0.67f * vocab));
  }
  return ids;
}

nlohmann::json run(const TempDir& dir, const std::string& name, std::vector<std::string> flags) {
  const std::string file = dir.file(name + ".json");
  flags.insert(flags.end(), {"--device=gpu", "--deterministic=true", "--display_every=1000",
                             "--result_file=" + file});
  REQUIRE(run_cli(flags) == 0);
  return read_json(file);
}

}  // namespace

TEST_CASE("cuda deterministic embedding backward adds in position order, as the reference does",
          "[gpu]") {
  auto gpu = make_gpu();
  set_deterministic(*gpu, true);
  ReferenceBackend reference;
  struct Case {
    int vocab, dim;
    size_t n, offset;
  };
  // float4 rows aligned and not, rows no float4 covers, and a long batch with one very long run.
  const Case cases[] = {{1000, 512, 300, 0}, {1000, 512, 300, 1}, {1000, 33, 300, 0},
                        {5000, 64, 20000, 0}};
  for (const Case& c : cases) {
    INFO("vocab " << c.vocab << " dim " << c.dim << " n " << c.n << " offset " << c.offset);
    const std::vector<int32_t> ids = skewed_ids(c.n, c.vocab, 400 + c.n);
    GpuArray<int32_t> ids_gpu(*gpu, ids);
    const size_t table_count = static_cast<size_t>(c.vocab) * c.dim;
    const std::vector<float> dy = random_vector(c.n * c.dim, 401);
    GpuTensor dy_gpu(*gpu, DataType::f32, dy, c.offset);
    std::vector<float> expected(table_count, 0.0f);
    reference.embedding_backward(ids.data(), dy.data(), c.n, c.dim, expected.data());
    // Twice, into fresh zeroed tables: the first call grows the workspace, the second reuses it.
    for (int round = 0; round < 2; ++round) {
      GpuTensor dtable_gpu(*gpu, DataType::f32, table_count, c.offset);
      gpu->ops().embedding_backward(ids_gpu.data(), static_cast<const float*>(dy_gpu.data()), c.n,
                                    c.dim, static_cast<float*>(dtable_gpu.data()));
      // ((0 + d0) + d1) + ... on the reference; d0 + d1 + ... then 0 + sum here: the same bits.
      check_identical(dtable_gpu.values(), expected, "round " + std::to_string(round));
    }
  }
}

TEST_CASE("deterministic runs give the same bits twice: CNN, nmt, rnnlm and gpt, on 1 and 2 GPUs",
          "[gpu]") {
  TempDir dir;
  const std::vector<std::string> nmt = {"--model=nmt", "--batch_size=16", "--src_vocab_size=500",
                                        "--tgt_vocab_size=400", "--embedding_dim=32", "--num_units=32",
                                        "--num_encoder_layers=2", "--num_decoder_layers=2",
                                        "--src_max_len=10", "--tgt_max_len=10",
                                        "--encoder_type=cudnn_lstm", "--precision=tf32"};
  const std::vector<std::vector<std::string>> workloads = {
      {"--model=resnet50", "--batch_size=8", "--precision=tf32"},
      {"--model=cifar10_cnn", "--batch_size=32", "--data_format=NHWC", "--precision=bf16"},
      nmt,
      {"--model=rnnlm", "--batch_size=16", "--vocab_size=300", "--seq_len=12"},
      // In bf16, where cuDNN's fused attention would run but for --deterministic (its backward
      // adds dQ by atomics): dpbench's attention kernels keep the bits.
      {"--model=gpt", "--batch_size=4", "--vocab_size=512", "--seq_len=128", "--num_layers=2", "--num_heads=4",
       "--hidden_size=128", "--precision=bf16"},
  };
  const int gpus = std::min(2, cuda_device_count());
  int index = 0;
  for (const auto& workload : workloads) {
    for (int n = 1; n <= gpus; ++n) {
      std::vector<std::string> flags = workload;
      flags.insert(flags.end(), {"--num_gpus=" + std::to_string(n), "--variable_update=replicated",
                                 "--num_batches=4", "--num_warmup_batches=2"});
      INFO(workload[0] << " on " << n << " GPU(s)");
      const nlohmann::json first = run(dir, "a" + std::to_string(index), flags);
      const nlohmann::json second = run(dir, "b" + std::to_string(index), flags);
      ++index;
      CHECK(first["config"]["deterministic"].get<bool>());
      CHECK(first["summary"]["param_norm"].get<double>() == second["summary"]["param_norm"].get<double>());
      for (size_t step = 0; step < first["steps"].size(); ++step)
        CHECK(first["steps"][step]["loss"].get<double>() == second["steps"][step]["loss"].get<double>());
    }
  }
}
