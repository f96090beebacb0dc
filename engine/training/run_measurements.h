// What a run measured, as one record: every step's time and loss, the wall clock, the parts of
// each device's step, the feed's waits, the strategy's traffic, the traced steps. The runner fills
// it for its devices and, for a job of several processes, combines it across them before handing
// it back, so whatever reads it (the result, the console) sees the job's figures only.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/step_trace.h"
#include "engine/communication/process_group.h"
#include "engine/machine/memory_ledger.h"

namespace dpbench {

// One device's mean time per measured step in the parts of its step, from clocks its compute
// stream reads itself (Backend::lap), so a step replayed as a CUDA graph times itself.
struct StepPhases {
  double data_ms = 0;      // waiting for its batch (host-fed data; 0 with data kept on the device)
  double forward_ms = 0;   // the forward pass and the loss
  double backward_ms = 0;  // the backward pass, with the exchanges it starts (0 for --forward_only)
  double own_step_ms = 0;  // its whole step, start to stop (the step's time is the slowest device's)
  double exposed_comm_ms = 0;  // after backward: waiting for the exchange (0 where none)
  double recompute_ms = 0;     // of backward_ms: its blocks' forward run again (--activation_checkpointing)

  // The parts in the order above, and back: how they travel between processes.
  static constexpr size_t kParts = 6;
  std::array<double, kParts> parts() const {
    return {data_ms, forward_ms, backward_ms, own_step_ms, exposed_comm_ms, recompute_ms};
  }
  static StepPhases from_parts(const double* parts) {
    return {parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]};
  }
};

// One device's memory at the end of the run (engine/machine/memory_ledger.h): its ledger's figures,
// whose window is the measured steps (with any untimed ones after them), and what the device
// itself reported at that moment and when it was made; -1 where it reports nothing. Plain
// numbers, so the records travel between processes as bytes.
struct DeviceMemoryRecord {
  int device_index = 0;
  MemoryFigures figures;
  int64_t reported_used_bytes = -1;
  int64_t reported_used_at_creation_bytes = -1;
};

struct RunMeasurements {
  std::vector<double> step_time_ms;  // all steps, warm-up first (max over devices)
  std::vector<double> step_loss;     // all steps (mean over replicas)
  int64_t warmup_steps = 0;
  double total_time_s = 0;           // measured steps, host wall clock
  // The measured steps' window on the host's steady clock (GPU telemetry is read over it).
  std::chrono::steady_clock::time_point measured_from, measured_until;
  double param_norm = 0;             // replica 0, L2 in double
  int64_t num_parameters = 0;
  nlohmann::json comm = nlohmann::json::object();
  bool cuda_graph = false;  // whether the measured steps were replayed CUDA graphs
  // Kernels one training step launches on replica 0 (forward, backward, exchange, update),
  // counted in the step's CUDA graph; -1 where no step was captured (reference backend).
  int64_t kernels_per_step = -1;
  double final_loss_scale = 1;  // replica 0's loss scale after the last step (1: no scaling)
  int64_t trailing_steps = 0;   // after the measured ones, untimed
  // With a feed: per step (all steps), the time the compute stream waited for its batch (max over
  // devices) and the items of the global batch; both empty without one.
  std::vector<double> data_wait_ms;
  std::vector<int64_t> step_items;
  double host_wait_s = 0;            // the most any device's thread waited for or built batches
  std::vector<double> epoch_time_s;  // wall time of each epoch (steps_per_epoch > 0)
  std::vector<StepPhases> step_phases;  // per device, over the measured steps; empty when none was
  std::vector<DeviceTimeline> timelines;  // per device, its traced steps; empty without tracing
  std::vector<DeviceMemoryRecord> memory;  // per device, every process's, process after process
  // stop_requested stopped the run before its last step: the vectors above hold the steps that
  // ran (warm-up first), so the measured ones may be fewer than asked for, or none.
  bool stopped_early = false;
};

// A job of several processes, each of which ran the runner over its own devices: the job's
// measurements are the processes' combined as one process combines its devices. A step's time is
// the slowest process's, its loss the mean over processes, its items their sum; wall times and
// waits are the slowest process's; the step phases are every process's devices, process after
// process. Every process must call it (an all-gather), with equal step counts (the flags are).
void combine_across_processes(const ProcessGroup& group, RunMeasurements& measurements);

}  // namespace dpbench
