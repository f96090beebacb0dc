// Helpers for the strategy tests (host and [gpu]): train a run's model through the Runner and
// read back every replica's parameters, strategy variants as config edits, and the
// |got - want| <= atol + rtol * |want| comparison of whole parameter vectors.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/flags.h"
#include "cli/run_command.h"
#include "engine/backends.h"
#include "engine/training/runner.h"
#include "models/model_registry.h"
#include "strategies/strategy_registry.h"

namespace dpbench::testing {

struct Trained {
  std::vector<std::vector<float>> parameters;  // per replica
  nlohmann::json comm;
  int64_t kernels_per_step = -1;
  int64_t strategy_launches_per_step = -1;  // Strategy::launches_per_step, as the devices counted it
  bool cuda_graph = false;  // the measured steps were replayed as CUDA graphs
  std::vector<DeviceMemoryRecord> memory;  // per device, its memory ledger's figures at the end
  size_t parameter_slots = 0;              // floats in the parameter buffer (ParameterLayout::total_count)
  float final_loss_scale = 1.0f;           // replica 0's, after the last step
};

// Trains on reference devices from the command line `args`, then lets `adjust` change the
// resolved config (so strategy options can be set past the CLI's own checks).
// `build` (when given) makes the model from the resolved config in place of the registry's entry
// for --model: a test's own network, under the flags of the model it stands in for.
inline Trained train(std::vector<std::string> args, const std::function<void(RunConfig&)>& adjust = {},
                     BackendKind backend = BackendKind::reference,
                     const std::function<std::unique_ptr<Model>(const RunConfig&)>& build = {}) {
  args.push_back(backend == BackendKind::cuda ? "--device=gpu" : "--device=cpu");
  DeviceInventory inventory;
  if (backend == BackendKind::cuda) inventory.cuda_gpus = cuda_device_count();
  RunConfig config = parse_run_flags(args, inventory).config;
  if (adjust) adjust(config);
  std::unique_ptr<Model> model = build ? build(config) : find_model(config.model)->create(config);
  std::unique_ptr<Strategy> strategy = find_strategy(config.variable_update)->create(config, config);
  std::vector<std::unique_ptr<Device>> devices = create_devices(config.backend, config.gpu_indices);
  configure_devices(config, devices);  // --deterministic and the other device controls, as a run sets them
  Runner runner(*model, *strategy, devices, runner_settings(config));
  const RunMeasurements measured = runner.run(nullptr, nullptr);
  Trained trained;
  for (int r = 0; r < config.num_devices(); ++r) trained.parameters.push_back(runner.parameters_of(r));
  trained.comm = measured.comm;
  trained.kernels_per_step = measured.kernels_per_step;
  trained.strategy_launches_per_step = strategy->launches_per_step();
  trained.cuda_graph = measured.cuda_graph;
  trained.memory = measured.memory;
  trained.parameter_slots = model->layout().total_count();
  trained.final_loss_scale = measured.final_loss_scale;
  return trained;
}

struct Variant {
  std::string name;
  std::function<void(RunConfig&)> adjust;
  double rtol = 1e-5, atol = 2e-6;
};

inline std::function<void(RunConfig&)> replicated(std::string spec, std::function<void(RunConfig&)> more = {}) {
  return [spec, more](RunConfig& config) {
    config.variable_update = "replicated";
    config.all_reduce_spec = spec;
    if (more) more(config);
  };
}

inline std::function<void(RunConfig&)> parameter_server(std::string device, std::function<void(RunConfig&)> more = {}) {
  return [device, more](RunConfig& config) {
    config.variable_update = "parameter_server";
    config.local_parameter_device = device;
    if (more) more(config);
  };
}

inline void check_close(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      if (bad++ == 0) first_bad = i;
    }
  }
  INFO("first mismatch at " << first_bad << ": " << got[first_bad] << " vs " << want[first_bad]);
  CHECK(bad == 0);
}

}  // namespace dpbench::testing
