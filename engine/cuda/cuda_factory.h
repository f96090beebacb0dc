// What engine/backends.cpp reaches of the cuda backend: its devices, its NCCL communicators (one
// ncclComm_t per GPU from ncclCommInitAll, each call enqueued on a stream of the calling rank's
// device) and peer access between GPUs. Free of CUDA and NCCL headers, so the engine's assembly
// point includes it without them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/communication/communicator.h"
#include "engine/communication/process_group.h"

namespace dpbench {

// Number of usable CUDA GPUs; 0 when there is no driver or no device (never throws).
// `why_none` receives the CUDA error text when the count is 0.
int cuda_device_count(std::string* why_none = nullptr);
// The GPU of CUDA ordinal `ordinal` (engine/cuda/cuda_device.cpp).
std::unique_ptr<Device> create_cuda_device(int ordinal);

// One rank per device, in the order given; every device must be a CudaDevice on its own GPU.
// Throws RuntimeError naming the NCCL call (and NCCL's last error) when NCCL cannot initialise.
std::unique_ptr<Communicator> create_nccl_communicator(const std::vector<Device*>& devices);
// One rank per process of `group` (mpirun), on this process's GPU `device` (ncclCommInitRank).
std::unique_ptr<Communicator> create_nccl_process_communicator(Device& device, const ProcessGroup& group);

// cudaDeviceEnablePeerAccess for every ordered pair of distinct GPUs among `ordinals` that
// supports it; returns the number of ordered pairs without peer access.
int enable_cuda_peer_access(const std::vector<int>& ordinals);

}  // namespace dpbench
