// Device's constructor and destructor: where a device gets its StepTrace (engine/backend/step_trace.h),
// out of line so that device.h need not include the trace that refers back to it.
#include "engine/backend/device.h"

#include "engine/backend/step_trace.h"

namespace dpbench {

Device::Device() : trace_(std::make_unique<StepTrace>(*this)) {}
Device::~Device() = default;

}  // namespace dpbench
