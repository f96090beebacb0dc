// The machine a run measured on (see environment_record.h).
#include "cli/environment_record.h"

#include "engine/environment.h"

namespace dpbench {

EnvironmentRecord describe_environment(BackendKind backend, const std::vector<DeviceDescription>& devices) {
  EnvironmentRecord environment;
  environment.hostname = host_name();
  environment.date = utc_timestamp_iso8601();
  environment.backend = backend_name(backend);
  environment.cpu_model = cpu_model_name();
  environment.variables = variables_with_prefixes({"NCCL_", "CUDA_"});
  for (const DeviceDescription& device : devices)
    environment.devices.push_back(
        {device.index, device.name, device.memory_bytes, device.compute_capability, device.pci_bus_id});
  // The CUDA libraries' versions only where they ran: a reference-backend run loads them (the
  // binary links them) but uses none.
  if (backend != BackendKind::cuda) return environment;
  const LibraryVersions versions = loaded_library_versions();
  environment.cuda_runtime = versions.cuda_runtime;
  environment.cuda_driver = versions.cuda_driver;
  environment.driver = versions.driver;
  environment.cudnn = versions.cudnn;
  environment.nccl = versions.nccl;
  environment.cublas = versions.cublas;
  return environment;
}

}  // namespace dpbench
