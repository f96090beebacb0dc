// Knobs and counters of the CUDA backend for code built without the CUDA headers (the CLI, the
// tests): thin forwarders to CudaDevice and CudaBackend that check what they were given.
#pragma once

#include <cstddef>

namespace dpbench {

class Backend;
class Device;

// CudaDevice::set_cudnn_benchmark. Throws RuntimeError unless `device` is a CUDA device.
void set_cudnn_benchmark(Device& device, bool benchmark);

// CudaDevice::set_tf32: TF32 tensor cores for fp32 GEMMs and convolutions. Throws RuntimeError
// unless `device` is a CUDA device.
void set_tf32(Device& device, bool enabled);

// CudaDevice::set_deterministic. Throws RuntimeError unless `device` is a CUDA device.
void set_deterministic(Device& device, bool deterministic);

// CudaBackend::conv_algorithm_searches. Throws RuntimeError unless `backend` is a CUDA backend.
size_t conv_algorithm_searches(const Backend& backend);

}  // namespace dpbench
