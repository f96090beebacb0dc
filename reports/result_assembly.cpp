// A run's Result from its measurements (see result_assembly.h).
#include "reports/result_assembly.h"

#include <algorithm>
#include <array>
#include <string>

#include "reports/memory_summary.h"
#include "reports/statistics.h"

namespace dpbench {
namespace {

// The measured steps' times, per-step rates and items.
struct MeasuredWindow {
  std::vector<double> step_ms, rates;
  int64_t items = 0;
};

// Every step's record, and the measured window they leave once warm-up and trailing steps are out.
MeasuredWindow record_steps(const ResultInputs& run, std::vector<StepRecord>& steps) {
  // Real data: every global batch counts its own items (words vary from batch to batch).
  const bool fed = !run.measured.step_items.empty();
  const int64_t total_steps = static_cast<int64_t>(run.measured.step_time_ms.size());
  const int64_t measured_end = total_steps - run.measured.trailing_steps;
  MeasuredWindow window;
  for (int64_t step = 0; step < total_steps; ++step) {
    const size_t s = static_cast<size_t>(step);
    StepRecord record;
    record.step = step;
    record.time_ms = run.measured.step_time_ms[s];
    record.loss = run.measured.step_loss[s];
    record.warmup = step < run.measured.warmup_steps;
    record.after_measurement = step >= measured_end;
    const int64_t items = fed ? run.measured.step_items[s] : run.items_per_step;
    if (fed) {
      record.data_wait_ms = run.measured.data_wait_ms[s];
      record.items = items;
    }
    steps.push_back(record);
    if (!record.warmup && !record.after_measurement) {
      window.step_ms.push_back(run.measured.step_time_ms[s]);
      window.rates.push_back(items / (run.measured.step_time_ms[s] / 1000.0));
      window.items += items;
    }
  }
  return window;
}

// The feed's cost over the measured steps: its mean wait per step and its share of step time.
void describe_data_waits(const ResultInputs& run, const std::vector<StepRecord>& steps, int64_t measured_steps,
                         nlohmann::json& data) {
  double waited_ms = 0, step_ms = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].warmup || steps[i].after_measurement) continue;
    waited_ms += run.measured.data_wait_ms[i];
    step_ms += run.measured.step_time_ms[i];
  }
  const double divisor = std::max<double>(1.0, static_cast<double>(measured_steps));
  data["wait_ms_per_step"] = waited_ms / divisor;
  data["wait_share_of_step_time"] = step_ms > 0 ? waited_ms / step_ms : 0.0;
  data["host_wait_s"] = run.measured.host_wait_s;
}

void describe_epochs(const ResultInputs& run, nlohmann::json& data) {
  nlohmann::json epochs = nlohmann::json::array();
  double timed_s = 0;
  for (size_t e = 0; e < run.measured.epoch_time_s.size(); ++e) {
    const bool timed = static_cast<int>(e) >= run.timed_epoch_first && static_cast<int>(e) <= run.timed_epoch_last;
    epochs.push_back({{"epoch", e}, {"time_s", run.measured.epoch_time_s[e]}, {"timed", timed}});
    if (timed) timed_s += run.measured.epoch_time_s[e];
  }
  data["epochs"] = epochs;
  data["timed_epochs_time_s"] = timed_s;
}

// The arithmetic the run used. The reference backend has no TF32: there a tf32 run computes in
// plain fp32, and says so. It does store fp16 and bf16 values exactly as the GPU would, so those
// runs keep their name.
std::string math_of(const ResultInputs& run) {
  if (run.precision != Precision::tf32) return precision_name(run.precision);
  return run.environment.backend == "cuda" ? "tf32" : "fp32";
}

// Note [step time breakdown]
// A device's wall time per measured step, split into parts that add up to it:
//   data_wait + forward + backward + exposed_comm + update + straggler_wait + host_gap.
// data_wait, forward and backward come from the device's own clocks (laps of its compute stream,
// on one measured step in ten on a GPU: Note [timed parts of a step] in engine/training/runner.cpp);
// exposed_comm is its compute stream waiting for the exchange after backward; update is the rest
// of its own step (the optimizer, parameter-server transfers and host reductions, the loss's
// bookkeeping). The wall time per step left over is the device's idle time between its steps:
// straggler_wait is the part of it the slowest device explains (how much longer the step, the
// slowest device's, took than this device's own), host_gap the rest (the host launching, barriers,
// drains). Waiting for a slower peer inside a collective is exposed communication. With every
// kernel launched from the host, launch gaps inside a step fall into the part they interrupt.
nlohmann::json describe_breakdown(const ResultInputs& run, const Summary& summary) {
  // The step is the slowest device's (the phases are means over the same timed steps).
  double step_mean = 0;
  for (const StepPhases& p : run.measured.step_phases) step_mean = std::max(step_mean, p.own_step_ms);
  const double wall_ms = summary.total_time_s * 1000.0 / static_cast<double>(summary.measured_steps);
  // Each part's name: per step in ms under "<name>_ms", over the measured window in s under "<name>_s".
  constexpr std::array names = {"data_wait", "forward", "backward", "exposed_comm", "update", "straggler_wait",
                                "host_gap"};
  constexpr size_t kPartCount = names.size();
  nlohmann::json per_device = nlohmann::json::array();
  std::array<double, kPartCount> mean{};
  for (size_t d = 0; d < run.measured.step_phases.size(); ++d) {
    const StepPhases& p = run.measured.step_phases[d];
    const double update = std::max(0.0, p.own_step_ms - p.data_ms - p.forward_ms - p.backward_ms - p.exposed_comm_ms);
    const double between_steps = std::max(0.0, wall_ms - p.own_step_ms);
    const double straggler = std::min(between_steps, std::max(0.0, step_mean - p.own_step_ms));
    const std::array<double, kPartCount> parts = {p.data_ms,  p.forward_ms, p.backward_ms,           p.exposed_comm_ms,
                                                  update,     straggler,    between_steps - straggler};
    nlohmann::json device = {{"device", d}};
    for (size_t k = 0; k < kPartCount; ++k) {
      device[std::string(names[k]) + "_ms"] = parts[k];
      mean[k] += parts[k] / static_cast<double>(run.measured.step_phases.size());
    }
    per_device.push_back(device);
  }
  nlohmann::json per_step = nlohmann::json::object(), window = nlohmann::json::object();
  double sum = 0;
  for (size_t k = 0; k < kPartCount; ++k) {
    per_step[std::string(names[k]) + "_ms"] = mean[k];
    window[std::string(names[k]) + "_s"] = mean[k] * static_cast<double>(summary.measured_steps) / 1000.0;
    sum += mean[k];
  }
  std::string parts;  // the sum the parts make, named in their order
  for (const char* name : names) parts += (parts.empty() ? "" : " + ") + std::string(name);
  nlohmann::json breakdown = {{"parts", parts + " = wall time per step"},
                              {"wall_ms_per_step", wall_ms},
                              {"step_ms", step_mean},
                              {"parts_sum_ms", sum},
                              {"ms_per_step", per_step},
                              {"window_s", window},
                              {"per_device", per_device}};
  // Recomputed blocks: the part of backward that ran their forward again, no part of its own.
  double recompute = 0;
  for (size_t d = 0; d < run.measured.step_phases.size(); ++d) {
    const double ms = run.measured.step_phases[d].recompute_ms;
    if (ms > 0) breakdown["per_device"][d]["recompute_in_backward_ms"] = ms;
    recompute += ms / static_cast<double>(run.measured.step_phases.size());
  }
  if (recompute > 0) breakdown["recompute_in_backward_ms"] = recompute;
  return breakdown;
}

// FLOPs per step, the achieved TFLOP/s per device (the steps' FLOPs over the measured wall time:
// items / items per fixed-size step counts a smaller last batch of real data for what it is) and
// MFU against the device's peak.
nlohmann::json describe_flops(const ResultInputs& run, const Summary& summary) {
  nlohmann::json flops = {
      {"counted", run.flops_counted},
      {"model_flops_per_step", run.flops_per_device_step * static_cast<double>(run.num_devices)},
      {"model_flops_per_step_per_device", run.flops_per_device_step}};
  // Recomputed blocks: their forward's second run is part of the step's work (and of MFU), and
  // stated apart so the model's own work can be told from it.
  if (run.recompute_flops_per_device_step > 0)
    flops["recompute_flops_per_step_per_device"] = run.recompute_flops_per_device_step;
  const double steps_per_sec =
      run.items_per_step > 0 ? summary.items_per_sec / static_cast<double>(run.items_per_step) : 0.0;
  const double achieved = run.flops_per_device_step * steps_per_sec / 1e12;
  flops["tflops_per_sec_per_device"] = achieved;
  if (run.peak_tflops_per_device > 0) {
    flops["peak_tflops_per_device"] = run.peak_tflops_per_device;
    flops["peak_source"] = run.peak_source;
    flops["mfu"] = achieved / run.peak_tflops_per_device;
  } else {
    flops["peak_tflops_per_device"] = nullptr;
    flops["mfu"] = nullptr;
    flops["mfu_reason"] = run.peak_source;
  }
  return flops;
}

}  // namespace

Result assemble_result(const ResultInputs& run) {
  Result result;
  result.tool_version = run.tool_version;
  result.git_sha = run.git_sha;
  result.environment = run.environment;
  result.config = run.config;

  const MeasuredWindow window = record_steps(run, result.steps);
  const bool fed = !run.measured.step_items.empty();
  const int64_t measured_steps = static_cast<int64_t>(window.step_ms.size());
  // A feed's batches vary: the summary states the measured steps' mean, rounded.
  const int64_t items_per_step = fed && measured_steps > 0 ? (window.items + measured_steps / 2) / measured_steps
                                                           : run.items_per_step;
  const int64_t measured_items = fed ? window.items : run.items_per_step * measured_steps;

  Summary& summary = result.summary;
  summary.unit = run.unit + "/s";
  summary.measured_steps = measured_steps;
  summary.warmup_steps = run.measured.warmup_steps;
  summary.interrupted = run.measured.stopped_early;
  summary.num_devices = run.num_devices;
  summary.global_batch_size = run.global_batch_size;
  summary.items_per_step = items_per_step;
  summary.total_time_s = run.measured.total_time_s;
  // Ratio of totals, as tf_cnn_benchmarks' "total images/sec", not a mean of per-step rates.
  summary.items_per_sec = run.measured.total_time_s > 0 ? static_cast<double>(measured_items) / run.measured.total_time_s : 0.0;
  if (measured_steps >= 2) {
    summary.step_time_ms = summarize(window.step_ms);
    summary.items_per_sec_per_step = summarize(window.rates);
    summary.jitter = jitter(window.rates);
  }
  summary.final_loss = run.measured.step_loss.empty() ? 0.0 : run.measured.step_loss.back();
  summary.num_parameters = run.measured.num_parameters;
  summary.param_norm = run.measured.param_norm;
  summary.comm = run.measured.comm;
  summary.cuda_graph = run.measured.cuda_graph;
  if (run.measured.kernels_per_step >= 0) summary.kernel_launches_per_step = run.measured.kernels_per_step;
  summary.math = math_of(run);
  if (run.precision == Precision::fp16) {
    summary.loss_scaling = run.automatic_loss_scale ? "automatic" : "fixed";
    summary.final_loss_scale = run.measured.final_loss_scale;
  }
  summary.data = run.data;
  if (fed) describe_data_waits(run, result.steps, measured_steps, summary.data);
  if (!run.measured.epoch_time_s.empty()) describe_epochs(run, summary.data);
  summary.flops = describe_flops(run, summary);
  summary.memory = memory_summary_to_json(run.measured.memory);
  if (!run.measured.step_phases.empty() && measured_steps > 0)
    summary.breakdown = describe_breakdown(run, summary);
  return result;
}

}  // namespace dpbench
