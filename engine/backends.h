// The engine's assembly point: devices and communicators of whichever backend a run resolved to.
// The one file that knows both implementations (engine/cuda/, engine/reference/); the interfaces
// (engine/backend/, engine/communication/) know neither.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/communication/communicator.h"
#include "engine/cuda/cuda_factory.h"  // cuda_device_count

namespace dpbench {

class ProcessGroup;

std::vector<std::unique_ptr<Device>> create_devices(BackendKind kind, const std::vector<int>& indices);
// A reference device standing for the host itself (the host parameter server's updates run on it).
std::unique_ptr<Device> create_host_device();

// NCCL communicators for CUDA devices, the in-process one for reference devices (all devices of
// one kind). Throws RuntimeError naming the library call when NCCL cannot initialise.
std::unique_ptr<Communicator> create_communicator(const std::vector<Device*>& devices);
// Across the processes of a multi-process run (engine/communication/process_group.h): this process's one
// device is rank group.rank() and calls it as local rank 0. NCCL (ncclCommInitRank) on GPUs; on
// the reference backend, the group's host exchanges.
std::unique_ptr<Communicator> create_process_communicator(Device& device, const ProcessGroup& group);

// Lets each GPU of `devices` read and write the others' memory directly (cudaDeviceEnablePeerAccess
// for every pair that supports it), so peer copies take NVLink instead of a trip through the host.
// Returns the number of ordered pairs without peer access. No-op on reference devices.
int enable_peer_access(const std::vector<Device*>& devices);

}  // namespace dpbench
