// Result: one benchmark run as dpbench records it (DESIGN section 6; its schema version below).
// Plain data; reports/result_json.* reads and writes it, reports/statistics.* fills the summary.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dpbench {

// 2: summary.comm.messages_per_step, a copy of collectives_per_step, is gone. A version-1 result
// reads as it always did (the extra key is ignored), so both are read.
// 3: summary.memory, where every device byte went (README, "Memory"). Older results read
// without it (an empty object).
constexpr int kResultSchemaVersion = 3;
constexpr int kOldestReadableSchemaVersion = 1;
// "1 to 3", for messages about versions this dpbench cannot read.
inline std::string readable_schema_versions() {
  return std::to_string(kOldestReadableSchemaVersion) + " to " + std::to_string(kResultSchemaVersion);
}

// Distribution of a sample (step times, step rates). Only built from 2 or more samples.
struct DistributionStats {
  int64_t count = 0;
  double mean = 0, median = 0, stddev = 0, min = 0, max = 0, p5 = 0, p95 = 0;
};

struct StepRecord {
  int64_t step = 0;      // 0-based over the whole run, warm-up included
  double time_ms = 0;    // max over devices of the step's CUDA-event (or host) time
  double loss = 0;       // mean over replicas
  bool warmup = false;
  bool after_measurement = false;     // an untimed step after the measured ones (--timed_epochs)
  std::optional<double> data_wait_ms;  // host feed: time the step waited for its batch
  std::optional<int64_t> items;        // host feed: items (images, words) of its global batch
};

struct DeviceRecord {
  int index = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  std::string compute_capability;
  std::string pci_bus_id;  // as NVML and nvidia-smi name the GPU; "" on the reference backend
};

struct EnvironmentRecord {
  std::string hostname;
  std::string date;      // ISO 8601, UTC
  std::string backend;   // "cuda" | "reference"
  // What started the processes: "none" (one process), "mpirun", "srun" or "torchrun".
  std::string launcher = "none";
  std::map<std::string, int> ranks_per_host;  // multi-process runs: host -> its ranks
  std::string cpu_model;                      // /proc/cpuinfo's "model name"; "" where unknown
  // The NCCL_* and CUDA_* environment variables that were set (rank 0's), name -> value.
  std::map<std::string, std::string> variables;
  std::vector<DeviceRecord> devices;
  // Versions actually loaded at run time ("" when not applicable, e.g. no driver).
  std::string cuda_runtime, cuda_driver, driver, cudnn, nccl, cublas;
};

struct Summary {
  double items_per_sec = 0;    // items / total_time_s (ratio of totals)
  std::string unit;            // "images/s", "words/s", "tokens/s", "samples/s"
  double total_time_s = 0;     // host wall clock over the measured steps
  int64_t measured_steps = 0;
  int64_t warmup_steps = 0;
  // Stopped early (Ctrl-C, SIGTERM): the statistics cover the steps measured before the stop,
  // fewer than the run asked for (config.num_batches). Reports leave such runs out.
  bool interrupted = false;
  int64_t num_devices = 0;
  int64_t global_batch_size = 0;
  int64_t items_per_step = 0;  // global
  std::optional<DistributionStats> step_time_ms;    // measured steps only; none if < 2 steps
  std::optional<DistributionStats> items_per_sec_per_step;
  std::optional<double> jitter;  // 1.4826 * MAD of per-step rates (items/s); none if < 2 steps
  double final_loss = 0;
  int64_t num_parameters = 0;
  double param_norm = 0;       // L2 norm (double) of replica 0's final parameters
  nlohmann::json comm = nlohmann::json::object();  // communication counters (strategies)
  bool cuda_graph = false;     // measured steps replayed as CUDA graphs (one launch per step)
  // Kernels one training step launches per device, counted in the step's CUDA graph (library
  // kernels included); none where no step was captured (reference backend).
  std::optional<int64_t> kernel_launches_per_step;
  // The arithmetic actually used: "fp32", "tf32", or "fp16" / "bf16" (16-bit activations and
  // weight copy, fp32 accumulation, fp32 master weights).
  std::string math = "fp32";
  std::string loss_scaling = "none";  // fp16: "fixed" or "automatic"
  double final_loss_scale = 1;        // fp16: the loss scale after the last step
  // Which kernels ran the convolutions and LSTMs (graph API or classic, fused bias + ReLU, cuDNN's
  // LSTM algorithm), counted over their shapes on the first GPU; empty on the reference backend.
  nlohmann::json math_paths = nlohmann::json::object();
  // Where the batches came from and what feeding them cost (data set, feed, waits, epochs);
  // see "Result JSON" in README.md.
  nlohmann::json data = nlohmann::json::object();
  // The GPUs' clocks, power, limits and energy over the measured steps (engine/machine/gpu_telemetry.h);
  // {"available": false, "reason": ...} where they could not be read (reference backend, no NVML).
  nlohmann::json gpu_telemetry = nlohmann::json::object();
  // Where a step's time went, per device and on average; see "Time breakdown" in README.md.
  nlohmann::json breakdown = nlohmann::json::object();
  // The model's FLOPs per step and the throughput and MFU they make; see "Result JSON" in README.md.
  nlohmann::json flops = nlohmann::json::object();
  // Per device, the bytes of each allocation category at the peaks and in steady state, beside
  // what the device reports (reports/memory_summary.h); empty in results before schema 3.
  nlohmann::json memory = nlohmann::json::object();
  // With --trace_file: when backward produced each gradient range, and the step's parts, averaged
  // over the traced measured steps (reports/backward_timeline.h); `dpbench predict` reads it.
  nlohmann::json timeline = nlohmann::json::object();
  // How the run compares with the reference result of its workload (reports/reference_results.h;
  // README, "Is my number normal?"): on GPU runs, and on reference-backend runs given a folder of
  // references (DPBENCH_REFERENCE_RESULTS); empty otherwise and in results written before it.
  nlohmann::json reference = nlohmann::json::object();
};

struct Result {
  int schema_version = kResultSchemaVersion;
  std::string tool_version;
  std::string git_sha;
  EnvironmentRecord environment;
  nlohmann::json config = nlohmann::json::object();  // every resolved flag, under its flag name
  Summary summary;
  std::vector<StepRecord> steps;
  // How the run was started: "argv" (the arguments after the program name) and, where a sweep
  // started it, "run_tag" (DPBENCH_RUN_TAG), by which the sweep knows the result is its own.
  nlohmann::json invocation = nlohmann::json::object();
};

}  // namespace dpbench
