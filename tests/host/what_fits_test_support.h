// The what-fits tests' two steps, on either backend: a run's set-up and steps with each device
// limited to a number of bytes, and the memory rule of a configuration's strategy.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cli/memory_refusal.h"
#include "cli/run_command.h"
#include "engine/backends.h"
#include "models/model_registry.h"
#include "strategies/exchange_plan.h"
#include "strategies/strategy_registry.h"
#include "tests/host/strategy_test_support.h"

namespace dpbench::testing {

// The run of `config` with each device limited to `limit` bytes: nothing when it fits, the
// runner's fit when it is refused.
inline std::unique_ptr<ReplicaMemoryFit> run_within(const RunConfig& config, uint64_t limit) {
  std::unique_ptr<Model> model = find_model(config.model)->create(config);
  std::unique_ptr<Strategy> strategy = find_strategy(config.variable_update)->create(config, config);
  std::vector<std::unique_ptr<Device>> devices = create_devices(config.backend, config.gpu_indices);
  RunConfig limited = config;
  limited.device_memory = limit;
  configure_devices(limited, devices);
  try {
    Runner runner(*model, *strategy, devices, runner_settings(config));
    runner.run(nullptr, nullptr);
  } catch (const TooLittleDeviceMemory& refused) {
    return std::make_unique<ReplicaMemoryFit>(refused.fit());
  }
  return nullptr;
}

// What `config`'s strategy keeps and adds per device (its entry's memory rule).
inline StrategyMemory rule_of(const RunConfig& config) {
  std::unique_ptr<Model> model = find_model(config.model)->create(config);
  const std::vector<GradientRange> plan = plan_exchanges(model->layout(), exchange_plan_options(config));
  const ScheduleShape shape{config.world_devices(), config.num_devices(), 1};
  return resolve_strategy_name(config.variable_update)->memory(config, model->layout(), plan, shape, model->parameter_units());
}

}  // namespace dpbench::testing
