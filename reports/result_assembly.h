// Assembling a run's Result (reports/result.h) from what it measured: the step records, the
// summary's statistics over the measured steps only (warm-up and untimed trailing steps
// excluded), throughput as a ratio of totals, and the data feed's waits and epochs. Its input is
// stated here in the result's own terms, so reports/ needs nothing of the engine; `dpbench run`
// fills it from the runner's measurements, the resolved flags and the environment.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/result.h"

namespace dpbench {

// One device's mean time per measured step in the parts of its step (the runner's clocks).
struct DevicePhases {
  double data_ms = 0, forward_ms = 0, backward_ms = 0;
  double own_step_ms = 0;      // its step, start to stop
  double exposed_comm_ms = 0;  // its compute stream waiting for communication
};

struct ResultInputs {
  // Who measured, where, with which flags.
  std::string tool_version, git_sha;
  EnvironmentRecord environment;  // its backend says whether tf32 ran as tf32
  nlohmann::json config = nlohmann::json::object();  // every resolved flag, under its flag name

  // What the run was.
  std::string unit;            // what one item is: "images" (the summary says "images/s")
  int64_t items_per_step = 0;  // global; the count of a fixed-size batch (no feed)
  int64_t num_devices = 0;     // all processes' devices
  int64_t global_batch_size = 0;
  std::string precision = "fp32";       // --precision
  bool automatic_loss_scale = false;    // fp16: the loss scale adapts (else it is fixed)
  int timed_epoch_first = 0, timed_epoch_last = 0;  // with epochs: the timed ones, inclusive
  nlohmann::json data = nlohmann::json::object();   // the source and feed of the batches

  // What the runner measured (all processes combined).
  std::vector<double> step_time_ms;  // all steps, warm-up first
  std::vector<double> step_loss;     // all steps
  int64_t warmup_steps = 0;
  int64_t trailing_steps = 0;        // untimed, after the measured ones
  bool interrupted = false;          // stopped before its last step (Ctrl-C, SIGTERM)
  double total_time_s = 0;           // the measured steps' wall clock
  double param_norm = 0;
  int64_t num_parameters = 0;
  nlohmann::json comm = nlohmann::json::object();
  bool cuda_graph = false;
  std::optional<int64_t> kernel_launches_per_step;  // none where no step was captured
  double final_loss_scale = 1;
  // With a host feed, per step (all steps): the wait for its batch and its global batch's items;
  // both empty without one.
  std::vector<double> data_wait_ms;
  std::vector<int64_t> step_items;
  double host_wait_s = 0;
  std::vector<double> epoch_time_s;  // each epoch's wall time; empty without epochs

  // The model's FLOPs in one device's step (training, or forward only), and the peak of one
  // device that MFU divides by: 0 where none is known, peak_source then saying why.
  std::vector<DevicePhases> device_phases;  // every device of the run, for summary.breakdown
  double flops_per_device_step = 0;
  double peak_tflops_per_device = 0;
  std::string peak_source;
};

Result assemble_result(const ResultInputs& run);

}  // namespace dpbench
