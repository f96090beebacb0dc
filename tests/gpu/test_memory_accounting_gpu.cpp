// [gpu] Memory accounting against the GPU's own figure: what the devices' ledgers account is what
// cudaMemGetInfo says the run took beyond what was in use when the device was made, up to the
// libraries' own allocations and the allocator's rounding (README, "Memory").
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/backends.h"
#include "engine/machine/memory_ledger.h"
#include "tests/host/strategy_test_support.h"

namespace dpbench {
namespace {

using namespace dpbench::testing;

constexpr int64_t kMiB = int64_t{1} << 20;

// trivial on one GPU at this batch: nearly all of its bytes are the batch (3072 floats an image)
// and the layers' outputs, in six buffers, so the allocator's rounding (at most 2 MiB a buffer)
// stays small beside them.
Trained trivial_on_gpu(int batch) {
  return train({"--model=trivial", "--num_gpus=1", "--batch_size=" + std::to_string(batch), "--num_warmup_batches=1",
                "--num_batches=2", "--cudnn_benchmark=false"},
               {}, BackendKind::cuda);
}

// What cudaMemGetInfo counts that no ledger does, once the context existed: the libraries' own
// allocations and the rounding (unaccounted.libraries_bytes in the result).
int64_t libraries_bytes(const DeviceMemoryRecord& record) {
  return record.reported_used_bytes - record.reported_used_at_creation_bytes -
         static_cast<int64_t>(total_bytes(record.figures.held));
}

}  // namespace

TEST_CASE("the accounted bytes are what the GPU says the run took, beside the libraries' own",
          "[gpu][memory]") {
  // Warm runs first: the context then holds the kernels these runs load lazily (CUDA loads a
  // module on its first launch and keeps it), so what follows sees only the run's own memory.
  for (int batch : {4096, 32768}) trivial_on_gpu(batch);

  std::vector<DeviceMemoryRecord> records;
  for (int batch : {4096, 32768}) {
    const Trained trained = trivial_on_gpu(batch);
    REQUIRE(trained.memory.size() == 1);
    const DeviceMemoryRecord& record = trained.memory.front();
    REQUIRE(record.reported_used_bytes > 0);
    REQUIRE(record.reported_used_at_creation_bytes > 0);
    INFO("batch " << batch << ": accounted " << total_bytes(record.figures.held) / kMiB << " MiB, the GPU's figure "
                  << record.reported_used_bytes / kMiB << " MiB, at the device's creation "
                  << record.reported_used_at_creation_bytes / kMiB << " MiB, libraries and rounding "
                  << libraries_bytes(record) / kMiB << " MiB");
    // What is left is the cuBLAS and cuDNN handles and the rounding: cuBLAS keeps a workspace of
    // up to 32 MiB per handle on sm_90, a device makes a cuBLAS and a cuDNN handle per stream it
    // uses (three at most: compute, communication, copy), a cuDNN handle takes a few MiB, and six
    // buffers round up by at most 2 MiB each: 3 x 32 + 16 + 16 = 128 MiB bound it. It cannot be
    // below 0 but for another process freeing memory meanwhile (a 16 MiB margin).
    CHECK(libraries_bytes(record) >= -16 * kMiB);
    CHECK(libraries_bytes(record) <= 128 * kMiB);
    records.push_back(record);
  }
  // Between the two batches only the batch-sized buffers differ; the handles are the same, so
  // the GPU's figure grows by what the ledger accounts, up to the rounding of the six buffers
  // (2 MiB each) and 1% for the allocator's bookkeeping.
  const int64_t accounted_growth = static_cast<int64_t>(total_bytes(records[1].figures.held)) -
                                   static_cast<int64_t>(total_bytes(records[0].figures.held));
  const int64_t reported_growth = (records[1].reported_used_bytes - records[1].reported_used_at_creation_bytes) -
                                  (records[0].reported_used_bytes - records[0].reported_used_at_creation_bytes);
  INFO("accounted growth " << accounted_growth / kMiB << " MiB, the GPU's " << reported_growth / kMiB << " MiB");
  REQUIRE(accounted_growth > 256 * kMiB);
  CHECK(std::llabs(reported_growth - accounted_growth) <= 12 * kMiB + accounted_growth / 100);
}

}  // namespace dpbench
