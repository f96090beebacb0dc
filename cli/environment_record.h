// The machine a run or a comm_bench measured on, as results record it: host, date, backend,
// devices and the library versions loaded at run time. One description for every command, and
// for a job of several processes, every process's.
#pragma once

#include <vector>

#include "engine/backend/device.h"
#include "reports/result.h"

namespace dpbench {

EnvironmentRecord describe_environment(BackendKind backend, const std::vector<DeviceDescription>& devices);

class ProcessGroup;
// Collective over `group`: every rank's devices as one list (by rank), the hosts they are on
// ("host-a,host-b", ranks_per_host) and the launcher, in place of this process's own.
void describe_every_process(const ProcessGroup& group, EnvironmentRecord& environment);

}  // namespace dpbench
