// create_communicator and enable_peer_access: pick the backend's implementation from the devices'
// kind. The CUDA and NCCL code lives in engine/cuda/ (nccl_communicator.h declares it without
// CUDA headers), as engine/device_factory.cpp reaches create_cuda_device.
#include "engine/communicator.h"

#include <string>

#include "engine/cuda/nccl_communicator.h"
#include "engine/errors.h"
#include "engine/reference/in_process_communicator.h"
#include "engine/reference/process_communicator.h"

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

std::unique_ptr<Communicator> create_communicator(const std::vector<Device*>& devices) {
  switch (common_backend(devices, "create_communicator")) {
    case BackendKind::cuda: return create_nccl_communicator(devices);
    case BackendKind::reference: return create_in_process_communicator(static_cast<int>(devices.size()));
  }
  throw RuntimeError("create_communicator: unknown backend");
}

std::unique_ptr<Communicator> create_process_communicator(Device& device, const ProcessGroup& group) {
  if (device.kind() == BackendKind::cuda) return create_nccl_process_communicator(device, group);
  return create_reference_process_communicator(group);
}

int enable_peer_access(const std::vector<Device*>& devices) {
  // Reference devices share the host's memory already; an empty list has no pairs.
  if (devices.empty() || common_backend(devices, "enable_peer_access") != BackendKind::cuda) return 0;
  std::vector<int> ordinals;
  for (const Device* device : devices) ordinals.push_back(device->index());  // CUDA: index() is the ordinal
  return enable_cuda_peer_access(ordinals);
}

}  // namespace dpbench
