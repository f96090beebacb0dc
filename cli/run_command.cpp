// `dpbench run`: wiring of registries, devices, runner and result (see run_command.h).
#include "cli/run_command.h"

#include <cstdio>

#include "cli/console.h"
#include "cli/log.h"
#include "engine/cuda/cuda_controls.h"
#include "engine/device_factory.h"
#include "engine/environment.h"
#include "engine/errors.h"
#include "models/model_registry.h"
#include "reports/result_json.h"
#include "reports/statistics.h"
#include "strategies/strategy_registry.h"
#include "dpbench_version.h"

namespace dpbench {
namespace {

void print(const std::string& text) { log_lines(output_log(), text); }

// tf_cnn_benchmarks' static default; the automatic scale starts high and halves to what fits.
constexpr double kDefaultLossScale = 128;
constexpr double kDefaultAutoLossScale = 32768;


EnvironmentRecord describe_environment(const RunConfig& config, const std::vector<DeviceDescription>& devices) {
  EnvironmentRecord environment;
  environment.hostname = host_name();
  environment.date = utc_timestamp_iso8601();
  environment.backend = backend_name(config.backend);
  for (const DeviceDescription& device : devices)
    environment.devices.push_back({device.index, device.name, device.memory_bytes, device.compute_capability});
  const LibraryVersions versions = loaded_library_versions();
  environment.cuda_runtime = versions.cuda_runtime;
  environment.cuda_driver = versions.cuda_driver;
  environment.driver = versions.driver;
  environment.cudnn = versions.cudnn;
  environment.nccl = versions.nccl;
  environment.cublas = versions.cublas;
  return environment;
}

}  // namespace

OptimizerConfig optimizer_config(const RunConfig& config) {
  OptimizerConfig optimizer;
  optimizer.kind = parse_optimizer_kind(config.optimizer);
  optimizer.learning_rate = static_cast<float>(config.learning_rate);
  optimizer.momentum = static_cast<float>(config.momentum);
  optimizer.beta1 = static_cast<float>(config.adam_beta1);
  optimizer.beta2 = static_cast<float>(config.adam_beta2);
  optimizer.epsilon = static_cast<float>(config.adam_epsilon);
  if (config.precision == "fp16") {
    optimizer.loss_scaling =
        config.fp16_enable_auto_loss_scale ? LossScaling::automatic : LossScaling::fixed;
    const double given = config.fp16_loss_scale;
    optimizer.loss_scale = static_cast<float>(
        given > 0 ? given : (config.fp16_enable_auto_loss_scale ? kDefaultAutoLossScale : kDefaultLossScale));
    optimizer.loss_scale_increase_every = config.fp16_inc_loss_scale_every_n;
  }
  return optimizer;
}

RunnerSettings runner_settings(const RunConfig& config) {
  RunnerSettings settings;
  settings.batch_size = config.batch_size;
  settings.num_warmup_batches = config.num_warmup_batches;
  settings.num_batches = config.num_batches;
  settings.display_every = config.display_every;
  settings.seed = config.seed;
  settings.optimizer = optimizer_config(config);
  settings.weight_copy_type = config.activation_type();
  settings.cuda_graph = config.cuda_graph;
  settings.profile_step = config.profile_step;
  return settings;
}

Result assemble_result(const RunConfig& config, const RunMeasurements& measured, const std::string& unit,
                       int64_t items_per_step, const std::vector<DeviceDescription>& devices) {
  Result result;
  result.tool_version = DPBENCH_VERSION;
  result.git_sha = DPBENCH_GIT_SHA;
  result.environment = describe_environment(config, devices);
  result.config = config_to_json(config);

  std::vector<double> measured_ms, measured_rates;
  for (size_t step = 0; step < measured.step_time_ms.size(); ++step) {
    const bool warmup = static_cast<int64_t>(step) < measured.warmup_steps;
    result.steps.push_back({static_cast<int64_t>(step), measured.step_time_ms[step], measured.step_loss[step], warmup});
    if (!warmup) {
      measured_ms.push_back(measured.step_time_ms[step]);
      measured_rates.push_back(items_per_step / (measured.step_time_ms[step] / 1000.0));
    }
  }

  Summary& summary = result.summary;
  summary.unit = unit + "/s";
  summary.measured_steps = static_cast<int64_t>(measured_ms.size());
  summary.warmup_steps = measured.warmup_steps;
  summary.num_devices = config.num_devices();
  summary.global_batch_size = config.global_batch_size();
  summary.items_per_step = items_per_step;
  summary.total_time_s = measured.total_time_s;
  // Ratio of totals, as tf_cnn_benchmarks' "total images/sec", not a mean of per-step rates.
  summary.items_per_sec = measured.total_time_s > 0
                              ? static_cast<double>(items_per_step) * summary.measured_steps / measured.total_time_s
                              : 0.0;
  if (measured_ms.size() >= 2) {
    summary.step_time_ms = summarize(measured_ms);
    summary.items_per_sec_per_step = summarize(measured_rates);
    summary.jitter = jitter(measured_rates);
  }
  summary.final_loss = measured.step_loss.empty() ? 0.0 : measured.step_loss.back();
  summary.num_parameters = measured.num_parameters;
  summary.param_norm = measured.param_norm;
  summary.comm = measured.comm;
  summary.cuda_graph = measured.cuda_graph;
  if (measured.kernels_per_step >= 0) summary.kernel_launches_per_step = measured.kernels_per_step;
  // The reference backend has no TF32: there a tf32 run computes in plain fp32, and says so. It
  // does store fp16 and bf16 values exactly as the GPU would, so those runs keep their name.
  summary.math = config.precision == "tf32" ? (config.backend == BackendKind::cuda ? "tf32" : "fp32")
                                            : config.precision;
  if (config.precision == "fp16") {
    summary.loss_scaling = config.fp16_enable_auto_loss_scale ? "automatic" : "fixed";
    summary.final_loss_scale = measured.final_loss_scale;
  }
  return result;
}

Result run_benchmark(const ParsedRunFlags& flags) {
  const RunConfig& config = flags.config;
  if (flags.fell_back_to_reference)
    print("note: no CUDA GPU found; running on the reference backend (host C++; pass --device=cpu to silence this)\n");

  const ModelEntry* model_entry = find_model(config.model);
  const StrategyEntry* strategy_entry = find_strategy(config.variable_update);
  if (!model_entry || !model_entry->create) throw ConfigError("--model=" + config.model + ": not available");
  if (!strategy_entry || !strategy_entry->create)
    throw ConfigError("--variable_update=" + config.variable_update + ": not available");

  std::unique_ptr<Model> model = model_entry->create(config);
  std::unique_ptr<Strategy> strategy = strategy_entry->create(config);
  std::vector<std::unique_ptr<Device>> devices = create_devices(config.backend, config.gpu_indices);
  for (auto& device : devices)
    if (device->kind() == BackendKind::cuda) {
      set_cudnn_benchmark(*device, config.cudnn_benchmark);
      // 16-bit runs keep their few fp32 GEMMs (the classifier) on TF32 tensor cores too.
      set_tf32(*device, config.precision != "fp32");
    }
  std::vector<DeviceDescription> descriptions;
  for (const auto& device : devices) descriptions.push_back(device->description());

  const int64_t items_per_step = static_cast<int64_t>(config.global_batch_size()) * model->items_per_sample();
  print(format_run_header(config, model->unit(), static_cast<int64_t>(model->layout().total_count()), descriptions));

  Runner runner(*model, *strategy, devices, runner_settings(config));

  const std::string unit = model->unit();
  const RunMeasurements measured = runner.run(
      [&](const ProgressSnapshot& snapshot) { print(format_progress_line(snapshot, items_per_step, unit) + "\n"); },
      [&](const std::string& phase) { print(phase + "\n"); });

  Result result = assemble_result(config, measured, unit, items_per_step, descriptions);
  print(format_summary(result));
  if (!config.result_file.empty()) {
    write_result_atomically(result, config.result_file);
    print("Result written to " + config.result_file + "\n");
  }
  return result;
}

}  // namespace dpbench
