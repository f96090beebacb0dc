// What the run ran on: host name, date, and the versions of the CUDA libraries actually loaded
// (which can differ from the ones dpbench was built against).
#pragma once

#include <string>

namespace dpbench {

struct LibraryVersions {
  std::string cuda_runtime;  // "13.0"
  std::string cuda_driver;   // CUDA version the driver supports, "13.0"; "" without a driver
  std::string driver;        // NVIDIA kernel driver, "580.159.04"; "" when unknown
  std::string cudnn;         // "9.19.0"
  std::string nccl;          // "2.28.9"
  std::string cublas;        // "13.0.0"
};

LibraryVersions loaded_library_versions();
std::string host_name();
std::string utc_timestamp_iso8601();

}  // namespace dpbench
