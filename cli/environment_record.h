// The machine a run or a comm_bench measured on, as results record it: host, date, backend,
// devices and the library versions loaded at run time. One description for every command.
#pragma once

#include <vector>

#include "engine/device.h"
#include "reports/result.h"

namespace dpbench {

EnvironmentRecord describe_environment(BackendKind backend, const std::vector<DeviceDescription>& devices);

}  // namespace dpbench
