// The engine's assembly point (engine/backends.h): picks each backend's devices and
// communicators from the devices' kind, and hands every communicator out counted.
#include "engine/backends.h"

#include <string>

#include "engine/communication/process_group.h"
#include "engine/cuda/cuda_factory.h"
#include "engine/errors.h"
#include "engine/reference/in_process_communicator.h"
#include "engine/reference/process_communicator.h"
#include "engine/reference/reference_device.h"

namespace dpbench {
namespace {

// The devices' common backend; throws RuntimeError for an empty list, a null entry or a mix.
BackendKind common_backend(const std::vector<Device*>& devices, const char* what) {
  if (devices.empty()) throw RuntimeError(std::string(what) + ": needs at least one device");
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == nullptr) throw RuntimeError(std::string(what) + ": device " + std::to_string(i) + " is null");
  }
  const BackendKind kind = devices.front()->kind();
  for (const Device* device : devices) {
    if (device->kind() != kind) {
      throw RuntimeError(std::string(what) + ": devices of different backends (" + backend_name(kind) + " and " +
                         backend_name(device->kind()) + "); all must be of one kind");
    }
  }
  return kind;
}

}  // namespace


std::vector<std::unique_ptr<Device>> create_devices(BackendKind kind,
                                                    const std::vector<int>& indices) {
  std::vector<std::unique_ptr<Device>> devices;
  devices.reserve(indices.size());
  for (int index : indices) {
    devices.push_back(kind == BackendKind::cuda ? create_cuda_device(index)
                                                : create_reference_device(index));
  }
  return devices;
}

std::unique_ptr<Device> create_host_device() { return create_reference_device(-1); }

std::unique_ptr<Communicator> create_communicator(const std::vector<Device*>& devices) {
  switch (common_backend(devices, "create_communicator")) {
    case BackendKind::cuda: return counting_communicator(create_nccl_communicator(devices), devices);
    case BackendKind::reference:
      return counting_communicator(create_in_process_communicator(static_cast<int>(devices.size())), devices);
  }
  throw RuntimeError("create_communicator: unknown backend");
}

std::unique_ptr<Communicator> create_process_communicator(Device& device, const ProcessGroup& group) {
  // This process's device is local rank 0 of the calls.
  if (device.kind() == BackendKind::cuda) {
    return counting_communicator(create_nccl_process_communicator(device, group), {&device});
  }
  return counting_communicator(create_reference_process_communicator(group), {&device});
}

int enable_peer_access(const std::vector<Device*>& devices) {
  // Reference devices share the host's memory already; an empty list has no pairs.
  if (devices.empty() || common_backend(devices, "enable_peer_access") != BackendKind::cuda) return 0;
  std::vector<int> ordinals;
  for (const Device* device : devices) ordinals.push_back(device->index());  // CUDA: index() is the ordinal
  return enable_cuda_peer_access(ordinals);
}

}  // namespace dpbench
