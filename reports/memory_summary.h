// summary.memory: where every device byte went (README, "Memory"). Built from the runner's
// per-device ledger records (engine/training/run_measurements.h): per device the bytes of each
// category at the run's peak, at the measured steps' peak and at their end (steady state), the
// pinned host memory beside it, and, where the device reports its own figure, that figure and the
// difference named; over the devices, the largest peaks. The console's "Memory:" line reads it
// back, so a result loaded later prints the same line.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/training/run_measurements.h"

namespace dpbench {

// What the device's figure holds beyond the accounted bytes, in words (unaccounted_reason).
inline constexpr const char* kUnaccountedMemoryReason =
    "the device's own figure holds more than dpbench allocates: the CUDA context and any other "
    "process's memory (context_bytes, measured when the device was made), then the libraries' own "
    "allocations (cuBLAS and cuDNN handles, NCCL's buffers) and the allocator's rounding "
    "(libraries_bytes)";

// summary.memory of these devices; an empty object when there are none.
nlohmann::json memory_summary_to_json(const std::vector<DeviceMemoryRecord>& devices);

// NVML's figure beside each device's own: the most memory NVML saw in use on the GPU over the
// measured steps (every process's; summary.gpu_telemetry's memory_used_max_mib), as
// nvml_used_max_bytes of memory.devices[first_device + d] for telemetry.devices[d]. A run's
// telemetry covers its own process's GPUs, which sit from `first_device` on in the memory record.
void add_nvml_memory_figures(const nlohmann::json& telemetry, size_t first_device, nlohmann::json& memory);

// The largest of GiB, MiB and KiB in which `bytes` is at least 1 (KiB below), so a tiny
// reference run does not read 0.0 GiB.
struct MemoryUnit {
  const char* name;
  double bytes;
};
MemoryUnit memory_unit_for(double bytes);

// object[key] where it is a number, else 0 (a result of an older dpbench lacks the key).
double memory_number(const nlohmann::json& object, const char* key);

// The console's "Memory:" line after its label: "peak 8.1 GiB per device in the measured steps:
// parameters 0.5, ...; device reports 9.0 (...)", the fullest device's, without a newline; ""
// where `memory` has no devices (a result of an older dpbench).
std::string describe_memory(const nlohmann::json& memory);

}  // namespace dpbench
