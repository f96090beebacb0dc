// NVTX ranges in the "dpbench" domain (see engine/backend/nvtx_ranges.h).
#include "engine/backend/nvtx_ranges.h"

#include <nvtx3/nvToolsExt.h>

namespace dpbench {
namespace {

nvtxDomainHandle_t dpbench_domain() {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("dpbench");
  return domain;
}

}  // namespace

uint64_t nvtx_range_start(const std::string& name) {
  nvtxEventAttributes_t attributes = {};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name.c_str();
  return nvtxDomainRangeStartEx(dpbench_domain(), &attributes);
}

void nvtx_range_end(uint64_t range) { nvtxDomainRangeEnd(dpbench_domain(), range); }

}  // namespace dpbench
