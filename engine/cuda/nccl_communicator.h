// The cuda backend's side of engine/communicator.h: NCCL communicators for CudaDevices (one
// ncclComm_t per GPU from ncclCommInitAll, each call enqueued on a stream of the calling rank's
// device), and peer access between GPUs. Free of CUDA and NCCL headers, so the engine core
// (engine/communicator.cpp) can dispatch here without them, as device_factory does for devices.
#pragma once

#include <memory>
#include <vector>

#include "engine/communicator.h"
#include "engine/process_group.h"

namespace dpbench {

// One rank per device, in the order given; every device must be a CudaDevice on its own GPU.
// Throws RuntimeError naming the NCCL call (and NCCL's last error) when NCCL cannot initialise.
std::unique_ptr<Communicator> create_nccl_communicator(const std::vector<Device*>& devices);
// One rank per process of `group` (mpirun), on this process's GPU `device` (ncclCommInitRank).
std::unique_ptr<Communicator> create_nccl_process_communicator(Device& device, const ProcessGroup& group);

// cudaDeviceEnablePeerAccess for every ordered pair of distinct GPUs among `ordinals` that
// supports it; returns the number of ordered pairs without peer access.
int enable_cuda_peer_access(const std::vector<int>& ordinals);

}  // namespace dpbench
