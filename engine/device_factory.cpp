// create_devices: one Device per requested index, for whichever backend the run resolved to.
#include "engine/device_factory.h"

namespace dpbench {

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

}  // namespace dpbench
