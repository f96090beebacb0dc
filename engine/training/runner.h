// Runner: one host thread per device drives forward -> backward -> finish_step; warm-up steps,
// then measured steps. Every step is timed with events on every device (step time = max over
// devices); total time is host wall clock from the synchronised end of warm-up to the end of the
// last step. Progress is read by the calling thread from events and host-visible loss slots, so
// the device threads never stop for it.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/device.h"
#include "engine/communication/process_group.h"
#include "engine/errors.h"
#include "engine/data/batch_source.h"
#include "engine/data/device_feed.h"
#include "engine/training/model.h"
#include "engine/training/optimizer.h"
#include "engine/training/run_measurements.h"
#include "engine/training/strategy.h"

namespace dpbench {

struct RunnerSettings {
  int batch_size = 1;           // per device
  int num_warmup_batches = 10;
  int num_batches = 100;
  int display_every = 10;
  uint64_t seed = 0;
  OptimizerConfig optimizer;
  // 16-bit type of the weight copy the model's ops read (--precision=fp16|bf16); f32: none.
  DataType weight_copy_type = DataType::f32;
  bool cuda_graph = false;  // replay steps as CUDA graphs where possible (see Runner::run)
  // Inference: each step is the model's forward pass (and loss) only; the strategy's hooks never
  // run, so nothing is exchanged or updated (the CLI allows it with independent replicas only).
  bool forward_only = false;
  // One measured step in this many times its parts (StepPhases; Note [timed parts of a step] in
  // runner.cpp): the stopwatch's kernels would cost a short step a few percent.
  int time_parts_every = 10;
  int profile_step = 0;     // measured step (from 1) bracketed for a profiler; 0: none
  // Steps run after the measured ones, untimed (epochs after --timed_epochs).
  int64_t num_trailing_batches = 0;
  // > 0: at the end of every epoch of this many steps the devices drain and its wall time is kept.
  int64_t steps_per_epoch = 0;
  // Host-fed batches (engine/data/device_feed.h); nullptr: the models' own on-device data.
  const BatchSource* data = nullptr;
  FeedSettings feed;
  // mpirun runs: this process's devices are replicas process_rank * devices + r of
  // num_processes * devices; they shard the global batch accordingly.
  int process_rank = 0;
  int num_processes = 1;
  // After one device fails, the others normally stop at their next barrier. A device thread can
  // also be stuck where no abort reaches it (NCCL's connection set-up, or a host wait on kernels
  // that wait for a peer that never launched): if some are still running this long after the
  // failure, on_stuck_devices is called with the failure's message (it is expected not to
  // return: the stuck threads still use the run's state, so the process must end, e.g. with
  // std::_Exit). Without it the runner waits for them, however long.
  std::chrono::milliseconds stuck_device_grace{std::chrono::seconds(20)};
  std::function<void(const std::string& failure)> on_stuck_devices;
  // When no device finishes or enqueues a step for this long, on_no_progress is called with what
  // the run was waiting for (expected not to return: a peer that stopped answering leaves the
  // devices in waits nothing else ends). Unset: wait however long. Set it where a step waits on
  // peers (several GPUs, several processes); a lone device cannot hang on anyone.
  std::chrono::milliseconds no_progress_timeout{0};
  std::function<void(const std::string& waiting_for)> on_no_progress;
  // Asked by each device's thread before it begins a step: true stops the run early (Ctrl-C),
  // every device after the same step (Note [stopping early] in runner.cpp). Unset: never.
  std::function<bool()> stop_requested;
  // Multi-process runs (one device per process): the job's processes. They agree on the step to
  // stop after through votes of this group, and run() hands back the job's measurements, combined
  // across them (combine_across_processes).
  const ProcessGroup* processes = nullptr;
  // Steps recorded into each device's timeline (engine/backend/step_trace.h), 0-based over the run with
  // warm-up first, inclusive; first_traced_step < 0: none. `nvtx`: every span is also an NVTX range.
  int64_t first_traced_step = -1, last_traced_step = -1;
  bool nvtx = false;
  // The run's model built for another batch per device, for the too-little-memory fit's sizing
  // (Note [too little memory]): the sequence models are built for one batch. Unset: the run's
  // own model, at any batch.
  std::function<std::unique_ptr<Model>(int batch)> model_for_batch;
};

// Note [too little memory]
// Every buffer of a run is made at set-up (the parameters, the optimizer's state, each replica's
// activations and workspaces, the strategy's exchange buffers, the runner's own loss slots,
// stopwatch and parameter norm's scratch): the steps allocate nothing. So a device that is too
// small fails while the runner sets up, at the first allocation past the device's memory limit
// (Device::memory_limit), never in a step. The runner then gives back what it made and sizes one
// replica alone on that device, unlimited, at a batch of 1 and of 2: its parameters, optimizer
// state, model replica and the runner's buffers, each category as held once set up (what the
// steps hold). Those two points are the per-category linear fit in the batch
// (memory_categories()'s scales_with_batch: the categories that grow with it take the difference
// per sample, the others stay). What the set-up held for a moment past that (an algorithm
// search's buffers, Note [search memory] in engine/cuda/device_memory.h) is no need: a search
// takes only the room the limit leaves, and with less it searches less. The fit says what the
// batch asked for needs and, with the strategy's own buffers that the caller adds, the largest
// batch that fits. It throws TooLittleDeviceMemory with that fit; the command line turns it into
// one line, after checking that largest batch by sizing the replica there and one past it
// (size_replica_at): the fit is linear, and buffers rounded up to tiles or workspaces that follow
// the algorithms chosen at each batch are not.
// The sizing lifts the limit, not the device's own memory: a replica larger than the whole GPU
// fails it too (cudaMalloc refuses), and then nothing is measured. What the line says then comes
// from the bytes the parameters, gradients and optimizer state are allocated by, counted from the
// layout (ReplicaMemoryFit::model_state), with the strategies' memory rules: how many devices
// fully_sharded needs to leave room beside them.
struct ReplicaMemoryFit {
  int device_index = 0;      // the device that ran out
  uint64_t limit_bytes = 0;  // its memory limit
  uint64_t held_bytes = 0;   // what it held without the run's replica (its own trace buffers)
  int batch_size = 1;        // per device, as asked
  bool fitted = false;       // false: even the sizing at a batch of 1 or 2 did not fit
  CategoryBytes at_one_sample{};  // one replica at a batch of 1, as held once set up
  CategoryBytes per_sample{};     // what each further sample adds
  std::string refused;            // the allocation refused (OutOfDeviceMemory's message)
  // One whole replica's parameters (with their 16-bit copy), gradients and optimizer state,
  // counted from the layout without allocating (ParameterSet::bytes_for, Optimizer::bytes_for):
  // what the line can still say where the sizing did not fit the device (fitted false).
  CategoryBytes model_state{};
  // One replica's need at `batch` per device, by category.
  CategoryBytes need(int batch) const;
};

class TooLittleDeviceMemory : public RuntimeError {
 public:
  explicit TooLittleDeviceMemory(ReplicaMemoryFit fit) : RuntimeError(fit.refused), fit_(std::move(fit)) {}
  const ReplicaMemoryFit& fit() const { return fit_; }

 private:
  ReplicaMemoryFit fit_;
};

// Handed to the progress callback every `display_every` measured steps and after the last one.
struct ProgressSnapshot {
  int64_t measured_step = 0;               // 1-based count of measured steps done
  const std::vector<double>& measured_step_ms;  // every measured step so far (max over devices)
  double loss = 0;                         // this step's loss, mean over replicas
};

class Runner {
 public:
  Runner(const Model& model, Strategy& strategy, std::vector<std::unique_ptr<Device>>& devices,
         RunnerSettings settings);
  ~Runner();

  using ProgressCallback = std::function<void(const ProgressSnapshot&)>;
  using PhaseCallback = std::function<void(const std::string&)>;
  RunMeasurements run(const ProgressCallback& on_progress, const PhaseCallback& on_phase);
  // Note [too little memory]'s sizing: one replica of `model` (world rank `world_rank` of
  // `world_size`) alone on `device`, unlimited, at a batch of 1 and of 2; `refused` is kept as the
  // fit's message. The command line also sizes another configuration of the model with it (the
  // same model recomputing its blocks) on the device that refused the run.
  static ReplicaMemoryFit size_replica_memory(const Model& model, Device& device, const RunnerSettings& settings,
                                              int world_rank, int world_size, const std::string& refused);
  // One replica's bytes at `batch` alone on `device`, unlimited, as held once set up; nullopt
  // where the device itself has too little memory for it.
  static std::optional<CategoryBytes> size_replica_at(const Model& model, Device& device,
                                                      const RunnerSettings& settings, int world_rank, int world_size,
                                                      int batch);
  // Replica `replica`'s parameters now (blocking), e.g. after run(): for checking that strategies
  // train the same model.
  std::vector<float> parameters_of(int replica) const;

 private:
  struct ReplicaState;
  struct RunState;
  class StallWatch;
  class StopGate;
  double step_time_ms(int64_t step) const;
  double step_loss(int64_t step) const;
  // The constructor's work: every replica's buffers and the strategy's.
  void set_up(const Model& model, Strategy& strategy, std::vector<std::unique_ptr<Device>>& devices);
  // Each replica's model, built on one thread per device (the constructor's slow part).
  void create_model_replicas(int num_replicas);
  // The runner's own device buffers of a replica (loss, stopwatch, loss cursor, the parameter
  // norm's scratch): one function, so the fit below sizes exactly what set_up makes.
  static void allocate_bookkeeping(Device& device, ReplicaState& state);
  // The parts of run(), in runner.cpp.
  void drive_device(ReplicaState& state, RunState& run);
  void capture_step(ReplicaState& state, const RunState& run, const std::function<void(bool timed)>& enqueue_step);
  void capture_traced_steps(ReplicaState& state, const RunState& run,
                            const std::function<void(int64_t step, bool timed)>& enqueue_step);
  void start_measurement(RunState& run, std::chrono::steady_clock::time_point now);
  void fail(RunState& run, std::exception_ptr error);
  void report_progress(RunState& run, StallWatch& stall_watch, const ProgressCallback& on_progress,
                       const PhaseCallback& on_phase);
  void wait_for_devices(RunState& run, StallWatch& stall_watch);
  RunMeasurements collect_measurements(const RunState& run);

  const Model& model_;
  Strategy& strategy_;
  std::vector<std::unique_ptr<Device>>& devices_;
  RunnerSettings settings_;
  std::vector<std::unique_ptr<ReplicaState>> replicas_;
};

}  // namespace dpbench
