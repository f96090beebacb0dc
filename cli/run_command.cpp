// `dpbench run`: wiring of registries, devices, runner and result (see run_command.h).
#include "cli/run_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "cli/console.h"
#include "cli/environment_record.h"
#include "cli/flag_limits.h"
#include "cli/interrupt_signals.h"
#include "cli/log.h"
#include "cli/memory_refusal.h"
#include "cli/process_exit.h"
#include "cli/reference_lookup.h"
#include "cli/trace_output.h"
#include "cli/traced_steps.h"
#include "engine/backends.h"
#include "engine/communication/communicator.h"
#include "engine/communication/process_group.h"
#include "engine/cuda/cuda_controls.h"
#include "engine/errors.h"
#include "engine/machine/environment.h"
#include "engine/machine/gpu_peaks.h"
#include "engine/machine/gpu_telemetry.h"
#include "engine/machine/path_identity.h"
#include "engine/machine/text_content.h"
#include "models/batch_sources.h"
#include "models/model_registry.h"
#include "reports/backward_timeline.h"
#include "reports/memory_summary.h"
#include "reports/result_assembly.h"
#include "reports/result_json.h"
#include "strategies/bucketed_exchange.h"
#include "strategies/exchange_plan.h"
#include "strategies/strategy_registry.h"
#include "dpbench_version.h"

namespace dpbench {
namespace {

// Under mpirun only rank 0 speaks (progress, summary); the others stay quiet.
void print(const std::string& text) {
  if (process_group() == nullptr || process_group()->rank() == 0) log_lines(output_log(), text);
}

// The resolved flags as every rank must agree on them (each rank's GPU index is its own).
std::string flags_every_rank_shares(const RunConfig& config) {
  nlohmann::json json = config_to_json(config);
  json.erase("gpu_indices");
  return json.dump(1);
}

// tf_cnn_benchmarks' static default; the automatic scale starts high and halves to what fits.
constexpr double kDefaultLossScale = 128;
constexpr double kDefaultAutoLossScale = 32768;
// NVML refreshes clocks and power about every 100 ms; sampling faster reads the same values.
constexpr std::chrono::milliseconds kTelemetryPeriod{100};


// The arguments as given and the tag a sweep put in DPBENCH_RUN_TAG (cut to a sane length: it is
// an identifier, never a payload).
nlohmann::json describe_invocation(const std::vector<std::string>& arguments) {
  nlohmann::json invocation = {{"argv", arguments}};
  if (const char* tag = std::getenv("DPBENCH_RUN_TAG"); tag != nullptr && *tag != '\0')
    invocation["run_tag"] = std::string(tag).substr(0, 256);
  return invocation;
}

FeedSettings feed_settings(const RunConfig& config) {
  const DataConfig& data = config.data;
  FeedSettings feed;
  feed.mode = !data.host_feed()                ? FeedMode::on_device
              : data.prefetch_data_to_device ? FeedMode::prefetch
                                             : FeedMode::synchronous;
  feed.depth = data.prefetch_depth;
  // Automatic: the host's cores shared among the devices, at most 4 loaders each (a batch is built
  // by one thread, and `depth` batches at most are in flight).
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  feed.threads = data.datasets_num_private_threads > 0
                     ? data.datasets_num_private_threads
                     : std::max(1, std::min(4, cores / std::max(1, config.num_devices())));
  return feed;
}

const char* feed_name(const FeedSettings& feed) {
  switch (feed.mode) {
    case FeedMode::prefetch: return "host_prefetch";
    case FeedMode::synchronous: return "host_synchronous";
    default: return "on_device";
  }
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
  optimizer.weight_decay = static_cast<float>(config.weight_decay);
  if (config.precision == Precision::fp16) {
    optimizer.loss_scaling =
        config.fp16_enable_auto_loss_scale ? LossScaling::automatic : LossScaling::fixed;
    const double given = config.fp16_loss_scale;
    optimizer.loss_scale = static_cast<float>(
        given > 0 ? given : (config.fp16_enable_auto_loss_scale ? kDefaultAutoLossScale : kDefaultLossScale));
    optimizer.loss_scale_increase_every = config.fp16_inc_loss_scale_every_n;
  }
  return optimizer;
}

void configure_devices(const RunConfig& config, const std::vector<std::unique_ptr<Device>>& devices) {
  for (const auto& device : devices)
    if (device->kind() == BackendKind::cuda) {
      set_cudnn_benchmark(*device, config.cudnn_benchmark);
      set_deterministic(*device, config.deterministic);
      set_lstm_algorithm(*device, config.sequence.lstm_algorithm);
      // 16-bit runs put any GEMM they keep in fp32 on TF32 tensor cores too.
      set_tf32(*device, allows_tf32(config.precision));
    }
  if (config.device_memory > 0)
    for (const auto& device : devices) device->set_memory_limit(config.device_memory);
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
  // The reference backend's stopwatch reads the host clock, which costs nothing: every step.
  if (config.backend != BackendKind::cuda) settings.time_parts_every = 1;
  settings.forward_only = config.forward_only;
  settings.profile_step = config.profile_step;
  settings.process_rank = config.process_rank;
  settings.num_processes = config.num_processes;
  settings.stop_requested = [] { return interrupt_signal() != 0; };
  settings.processes = process_group();
  settings.nvtx = config.nvtx;
  settings.model_for_batch = [config](int batch) {
    RunConfig at_batch = config;
    at_batch.batch_size = batch;
    return find_model(config.model)->create(at_batch);
  };
  // A device stuck in an NCCL wait after another failed would hold the process forever: end it
  // with the failure's message instead (no result is written; nothing was).
  settings.on_stuck_devices = [](const std::string& failure) {
    end_process_with_error(failure + "; ending the process", 1);
  };
  // Only where a step waits on peers: a lone device cannot hang on anyone, and a slow reference
  // run of a large model must not be mistaken for a hung one.
  if (config.num_processes > 1 || (config.backend == BackendKind::cuda && config.num_devices() > 1)) {
    settings.no_progress_timeout =
        std::chrono::milliseconds(static_cast<int64_t>(config.collective_timeout * 1000.0));
    const double timeout = config.collective_timeout;
    settings.on_no_progress = [timeout](const std::string& waiting_for) { end_job_after_stall(waiting_for, timeout); };
  }
  return settings;
}

namespace {

// MFU's denominator: --peak_tflops, else the table's figure for this GPU and the math that runs
// (on CUDA, the precision asked for); none (0) on the reference backend or for a GPU the table
// lacks, with the reason.
PeakThroughput peak_of(const RunConfig& config, const std::vector<DeviceDescription>& devices) {
  if (config.peak_tflops > 0) return {config.peak_tflops, "--peak_tflops"};
  if (config.backend != BackendKind::cuda)
    return {0, "the reference backend's devices are host threads with no peak figure; give --peak_tflops for one"};
  const std::string name = devices.empty() ? std::string() : devices.front().name;
  if (std::optional<PeakThroughput> peak = gpu_peak_tflops(name, config.precision)) return *peak;
  return {0, "no peak figure for " + name + " at " + precision_name(config.precision) +
                 " in dpbench's table; give --peak_tflops"};
}

// What the result is made of (reports/result_assembly.h), in the result's own terms.
// The tensors' element counts in the order of the flat gradient buffer (backward's order), for
// summary.timeline, from which `dpbench predict` rebuilds any bucket plan.
std::vector<int64_t> tensor_sizes_in_buffer_order(const ParameterLayout& layout) {
  std::vector<TensorView> views = layout.tensors();
  std::sort(views.begin(), views.end(), [](const TensorView& a, const TensorView& b) { return a.offset < b.offset; });
  std::vector<int64_t> sizes;
  for (const TensorView& view : views)
    if (view.count > 0) sizes.push_back(static_cast<int64_t>(view.count));
  return sizes;
}

ResultInputs result_inputs(const RunConfig& config, const RunMeasurements& measured, const Model& model,
                           int64_t items_per_step, const std::vector<DeviceDescription>& devices,
                           const nlohmann::json& data_summary) {
  const std::string unit = model.unit();
  ResultInputs run;
  run.tool_version = DPBENCH_VERSION;
  run.git_sha = DPBENCH_GIT_SHA;
  run.environment = describe_environment(config.backend, devices);
  run.config = config_to_json(config);
  run.unit = unit;
  run.items_per_step = items_per_step;
  // A forward-only step runs the forward pass alone.
  const StepFlops per_sample = model.flops_per_sample();
  run.flops_per_device_step = (config.forward_only ? per_sample.forward : per_sample.training()) * config.batch_size;
  run.recompute_flops_per_device_step = config.forward_only ? 0.0 : per_sample.recompute * config.batch_size;
  run.flops_counted = model.flops_counted();
  run.num_devices = config.world_devices();
  run.global_batch_size = config.global_batch_size();
  run.precision = config.precision;
  run.automatic_loss_scale = config.fp16_enable_auto_loss_scale;
  run.timed_epoch_first = config.data.timed_epoch_first;
  run.timed_epoch_last = config.data.timed_epoch_last;
  run.data = data_summary;
  run.measured = measured;
  const PeakThroughput peak = peak_of(config, devices);
  run.peak_tflops_per_device = peak.tflops;
  run.peak_source = peak.source;
  return run;
}

// A loss that ends NaN or infinite means the parameters are no longer numbers: the steps still
// took their time, but what they trained is no model, and a result would let a report or a
// comparison use it. The run fails instead, as TensorFlow's NanTensorHook fails training.
void refuse_diverged_training(const RunConfig& config, const RunMeasurements& measured) {
  const std::vector<double>& losses = measured.step_loss;
  if (losses.empty() || std::isfinite(losses.back())) return;
  size_t first = 0;
  while (first < losses.size() && std::isfinite(losses[first])) ++first;
  const int64_t warmup = measured.warmup_steps;
  const int64_t step = static_cast<int64_t>(first) + 1;
  const std::string where = step <= warmup ? "warm-up step " + std::to_string(step)
                                           : "measured step " + std::to_string(step - warmup);
  char rate[32];
  std::snprintf(rate, sizeof rate, "%g", config.learning_rate);
  throw RuntimeError(std::string("training diverged: the loss became ") + (std::isnan(losses[first]) ? "NaN" : "infinite") +
                     " at " + where + " and stayed so; lower --learning_rate (now " + rate +
                     (config.precision == Precision::fp16 && !config.fp16_enable_auto_loss_scale
                          ? "), or scale fp16's loss automatically (--fp16_enable_auto_loss_scale)"
                          : ")") +
                     "; no result written");
}

// Host-fed or real data; the on-device synthetic default needs no source (nullptr). Epochs fix
// the step counts once the data set's size is known: `settings` and `effective` take them.
std::unique_ptr<BatchSource> attach_data_source(const RunConfig& config, const Model& model, const FeedSettings& feed,
                                                RunnerSettings& settings, RunConfig& effective,
                                                nlohmann::json& data_summary) {
  const DataConfig& data_config = config.data;
  if (!data_config.host_feed() && data_config.data_dir.empty()) {
    data_summary["source"] = config.backend == BackendKind::cuda
                                 ? "synthetic, made once on the device"
                                 : "synthetic, made once in host memory (the reference backend's devices)";
    return nullptr;
  }
  std::unique_ptr<BatchSource> data = create_batch_source(config, model);
  settings.data = data.get();
  settings.feed = feed;
  data_summary["source"] = data->description();
  if (feed.mode == FeedMode::prefetch) {
    data_summary["prefetch_depth"] = feed.depth;
    data_summary["loader_threads_per_device"] = feed.threads;
  }
  const int64_t per_epoch = data->batches_per_epoch();
  if (per_epoch > 0) {
    data_summary["batches_per_epoch"] = per_epoch;
    data_summary["dropped_examples_per_epoch"] = data->dropped_per_epoch();
  }
  if (data_config.num_epochs > 0) {
    const int first = data_config.timed_epoch_first, last = data_config.timed_epoch_last;
    if (static_cast<int64_t>(data_config.num_epochs) * per_epoch > kMaxSteps)
      throw ConfigError("--num_epochs=" + std::to_string(data_config.num_epochs) + ": " +
                        std::to_string(data_config.num_epochs) + " epochs of " + std::to_string(per_epoch) +
                        " steps pass the limit of " + std::to_string(kMaxSteps) + " steps; give fewer epochs");
    settings.steps_per_epoch = per_epoch;
    settings.num_warmup_batches = static_cast<int>(first * per_epoch);
    settings.num_batches = static_cast<int>((last - first + 1) * per_epoch);
    settings.num_trailing_batches = (data_config.num_epochs - 1 - last) * per_epoch;
    effective.num_warmup_batches = settings.num_warmup_batches;
    effective.num_batches = settings.num_batches;
  }
  return data;
}

// The header's "Data:" line: the source, the feed and the epochs.
std::string data_line(const DataConfig& data_config, const FeedSettings& feed, const RunnerSettings& settings,
                      const nlohmann::json& data_summary) {
  std::string line = "Data:         " + data_summary["source"].get<std::string>() + "; feed " + feed_name(feed);
  if (feed.mode == FeedMode::prefetch)
    line += " (" + std::to_string(feed.depth) + " batches ahead, " + std::to_string(feed.threads) +
            " loader threads per device)";
  if (data_config.num_epochs > 0)
    line += "; " + std::to_string(data_config.num_epochs) + " epochs of " + std::to_string(settings.steps_per_epoch) +
            " steps, timed " + std::to_string(data_config.timed_epoch_first) + ".." +
            std::to_string(data_config.timed_epoch_last);
  return line + "\n";
}

// Note [too little memory] (engine/training/runner.h): the same replica recomputing its blocks, sized on the device that
// refused the run, where the model can recompute them and the run does not already; a measurement
// of the activations kept either way, not a ratio. nullopt where there is nothing to size.
std::optional<ReplicaMemoryFit> fit_recomputing_blocks(const RunConfig& config, const ReplicaMemoryFit& fit,
                                                       const RunnerSettings& settings,
                                                       std::vector<std::unique_ptr<Device>>& devices) {
  if (config.recomputes_blocks() || config.forward_only || !fit.fitted) return std::nullopt;
  const ModelEntry* entry = find_model(config.model);
  if (entry == nullptr || !entry->create || !why_blocks_are_not_recomputed(*entry, config.sequence).empty())
    return std::nullopt;
  RunConfig recomputing = config;
  recomputing.activation_checkpointing = "blocks";
  const std::unique_ptr<Model> model = entry->create(recomputing);
  RunnerSettings recomputing_settings = settings;
  recomputing_settings.model_for_batch = [entry, recomputing](int batch) {
    RunConfig at_batch = recomputing;
    at_batch.batch_size = batch;
    return entry->create(at_batch);
  };
  for (size_t r = 0; r < devices.size(); ++r) {
    if (devices[r]->index() != fit.device_index) continue;
    const int world_rank = config.process_rank * static_cast<int>(devices.size()) + static_cast<int>(r);
    return Runner::size_replica_memory(*model, *devices[r], recomputing_settings, world_rank, config.world_devices(),
                                       fit.refused);
  }
  return std::nullopt;
}

// Note [too little memory]: the fit's largest batch under `memory`, checked by sizing the replica
// there and one past it on the device that refused the run, moving by the fit's bytes per sample
// until the one fits and the next does not (a few sizings at most). The fit is linear from
// batches of 1 and 2; buffers rounded up to tiles, and workspaces that follow the algorithms
// chosen at each batch, are not.
int64_t checked_largest_batch(const RunConfig& config, const Model& model, const ReplicaMemoryFit& fit,
                              const StrategyMemory& memory, const RunnerSettings& settings,
                              std::vector<std::unique_ptr<Device>>& devices) {
  int64_t largest = std::min<int64_t>(largest_fitting_batch(fit, memory), fit.batch_size - 1);
  Device* device = nullptr;
  int world_rank = 0;
  for (size_t r = 0; r < devices.size(); ++r)
    if (devices[r]->index() == fit.device_index) {
      device = devices[r].get();
      world_rank = config.process_rank * static_cast<int>(devices.size()) + static_cast<int>(r);
    }
  if (!fit.fitted || largest < 1 || device == nullptr) return largest;
  const uint64_t available = fit.limit_bytes > fit.held_bytes ? fit.limit_bytes - fit.held_bytes : 0;
  const uint64_t one = total_bytes(refused_device_bytes(fit, memory, 1));
  const uint64_t per_sample = std::max<uint64_t>(1, total_bytes(refused_device_bytes(fit, memory, 2)) - one);
  // The device's bytes at `batch`; nullopt where the device itself has too little for it.
  auto need_at = [&](int64_t batch) -> std::optional<uint64_t> {
    const std::optional<CategoryBytes> replica = Runner::size_replica_at(
        model, *device, settings, world_rank, config.world_devices(), static_cast<int>(batch));
    if (!replica) return std::nullopt;
    return total_bytes(device_bytes_under(memory, *replica));
  };
  int64_t verified = 0;
  constexpr int kMostSizings = 8;
  for (int sizing = 0; sizing < kMostSizings && largest >= 1; ++sizing) {
    const std::optional<uint64_t> need = need_at(largest);
    if (!need || *need > available) {
      const uint64_t over = need ? *need - available : per_sample;
      largest -= std::max<int64_t>(1, static_cast<int64_t>((over + per_sample - 1) / per_sample));
      continue;
    }
    verified = largest;
    if (largest + 1 >= fit.batch_size) return largest;
    const std::optional<uint64_t> next = need_at(largest + 1);
    if (!next || *next > available) return largest;
    largest += std::max<int64_t>(1, static_cast<int64_t>((available - *next) / per_sample));
    largest = std::min<int64_t>(largest, fit.batch_size - 1);
  }
  return verified > 0 ? verified : std::max<int64_t>(largest, 0);
}

// Note [too little memory]: the runner's fit of one replica, with each strategy's share from its
// rule in the strategies' table, its largest batch checked on the device, as one line.
std::string describe_too_little_memory(const RunConfig& config, const Model& model, const ReplicaMemoryFit& fit,
                                       std::optional<ReplicaMemoryFit> recomputing_blocks,
                                       const RunnerSettings& settings, std::vector<std::unique_ptr<Device>>& devices) {
  const ParameterLayout& layout = model.layout();
  const std::vector<GradientRange> plan = plan_exchanges(layout, exchange_plan_options(config));
  const ScheduleShape shape{config.world_devices(), config.num_devices(), config.num_processes};
  const StrategyEntry* run_entry = resolve_strategy_name(config.variable_update);
  MemoryRefusal refusal;
  refusal.fit = fit;
  refusal.recomputing_blocks = std::move(recomputing_blocks);
  // A 16-bit weight copy is what fully_sharded gathers (Note [what travels]).
  const int gathered_element_bytes = config.precision == Precision::fp16 || config.precision == Precision::bf16 ? 2 : 4;
  StrategyOptions run_options = config;
  run_options.gathered_element_bytes = gathered_element_bytes;
  if (run_entry != nullptr && run_entry->memory)
    refusal.strategy = run_entry->memory(run_options, layout, plan, shape, model.parameter_units());
  if (fit.fitted) refusal.largest_batch = checked_largest_batch(config, model, fit, refusal.strategy, settings, devices);
  refusal.limit_source = config.device_memory > 0 ? "--device_memory" : "what the GPU had free when the run started";
  const ProcessLayout processes =
      config.num_processes > 1 ? ProcessLayout::one_process_per_gpu : ProcessLayout::one_process;
  for (const PredictedVariant& variant : predicted_variants()) {
    const StrategyEntry* entry = find_strategy(variant.strategy);
    if (entry == nullptr || !entry->memory || run_entry == nullptr || !entry->runs_in(processes)) continue;
    StrategyOptions options = options_of(variant);
    options.bucket_cap_mb = config.bucket_cap_mb;
    options.tail_bucket_mb = config.tail_bucket_mb;
    options.gathered_element_bytes = gathered_element_bytes;
    refusal.alternatives.push_back({strategy_label(entry->name, recorded_options(entry->name, options), false),
                                    entry->memory(options, layout, plan, shape, model.parameter_units())});
  }
  // No replica fits the device whole: fully_sharded's rule over more devices, its shard group
  // all of them (the rule takes the device count from the shape). A fully_sharded run already
  // keeps 1/world of each, so only more devices than it has are offered.
  const StrategyEntry* sharded = find_strategy("fully_sharded");
  if (!fit.fitted && sharded != nullptr && sharded->memory && sharded->runs_in(processes)) {
    StrategyOptions options;
    options.gathered_element_bytes = gathered_element_bytes;
    const bool run_is_sharded = run_entry != nullptr && run_entry->name == sharded->name;
    constexpr int kMostSuggestedDevices = 64;
    for (int devices = 2; devices <= kMostSuggestedDevices; devices *= 2) {
      if (run_is_sharded && devices <= config.world_devices()) continue;
      const ScheduleShape over = config.num_processes > 1 ? ScheduleShape{devices, 1, devices}
                                                          : ScheduleShape{devices, devices, 1};
      refusal.fully_sharded_over.push_back(
          {devices, sharded->memory(options, layout, plan, over, model.parameter_units())});
    }
  }
  return too_little_memory_line(refusal);
}

}  // namespace

Result run_benchmark(const ParsedRunFlags& flags) {
  const RunConfig& config = flags.config;
  const ProcessGroup* group = process_group();
  if (group != nullptr) group->require_same_on_every_rank("the resolved flags", flags_every_rank_shares(config));
  // One result for the job, from rank 0; "{rank}" in the name asks every rank for its own copy.
  std::string path = config.result_file;
  const size_t placeholder = path.find("{rank}");
  const bool per_rank = placeholder != std::string::npos;
  if (per_rank) path.replace(placeholder, 6, std::to_string(config.process_rank));
  // A result or trace on standard output stays one document there: the console takes stderr.
  const PathIdentity standard_output = identify_path("-");
  send_output_log_to_standard_error(same_destination(identify_path(path), standard_output) ||
                                    same_destination(identify_path(config.trace_file), standard_output));
  // The data readers' warnings (a corpus that looks like binary data) go to the log, once per job.
  set_data_warning_handler([](const std::string& warning) {
    if (process_group() == nullptr || process_group()->rank() == 0) error_log().warn(warning);
  });
  if (flags.fell_back_to_reference)
    print("note: no CUDA GPU found; running on the reference backend (host C++; pass --device=cpu to silence this)\n");
  for (const std::string& note : flags.notes) print("note: " + note + "\n");

  const ModelEntry* model_entry = find_model(config.model);
  const StrategyEntry* strategy_entry = find_strategy(config.variable_update);
  if (!model_entry || !model_entry->create) throw ConfigError("--model=" + config.model + ": not available");
  if (!strategy_entry || !strategy_entry->create)
    throw ConfigError("--variable_update=" + config.variable_update + ": not available");

  // Before any communicator, and before the run's own threads read the environment.
  if (config.backend == BackendKind::cuda && config.cuda_graph) prepare_collectives_for_replayed_steps();
  std::unique_ptr<Model> model = model_entry->create(config);
  std::unique_ptr<Strategy> strategy = strategy_entry->create(config, config);
  std::vector<std::unique_ptr<Device>> devices = create_devices(config.backend, config.gpu_indices);
  configure_devices(config, devices);
  std::vector<DeviceDescription> descriptions;
  for (const auto& device : devices) descriptions.push_back(device->description());

  const int64_t items_per_step = static_cast<int64_t>(config.global_batch_size()) * model->items_per_sample();

  RunConfig effective = config;
  RunnerSettings settings = runner_settings(config);
  const FeedSettings feed = feed_settings(config);
  nlohmann::json data_summary = {{"feed", feed_name(feed)}};
  const std::unique_ptr<BatchSource> data = attach_data_source(config, *model, feed, settings, effective, data_summary);
  print(format_run_header(effective, model->unit(), static_cast<int64_t>(model->layout().parameter_count()), descriptions));
  print(data_line(config.data, feed, settings, data_summary));
  if (!config.trace_file.empty()) {
    const TracedStepWindow window =
        resolve_traced_steps(config.trace_steps, settings.num_warmup_batches, settings.num_batches);
    settings.first_traced_step = window.first;
    settings.last_traced_step = window.last;
  }

  std::unique_ptr<Runner> runner;
  try {
    runner = std::make_unique<Runner>(*model, *strategy, devices, settings);
  } catch (const TooLittleDeviceMemory& refused) {
    throw ConfigError(describe_too_little_memory(config, *model, refused.fit(),
                                                 fit_recomputing_blocks(config, refused.fit(), settings, devices),
                                                 settings, devices));
  }

  // Sampled from here on; the summary keeps the measured steps' window only.
  std::vector<std::string> bus_ids;
  for (const DeviceDescription& description : descriptions) bus_ids.push_back(description.pci_bus_id);
  GpuTelemetry telemetry(bus_ids, kTelemetryPeriod);
  const std::string unit = model->unit();
  RunMeasurements measured = runner->run(
      [&](const ProgressSnapshot& snapshot) { print(format_progress_line(snapshot, items_per_step, unit) + "\n"); },
      [&](const std::string& phase) { print(phase + "\n"); });
  if (measured.stopped_early && measured.step_time_ms.size() <= static_cast<size_t>(measured.warmup_steps)) {
    const int signal_number = interrupt_signal();
    throw RunStoppedBeforeMeasuring(signal_number, "stopped by " + interrupt_signal_name(signal_number) +
                                                       " before any step was measured; no result written");
  }

  refuse_diverged_training(config, measured);

  Result result = assemble_result(result_inputs(effective, measured, *model, items_per_step, descriptions, data_summary));
  if (!measured.timelines.empty()) {
    if (const auto timeline = summarize_backward_timeline(measured.timelines.front(), tensor_sizes_in_buffer_order(model->layout()),
                                                          with_vector_elements(model->parameter_units(), model->layout())))
      result.summary.timeline = backward_timeline_to_json(*timeline);
  }
  result.invocation = describe_invocation(flags.arguments);
  // The kernels the first GPU's plans chose (every GPU of a run prepares the same shapes).
  if (!devices.empty() && devices.front()->kind() == BackendKind::cuda)
    result.summary.math_paths = math_paths(*devices.front());
  // This process's GPUs only: under mpirun each rank samples its own.
  result.summary.gpu_telemetry = telemetry.summarize(
      measured.measured_from, measured.measured_until, result.summary.measured_steps,
      result.summary.items_per_sec * result.summary.total_time_s);
  if (group != nullptr) result.summary.gpu_telemetry["scope"] = "the GPU of rank " + std::to_string(group->rank());
  add_nvml_memory_figures(result.summary.gpu_telemetry, static_cast<size_t>(config.process_rank) * devices.size(),
                          result.summary.memory);
  if (group != nullptr) describe_every_process(*group, result.environment);
  // Against the reference result of its workload, where dpbench has one (README, "Is my number normal?").
  if (std::optional<nlohmann::json> reference = reference_for_run(result)) result.summary.reference = std::move(*reference);
  print(format_summary(result));
  const bool writes_result = !path.empty() && (per_rank || config.process_rank == 0);
  if (writes_result) {
    write_result_atomically(result, path);
    print("Result written to " + path + "\n");
  }
  if (!config.trace_file.empty())
    print(write_run_trace(config, measured.timelines, static_cast<int>(devices.size()), measured.warmup_steps));
  // A closed stdout or a reader that stopped reading cost console lines, never the result.
  if (const std::string lost = finish_output_log(); !lost.empty())
    error_log().warn(lost + "; the run went on to its end" +
                     (writes_result ? ", and its result is in " + path : std::string()));
  return result;
}

}  // namespace dpbench
