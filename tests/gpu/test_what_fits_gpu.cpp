// [gpu] What fits on one GPU (README "What fits"): the memory predicted from one run at another
// batch (Note [memory from one run]) within 5% of the run at that batch, and the too-little-memory
// refusal at set-up (Note [too little memory]) on a GPU: its suggested batch runs within the
// limit, the next larger is refused before any step, never by cudaMalloc in one.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/memory_refusal.h"
#include "cli/run_command.h"
#include "engine/backends.h"
#include "models/model_registry.h"
#include "reports/step_prediction.h"
#include "strategies/bucketed_exchange.h"
#include "strategies/exchange_plan.h"
#include "strategies/strategy_registry.h"
#include "tests/host/strategy_test_support.h"
#include "tests/host/what_fits_test_support.h"

namespace dpbench {
namespace {

using namespace dpbench::testing;

std::vector<std::string> on_one_gpu(const std::string& model, int batch) {
  return {"--model=" + model, "--num_gpus=1", "--batch_size=" + std::to_string(batch), "--num_warmup_batches=1",
          "--num_batches=2", "--variable_update=independent"};
}

RunConfig gpu_config(std::vector<std::string> args) {
  args.push_back("--device=gpu");
  DeviceInventory inventory;
  inventory.cuda_gpus = cuda_device_count();
  return parse_run_flags(args, inventory).config;
}

}  // namespace

TEST_CASE("memory predicted from one GPU run is within 5% of runs at other batches", "[gpu][what_fits]") {
  for (const std::string model : {"trivial", "resnet50"}) {
    const int base_batch = model == "trivial" ? 4096 : 32;
    const Trained base = train(on_one_gpu(model, base_batch), {}, BackendKind::cuda);
    MeasuredMemory measured;
    measured.replica = base.memory.front().figures.at_peak;
    measured.replica[static_cast<size_t>(MemoryCategory::communication)] = 0;
    measured.batch_size = base_batch;
    for (int factor : {2, 4}) {
      const int batch = base_batch * factor;
      INFO(model << " at batch " << batch << " from batch " << base_batch);
      const Trained run = train(on_one_gpu(model, batch), {}, BackendKind::cuda);
      const MemoryPrediction predicted =
          predict_memory(measured, rule_of(gpu_config(on_one_gpu(model, batch))), batch, uint64_t{1} << 50);
      const double peak = static_cast<double>(run.memory.front().figures.peak_bytes);
      const double error = 100.0 * (static_cast<double>(predicted.peak_bytes()) - peak) / peak;
      INFO("predicted " << predicted.peak_bytes() << " bytes, measured " << peak << ": " << error << "%");
      CHECK(std::abs(error) <= 5.0);
    }
  }
}

TEST_CASE("a GPU too small for the batch is refused at set-up, and the suggested batch runs", "[gpu][what_fits]") {
  const uint64_t limit = uint64_t{256} << 20;
  RunConfig config = gpu_config(on_one_gpu("trivial", 1 << 16));
  config.cudnn_benchmark = false;
  const std::unique_ptr<ReplicaMemoryFit> fit = run_within(config, limit);
  REQUIRE(fit != nullptr);
  REQUIRE(fit->fitted);
  const int64_t largest = largest_fitting_batch(*fit, rule_of(config));
  INFO("largest batch that fits 256 MiB: " << largest);
  REQUIRE(largest > 1);
  REQUIRE(largest < (1 << 16));
  config.batch_size = static_cast<int>(largest);
  CHECK(run_within(config, limit) == nullptr);
  config.batch_size = static_cast<int>(largest) + 1;
  CHECK(run_within(config, limit) != nullptr);
}

}  // namespace dpbench
