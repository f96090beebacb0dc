// A run's Result from its measurements (see result_assembly.h).
#include "reports/result_assembly.h"

#include <algorithm>

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
  const bool fed = !run.step_items.empty();
  const int64_t total_steps = static_cast<int64_t>(run.step_time_ms.size());
  const int64_t measured_end = total_steps - run.trailing_steps;
  MeasuredWindow window;
  for (int64_t step = 0; step < total_steps; ++step) {
    const size_t s = static_cast<size_t>(step);
    StepRecord record;
    record.step = step;
    record.time_ms = run.step_time_ms[s];
    record.loss = run.step_loss[s];
    record.warmup = step < run.warmup_steps;
    record.after_measurement = step >= measured_end;
    const int64_t items = fed ? run.step_items[s] : run.items_per_step;
    if (fed) {
      record.data_wait_ms = run.data_wait_ms[s];
      record.items = items;
    }
    steps.push_back(record);
    if (!record.warmup && !record.after_measurement) {
      window.step_ms.push_back(run.step_time_ms[s]);
      window.rates.push_back(items / (run.step_time_ms[s] / 1000.0));
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
    waited_ms += run.data_wait_ms[i];
    step_ms += run.step_time_ms[i];
  }
  const double divisor = std::max<double>(1.0, static_cast<double>(measured_steps));
  data["wait_ms_per_step"] = waited_ms / divisor;
  data["wait_share_of_step_time"] = step_ms > 0 ? waited_ms / step_ms : 0.0;
  data["host_wait_s"] = run.host_wait_s;
}

void describe_epochs(const ResultInputs& run, nlohmann::json& data) {
  nlohmann::json epochs = nlohmann::json::array();
  double timed_s = 0;
  for (size_t e = 0; e < run.epoch_time_s.size(); ++e) {
    const bool timed = static_cast<int>(e) >= run.timed_epoch_first && static_cast<int>(e) <= run.timed_epoch_last;
    epochs.push_back({{"epoch", e}, {"time_s", run.epoch_time_s[e]}, {"timed", timed}});
    if (timed) timed_s += run.epoch_time_s[e];
  }
  data["epochs"] = epochs;
  data["timed_epochs_time_s"] = timed_s;
}

// The arithmetic the run used. The reference backend has no TF32: there a tf32 run computes in
// plain fp32, and says so. It does store fp16 and bf16 values exactly as the GPU would, so those
// runs keep their name.
std::string math_of(const ResultInputs& run) {
  if (run.precision != "tf32") return run.precision;
  return run.environment.backend == "cuda" ? "tf32" : "fp32";
}

// FLOPs per step, the achieved TFLOP/s per device (the steps' FLOPs over the measured wall time:
// items / items per fixed-size step counts a smaller last batch of real data for what it is) and
// MFU against the device's peak.
nlohmann::json describe_flops(const ResultInputs& run, const Summary& summary) {
  nlohmann::json flops = {
      {"counted", "multiply-adds of convolutions and matrix products (LSTM gates included), 2 FLOPs each; "
                  "the passes as they run"},
      {"model_flops_per_step", run.flops_per_device_step * static_cast<double>(run.num_devices)},
      {"model_flops_per_step_per_device", run.flops_per_device_step}};
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
  const bool fed = !run.step_items.empty();
  const int64_t measured_steps = static_cast<int64_t>(window.step_ms.size());
  // A feed's batches vary: the summary states the measured steps' mean, rounded.
  const int64_t items_per_step = fed && measured_steps > 0 ? (window.items + measured_steps / 2) / measured_steps
                                                           : run.items_per_step;
  const int64_t measured_items = fed ? window.items : run.items_per_step * measured_steps;

  Summary& summary = result.summary;
  summary.unit = run.unit + "/s";
  summary.measured_steps = measured_steps;
  summary.warmup_steps = run.warmup_steps;
  summary.interrupted = run.interrupted;
  summary.num_devices = run.num_devices;
  summary.global_batch_size = run.global_batch_size;
  summary.items_per_step = items_per_step;
  summary.total_time_s = run.total_time_s;
  // Ratio of totals, as tf_cnn_benchmarks' "total images/sec", not a mean of per-step rates.
  summary.items_per_sec = run.total_time_s > 0 ? static_cast<double>(measured_items) / run.total_time_s : 0.0;
  if (measured_steps >= 2) {
    summary.step_time_ms = summarize(window.step_ms);
    summary.items_per_sec_per_step = summarize(window.rates);
    summary.jitter = jitter(window.rates);
  }
  summary.final_loss = run.step_loss.empty() ? 0.0 : run.step_loss.back();
  summary.num_parameters = run.num_parameters;
  summary.param_norm = run.param_norm;
  summary.comm = run.comm;
  summary.cuda_graph = run.cuda_graph;
  summary.kernel_launches_per_step = run.kernel_launches_per_step;
  summary.math = math_of(run);
  if (run.precision == "fp16") {
    summary.loss_scaling = run.automatic_loss_scale ? "automatic" : "fixed";
    summary.final_loss_scale = run.final_loss_scale;
  }
  summary.data = run.data;
  if (fed) describe_data_waits(run, result.steps, measured_steps, summary.data);
  if (!run.epoch_time_s.empty()) describe_epochs(run, summary.data);
  summary.flops = describe_flops(run, summary);
  return result;
}

}  // namespace dpbench
