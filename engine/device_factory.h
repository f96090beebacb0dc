// Creating devices: how many CUDA GPUs are present, and Device objects for either backend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"

namespace dpbench {

// Number of usable CUDA GPUs; 0 when there is no driver or no device (never throws).
// `why_none` receives the CUDA error text when the count is 0.
int cuda_device_count(std::string* why_none = nullptr);

std::unique_ptr<Device> create_cuda_device(int ordinal);        // engine/cuda/cuda_device.cpp
std::unique_ptr<Device> create_reference_device(int index);     // engine/reference/reference_device.cpp

std::vector<std::unique_ptr<Device>> create_devices(BackendKind kind, const std::vector<int>& indices);

}  // namespace dpbench
