// The machine a run measured on (see environment_record.h).
#include "cli/environment_record.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "engine/communication/process_group.h"
#include "engine/machine/environment.h"

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

void describe_every_process(const ProcessGroup& group, EnvironmentRecord& environment) {
  nlohmann::json mine = nlohmann::json::array();
  for (const DeviceRecord& device : environment.devices)
    mine.push_back({device.index, device.name, device.memory_bytes, device.compute_capability, device.pci_bus_id});
  std::vector<DeviceRecord> devices;
  for (const std::string& text : group.all_gather_text(mine.dump()))
    for (const auto& d : nlohmann::json::parse(text))
      devices.push_back({d[0].get<int>(), d[1].get<std::string>(), d[2].get<uint64_t>(), d[3].get<std::string>(),
                         d[4].get<std::string>()});
  environment.devices = devices;
  std::vector<std::string> hosts;
  for (const std::string& host : group.hostnames())
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  std::string joined;
  for (const std::string& host : hosts) joined += (joined.empty() ? "" : ",") + host;
  environment.hostname = joined;
  environment.ranks_per_host.clear();
  for (const std::string& host : group.hostnames()) ++environment.ranks_per_host[host];
  environment.launcher = group.launcher();
}

}  // namespace dpbench
