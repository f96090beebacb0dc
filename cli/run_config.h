// RunConfig: every resolved run flag. The CLI fills it from the command line (cli/flags.cpp) and
// validates it before anything runs; each layer receives only its own part of it: the models
// their ModelSettings (models/model_settings.h, with the DevicePlacement), the strategies their
// StrategyOptions (strategies/strategy_options.h), the runner its RunnerSettings. RunConfig is
// made of the first two, so every field has one home and one default, and the CLI reads them all
// as one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/backend_kind.h"
#include "models/model_settings.h"
#include "strategies/strategy_options.h"

namespace dpbench {

// How --trace_file is written (cli/trace_output.h).
enum class TraceFormat { perfetto, hta };

struct RunConfig : ModelSettings, StrategyOptions {
  // Model and data (the rest is ModelSettings')
  int total_batch_size = 0;  // strong scaling: 0 = not given
  bool use_fp16 = false;     // tf_cnn_benchmarks' alias for --precision=fp16

  // Devices (gpu_indices and the processes are DevicePlacement's)
  std::string device = "auto";   // as given: auto | gpu | cpu
  BackendKind backend = BackendKind::reference;  // resolved from `device`
  int num_gpus = 1;              // number of devices (GPUs, or reference devices on cpu)
  // The bytes dpbench may hold on each device (Device::memory_limit); 0: not given (a GPU's free
  // memory when the run starts; a reference device has no limit).
  uint64_t device_memory = 0;

  // Synchronisation (the options are StrategyOptions')
  std::string variable_update = "independent";
  bool independent_replica = false;  // as given; replicated + this resolves to independent

  // Optimisation
  std::string optimizer;       // sgd | momentum | adam | adamw; resolved from the model when not given
  double learning_rate = 0.0;  // resolved from the model when not given
  double momentum = 0.9;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double weight_decay = 0.01;  // adamw's decoupled weight decay (torch.optim.AdamW's default)

  // Measurement
  int num_batches = 100;
  int num_warmup_batches = 10;
  int display_every = 10;
  // Replay each replica's step as one CUDA graph where backend, strategy and optimizer allow it:
  // one launch per step instead of one per kernel, so the host never limits the GPUs.
  bool cuda_graph = true;
  // Time the cuDNN convolution algorithms once per shape and keep the fastest (tf_cnn_benchmarks'
  // and PyTorch's cudnn.benchmark); false: take cuDNN's heuristic choice.
  bool cudnn_benchmark = true;
  // Same bits on every run and in every process, at some cost in speed: convolutions by cuDNN's
  // heuristics among its deterministic algorithms, the embedding scatter-add in a fixed order.
  // For checking from outside (param_norm) that two strategies or launches train alike with the
  // real models; the reference backend is deterministic either way.
  bool deterministic = false;
  // Measured step (from 1) bracketed with cudaProfilerStart/Stop, for `ncu --profile-from-start
  // off`; 0: none. The devices drain before and after it, so that step's time is not comparable.
  int profile_step = 0;
  // Seconds a collective, a rendezvous between ranks or a multi-GPU step may make no progress
  // before every rank ends with one line naming the rank that stopped answering (PyTorch DDP's
  // timeout is 600 s; a step here takes well under a second to minutes).
  double collective_timeout = 300;
  // Without MPI (torchrun, srun --mpi=none): the port rank 0 listens on for the others; 0: the
  // launcher's MASTER_PORT, or under srun one derived from the job and step ids.
  int rendezvous_port = 0;
  // MFU's denominator, dense TFLOP/s of one device; 0: from the table of GPUs (engine/machine/gpu_peaks.h).
  double peak_tflops = 0;

  // Output
  std::string result_file = "dpbench_result.json";  // empty: write none
  // Chrome Trace Event JSON of a few steps (engine/backend/step_trace.h); empty: no trace.
  std::string trace_file;
  // perfetto: one file for the job; hta: trace_file is a folder of one trace per device, as
  // Holistic Trace Analysis reads them (reports/hta_trace.h).
  TraceFormat trace_format = TraceFormat::perfetto;
  // The steps it records, as --trace_steps gave them: measured steps count from 1, warm-up steps
  // are wK (K from 1); empty: kDefaultTracedSteps steps from the middle of the measured window.
  std::string trace_steps;
  // NVTX ranges named like the trace's spans, for Nsight Systems.
  bool nvtx = false;

  // fp16 loss scaling (--fp16_loss_scale, --fp16_enable_auto_loss_scale,
  // --fp16_inc_loss_scale_every_n); only with --precision=fp16.
  double fp16_loss_scale = 0;  // 0: not given (128 static, or 2^15 to start automatic scaling)
  bool fp16_enable_auto_loss_scale = false;
  int fp16_inc_loss_scale_every_n = 1000;

  int global_batch_size() const { return batch_size * world_devices(); }
};

}  // namespace dpbench
