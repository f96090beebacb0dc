// Assembling a run's Result (reports/result.h) from what it measured: the step records, the
// summary's statistics over the measured steps only (warm-up and untimed trailing steps
// excluded), throughput as a ratio of totals, and the data feed's waits and epochs. Its input is
// the runner's one measurement record (engine/training/run_measurements.h, a plain record of numbers) and
// what the run was, which `dpbench run` fills from the resolved flags and the environment.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/precision.h"
#include "engine/training/run_measurements.h"
#include "reports/result.h"

namespace dpbench {

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
  Precision precision = Precision::fp32;  // --precision
  bool automatic_loss_scale = false;    // fp16: the loss scale adapts (else it is fixed)
  int timed_epoch_first = 0, timed_epoch_last = 0;  // with epochs: the timed ones, inclusive
  nlohmann::json data = nlohmann::json::object();   // the source and feed of the batches

  // What the runner measured, combined across the job's processes (engine/training/run_measurements.h).
  RunMeasurements measured;

  // The model's FLOPs in one device's step (training, or forward only), and the peak of one
  // device that MFU divides by: 0 where none is known, peak_source then saying why.
  double flops_per_device_step = 0;
  // Of them, the forward work backward runs again (--activation_checkpointing=blocks); 0: none.
  double recompute_flops_per_device_step = 0;
  std::string flops_counted;  // what the count holds, in words (Model::flops_counted)
  double peak_tflops_per_device = 0;
  std::string peak_source;
};

Result assemble_result(const ResultInputs& run);

}  // namespace dpbench
